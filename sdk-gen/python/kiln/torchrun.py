"""``torchrun`` that passes its workers' exit codes 75 and 78 on: ``python -m kiln.torchrun ARGS``.

Kiln's runtimes read a training pod's exit code (docs/fault-tolerance.md):
:data:`~kiln.checkpoint.EXIT_PREEMPTED` (75, a stop signal after the emergency checkpoint) restarts the
job without counting against ``maxRestarts``, :data:`~kiln.checkpoint.EXIT_CONFIG` (78) fails it at
once. ``torchrun`` exits 1 whenever a worker failed, whatever its code; this runs ``torchrun`` (same
arguments, in this process) and exits with:

- 78 when a worker exited 78, else 75 when one exited 75;
- 75 when ``torchrun`` itself got a stop signal (SIGTERM from the kubelet: the pod is being stopped;
  ``torchrun`` forwarded it to the workers and waited for them);
- otherwise what ``torchrun`` exits with.

Needs PyTorch; the rest of the SDK does not.
"""

from __future__ import annotations

import sys
from typing import List, Optional

from kiln.checkpoint import EXIT_CONFIG, EXIT_PREEMPTED

__all__ = ["main", "exit_code"]


def exit_code(worker_codes: List[int]) -> int:
    """The exit code of a run whose failed workers exited with worker_codes."""
    for code in (EXIT_CONFIG, EXIT_PREEMPTED):
        if code in worker_codes:
            return code
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    sys.argv[0] = "torchrun"
    try:
        run.main(argv)
    except ChildFailedError as e:
        code = exit_code([f.exitcode for f in e.failures.values()])
        print(f"kiln.torchrun: a worker failed; exiting with code {code}", file=sys.stderr, flush=True)
        return code
    except SignalException as e:
        print(f"kiln.torchrun: stopped by signal {e.sigval}; exiting with code {EXIT_PREEMPTED}", file=sys.stderr, flush=True)
        return EXIT_PREEMPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
