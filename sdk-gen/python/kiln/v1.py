"""The Kiln API's typed messages, enums and service clients (package kiln.v1), generated from
api/proto. Use them with :class:`kiln.TrainerClient`'s ``jobs``, ``runtimes``, ``queues``,
``info`` and ``schedules`` attributes for what the high-level verbs do not cover."""

from kiln._gen.kiln_v1 import *  # noqa: F401,F403
from kiln._gen.kiln_v1 import __all__  # noqa: F401
