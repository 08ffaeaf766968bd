"""Checkpoint and resume a training loop so a Kiln job survives preemption, eviction and restarts.

A full ``torchrun`` training loop (``torchrun --nproc_per_node=8 train.py``)::

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from kiln.checkpoint import Checkpointer

    def main(total_steps=10_000):
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        model = DDP(torch.nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1000)
        with Checkpointer() as ckpt:            # KILN_CHECKPOINT_DIR, _INTERVAL, _KEEP
            start = ckpt.resume(model=model, optimizer=opt, scheduler=sched)
            for step in range(start, total_steps):
                x = torch.randn(64, 32)         # better: data chosen by `step`, so a resumed run sees what comes next
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                # `step + 1` steps are done: save every interval, and after a stop signal
                # save at once and exit with EXIT_PREEMPTED (75).
                ckpt.step(step + 1, model=model, optimizer=opt, scheduler=sched)
        dist.destroy_process_group()

    if __name__ == "__main__":
        main()

Environment variables, set by Kiln's runtimes in training pods (constructor arguments win):

``KILN_CHECKPOINT_DIR``
    where checkpoints go (``directory=``); required. Every node must see the same directory.
``KILN_CHECKPOINT_INTERVAL``
    save every this many steps (``interval=``), a whole number above 0; default 100.
``KILN_CHECKPOINT_KEEP``
    keep the newest this many checkpoints (``keep=``), 1 or more; default 3.
``KILN_CHECKPOINT_PEER_WAIT``
    how long a rank that stops because another rank got the signal waits for its own (seconds,
    default 60): the group's restart sends it, and until then its pod must not fail first.
``RANK``, ``WORLD_SIZE``
    set by ``torchrun``; used until ``torch.distributed`` is initialized, then its rank wins.

A checkpoint is ``step-NNNNNNNNN.ckpt`` (the number of steps done, 9 digits), written by rank 0
only: into a ``.tmp-`` file of the same directory, fsynced, then renamed, so a file with that name
is always complete. It holds ``{"step": n, "objects": {name: state_dict() or the object}, "time": t}``,
written with ``torch.save`` when torch can be imported (else ``pickle``); loading runs pickle code,
so load only your own checkpoints.

On SIGTERM (Kubernetes evicts or preempts the pod) or SIGINT, the step in progress finishes; then
every rank agrees to stop at the same step, rank 0 saves, and each process exits with
:data:`EXIT_PREEMPTED`. Not 0: a Job counts a pod that exited 0 as succeeded, so an interrupted run
would be "complete". Kiln's runtimes restart on 75 without counting it against ``maxRestarts``, and
fail the job at once on :data:`EXIT_CONFIG`. Those rules see the container's exit code: ``torchrun``
forwards SIGTERM to its workers and waits for them (30 s at most, then SIGKILL), but exits 1 whatever
code they exited with; launch with ``python -m kiln.torchrun`` (torchrun's arguments) to pass 75 and
78 on (see :mod:`kiln.torchrun`). An eviction also marks the pod (its DisruptionTarget condition),
which the runtimes read whatever the exit code. Each step and each saved checkpoint is reported to
the TrainJob's status (``checkpoint_step``, ``checkpoint_path``) by :mod:`kiln.progress`, when the pod
has a status server. Standard library only; torch is used when present.
"""

from __future__ import annotations

import inspect
import os
import pickle
import re
import signal
import sys
import threading
import time
import zipfile
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["Checkpointer", "EXIT_PREEMPTED", "EXIT_CONFIG", "ENV_DIR", "ENV_INTERVAL", "ENV_KEEP", "ENV_PEER_WAIT"]

EXIT_PREEMPTED = 75
"""EX_TEMPFAIL: stopped by a signal after the emergency checkpoint; Kiln restarts the job, uncounted."""
EXIT_CONFIG = 78
"""EX_CONFIG: exit with it on a configuration error; Kiln fails the job at once, no restart."""

ENV_DIR = "KILN_CHECKPOINT_DIR"
ENV_INTERVAL = "KILN_CHECKPOINT_INTERVAL"
ENV_KEEP = "KILN_CHECKPOINT_KEEP"
ENV_PEER_WAIT = "KILN_CHECKPOINT_PEER_WAIT"

_NAME = re.compile(r"step-(\d{9})\.ckpt")
_TMP = ".tmp-"
_UNSET: Any = object()
_torch_module: Any = _UNSET


def _torch() -> Any:
    """The torch module, imported on first use; None when it is not installed."""
    global _torch_module
    if _torch_module is _UNSET:
        try:
            import torch
        except ImportError:
            torch = None
        _torch_module = torch
    return _torch_module


def _group(min_size: int = 1) -> Any:
    """torch.distributed when a process group of at least min_size ranks is initialized, else None."""
    dist = sys.modules.get("torch.distributed")  # no process group can exist before it is imported
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist if dist.get_world_size() >= min_size else None


def _tensor(dist: Any, value: int) -> Any:
    torch = sys.modules["torch"]
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    return torch.tensor([value], dtype=torch.int64, device=device)


def _log(message: str) -> None:
    print("kiln.checkpoint: " + message, file=sys.stderr, flush=True)


def _progress(name: str, *args: Any, **kwargs: Any) -> None:
    """Pass a step or a checkpoint on to :mod:`kiln.progress` (the TrainJob's status); never raises."""
    try:
        from kiln import progress

        getattr(progress, name)(*args, **kwargs)
    except Exception:  # noqa: BLE001 - progress is a nicety; the training loop comes first
        pass


def _setting(arg: str, value: Any, env: str, default: int, minimum: int, expected: str) -> int:
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        try:
            n = int(raw, 10)
        except ValueError:
            n = minimum - 1
        if n < minimum:
            raise ValueError(f"{env}={raw!r}: expected {expected}")
        return n
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{arg}={value!r}: expected {expected}")
    return value


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a platform that cannot open directories
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Checkpointer:
    """Saves training state every ``interval`` steps and on a stop signal; resumes from the newest.

    Create it in the main thread (it installs the signal handlers); :meth:`close` restores the old
    ones, as does leaving a ``with`` block. With ``exit=False``, :meth:`step` returns True instead of
    exiting after a stop signal. A second SIGINT raises KeyboardInterrupt at once.
    """

    def __init__(
        self,
        directory: Optional[str] = None,
        interval: Optional[int] = None,
        keep: Optional[int] = None,
        signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
        exit: bool = True,
    ) -> None:
        if directory is None:
            directory = os.environ.get(ENV_DIR, "").strip() or None
        if directory is None:
            raise ValueError(f"no checkpoint directory: set {ENV_DIR} or pass directory=")
        self.directory = os.path.abspath(os.fspath(directory))
        self.interval = _setting("interval", interval, ENV_INTERVAL, 100, 1, "a whole number of steps, 1 or more")
        self.keep = _setting("keep", keep, ENV_KEEP, 3, 1, "a whole number of checkpoints to keep, 1 or more")
        self._env_rank = _setting("", None, "RANK", 0, 0, "the rank of this process, 0 or more")
        self._env_world = _setting("", None, "WORLD_SIZE", 1, 1, "the number of processes, 1 or more")
        self.exit = exit
        self._signal: Optional[str] = None  # the name of the stop signal that arrived
        self._requested = False
        self._agreed = False
        self._previous: Dict[int, Any] = {}
        signals = tuple(signals)
        if signals and threading.current_thread() is not threading.main_thread():
            raise RuntimeError("create the Checkpointer in the main thread: only it can install signal handlers (or pass signals=())")
        os.makedirs(self.directory, exist_ok=True)
        if self.rank == 0:  # a process that died while writing left these
            for name in os.listdir(self.directory):
                if name.startswith(_TMP):
                    try:
                        os.remove(os.path.join(self.directory, name))
                    except OSError:
                        pass
        for s in signals:
            self._previous[s] = signal.signal(s, self._on_signal)

    @property
    def rank(self) -> int:
        dist = _group()
        return dist.get_rank() if dist is not None else self._env_rank

    @property
    def world_size(self) -> int:
        dist = _group()
        return dist.get_world_size() if dist is not None else self._env_world

    @property
    def stop_requested(self) -> bool:
        """A stop signal arrived here, :meth:`request_stop` was called, or any rank asked to stop."""
        return self._signal is not None or self._requested or self._agreed

    def request_stop(self) -> None:
        """Stop as after a signal: the next :meth:`step` saves and stops."""
        self._requested = True

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._signal is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self._signal = signal.Signals(signum).name
        then = f"exiting with code {EXIT_PREEMPTED}" if self.exit else "stopping"
        # os.write, not print: a handler may interrupt a print to stderr in progress.
        os.write(2, f"kiln.checkpoint: received {self._signal}; saving a checkpoint at the end of this step, then {then}\n".encode())

    def should_stop(self) -> bool:
        """Whether to stop now; in a distributed run every rank must call it, and all get the same answer."""
        local = self.stop_requested
        dist = _group(2)
        if dist is not None:
            flag = _tensor(dist, int(local))
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            local = bool(flag.item())
        self._agreed = self._agreed or local
        return self._agreed

    def step(self, step: int, **objects: Any) -> bool:
        """Call after ``step`` steps are done in all; every rank must. Saves every ``interval`` steps
        and after a stop signal; then exits with :data:`EXIT_PREEMPTED` (or returns True)."""
        _progress("report", step=step)  # cheap: kiln.progress posts the newest now and then
        stop = self.should_stop()
        if stop or step % self.interval == 0:
            self.save(step, **objects)
            dist = _group(2)
            if dist is not None:
                dist.barrier()  # rank 0's checkpoint is complete before any rank goes on or exits
        if not stop:
            return False
        if self.exit:
            self._await_own_stop(step)
        _log(f"stopped after step {step}; " + (f"exiting with code {EXIT_PREEMPTED}" if self.exit else "stopping"))
        if self.exit:
            sys.exit(EXIT_PREEMPTED)
        return True

    def _await_own_stop(self, step: int) -> None:
        """A rank that stops only because another rank was told to (its pod was evicted) waits
        for its own signal: the restart of the group sends it. Exiting at once would fail this
        pod first, as a crash (``torchrun`` exits 1), and the restart would count against
        ``maxRestarts``. It waits KILN_CHECKPOINT_PEER_WAIT seconds at most (default 60)."""
        if self._signal is not None or self._requested or _group(2) is None:
            return
        wait = _setting("", None, ENV_PEER_WAIT, 60, 0, "a whole number of seconds, 0 or more")
        _log(f"stopped after step {step} because another rank was told to stop; waiting up to {wait}s for this process's own stop signal")
        deadline = time.monotonic() + wait
        while self._signal is None and time.monotonic() < deadline:
            time.sleep(0.1)

    def path(self, step: int) -> str:
        return os.path.join(self.directory, f"step-{step:09d}.ckpt")

    def checkpoints(self) -> List[Tuple[int, str]]:
        """The complete checkpoints as (step, path), oldest first."""
        names = (_NAME.fullmatch(n) for n in os.listdir(self.directory))
        return sorted((int(m.group(1)), os.path.join(self.directory, m.group(0))) for m in names if m)

    def latest(self) -> Optional[Tuple[int, str]]:
        """(step, path) of the newest complete checkpoint, or None."""
        found = self.checkpoints()
        return found[-1] if found else None

    def save(self, step: int, **objects: Any) -> Optional[str]:
        """Write a checkpoint atomically (rank 0 only; not collective) and prune old ones; its path, or None."""
        if self.rank != 0:
            return None
        began = time.monotonic()
        state = {
            "step": step,
            "objects": {k: v.state_dict() if hasattr(v, "state_dict") else v for k, v in objects.items()},
            "time": time.time(),
        }
        os.makedirs(self.directory, exist_ok=True)
        path = self.path(step)
        tmp = os.path.join(self.directory, f"{_TMP}step-{step:09d}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            with open(tmp, "xb") as f:
                torch = _torch()
                if torch is not None:
                    torch.save(state, f)
                else:
                    pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(self.directory)
        size = os.path.getsize(path)
        _log(f"saved step {step} to {path} ({size / 1e6:.1f} MB in {time.monotonic() - began:.2f}s)")
        found = self.checkpoints()
        for _, old in [c for c in found if c[1] != path][: max(0, len(found) - self.keep)]:
            try:  # the oldest beyond `keep`, never the one just written
                os.remove(old)
            except OSError:
                pass
        _progress("checkpoint", step, path)
        return path

    def load(self, path: str) -> Dict[str, Any]:
        """Read a checkpoint: ``{"step": n, "objects": {...}, "time": t}``; raises if it is unreadable."""
        if zipfile.is_zipfile(path):  # torch.save's format
            torch = _torch()
            if torch is None:
                raise RuntimeError(f"{path} was written with torch.save: install torch to load it")
            kwargs: Dict[str, Any] = {"map_location": "cpu"}
            if "weights_only" in inspect.signature(torch.load).parameters:
                kwargs["weights_only"] = False  # our own file; it holds more than tensors
            state = torch.load(path, **kwargs)
        else:
            with open(path, "rb") as f:
                state = pickle.load(f)
        if not isinstance(state, dict) or not isinstance(state.get("step"), int) or not isinstance(state.get("objects"), dict):
            raise ValueError(f"{path} is not a kiln checkpoint")
        return state

    def resume(self, **objects: Any) -> int:
        """Restore the objects from the newest checkpoint that loads; the step to start from (0: none).

        Every rank must call it. Rank 0 picks the checkpoint (a corrupt one is skipped with a warning
        for the next older) and tells the others, which load the same file.
        """
        for name, obj in objects.items():
            if not hasattr(obj, "load_state_dict") and not isinstance(obj, dict):
                raise TypeError(f"cannot restore {name}= ({type(obj).__name__}): pass an object with load_state_dict() or a dict")
        dist = _group(2)
        chosen, state = -1, None
        if dist is None or self.rank == 0:
            for step, path in reversed(self.checkpoints()):
                try:
                    state = self.load(path)
                except Exception as e:  # noqa: BLE001 - a truncated file raises anything
                    why = " ".join(str(e).split())
                    _log(f"warning: cannot load {path} ({type(e).__name__}: {why}); trying an older checkpoint")
                    continue
                chosen = step
                break
        if dist is not None:
            flag = _tensor(dist, chosen)
            dist.broadcast(flag, src=0)
            chosen = int(flag.item())
            if chosen >= 0 and state is None:
                path = self.path(chosen)
                if not os.path.exists(path):
                    raise FileNotFoundError(f"rank 0 resumes from {path}, which this rank cannot see: {ENV_DIR} must be shared by all nodes")
                state = self.load(path)
        if chosen < 0 or state is None:
            _log(f"no checkpoint in {self.directory}; starting from step 0")
            return 0
        saved = state["objects"]
        for name, obj in objects.items():
            if name not in saved:
                _log(f"warning: {self.path(chosen)} has no {name!r}; left as it is")
            elif hasattr(obj, "load_state_dict"):
                obj.load_state_dict(saved[name])
            else:
                obj.clear()
                obj.update(saved[name])
        _log(f"resuming from step {chosen} ({self.path(chosen)})")
        return chosen

    def close(self) -> None:
        """Restore the signal handlers that were there before."""
        previous, self._previous = self._previous, {}
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

    def __enter__(self) -> "Checkpointer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
