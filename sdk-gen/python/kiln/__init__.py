"""Kiln's Python SDK: submit, follow and control training jobs on a Kiln cluster.

    from kiln import TrainerClient, CustomTrainerContainer

    client = TrainerClient()  # the Kiln configuration, as the kiln CLI reads it
    name = client.train(
        runtime="torch-distributed",
        trainer=CustomTrainerContainer(command=["torchrun", "train.py"], num_nodes=2),
        active_deadline_seconds=28800,
        ttl_seconds_after_finished=86400,
    )
    client.wait_for_job_status(name, status={"Complete"})

    # and every Sunday at 02:00 in Berlin, one run at a time
    client.create_schedule("weekly", "0 2 * * 0", "torch-distributed", time_zone="Europe/Berlin", concurrency_policy="Forbid")

Standard library only (Python 3.9 or newer). The typed messages and service clients of the
API are in :mod:`kiln.v1`; every error is a :class:`kiln.KilnError`.
"""

from kiln.client import (
    DEFAULT_RUNTIME,
    STATUSES,
    Checkpoint,
    CustomTrainerContainer,
    Event,
    Initializer,
    MetricPoint,
    Progress,
    Queue,
    Runtime,
    RuntimeRef,
    RuntimeTrainer,
    Schedule,
    Step,
    TrainerClient,
    TrainJob,
)
from kiln.config import ConfigError
from kiln.errors import *  # noqa: F401,F403 - one exception per Connect code
from kiln.errors import __all__ as _errors

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RUNTIME",
    "STATUSES",
    "Checkpoint",
    "ConfigError",
    "CustomTrainerContainer",
    "Event",
    "Initializer",
    "MetricPoint",
    "Progress",
    "Queue",
    "Runtime",
    "RuntimeRef",
    "RuntimeTrainer",
    "Schedule",
    "Step",
    "TrainerClient",
    "TrainJob",
    *_errors,
]
