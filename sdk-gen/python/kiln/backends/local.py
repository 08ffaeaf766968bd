"""Run function trainers on this machine, with no cluster: the Kubeflow SDK's LocalProcessBackend.

    backend = LocalProcessBackend(LocalProcessBackendConfig())
    name = backend.train(trainer=CustomTrainer(func=train, func_args={"lr": 0.01}, num_nodes=2))
    backend.wait_for_job_status(name)
    print("\\n".join(backend.get_job_logs(name)))

A job is one process group started from this Python process: the function's program (its source
and the call with ``func_args``, as a cluster node runs it, :mod:`kiln._function`) written to a
file and run with torchrun on the ``torch-distributed`` runtime (``torchrun --standalone
--nproc_per_node=NUM_NODES``, as the job's Python's torch: each node a local worker process
with its RANK, rendezvous on a free local port), or with ``python`` on a runtime of another
framework (e.g. a cluster's Runtime passed in), once. Its one step is ``node-0``, with every
worker's output, stdout and stderr, in its log file.

Where it differs from Kubeflow's, and why:

- Kubeflow builds a virtualenv per job and pip installs torch and ``packages_to_install`` from
  an index. With no index at hand that cannot work, so here the job runs with the Python that is
  already there (``sys.executable``, or the config's ``python``) and the packages must be
  importable by it: a job whose packages are missing is refused before it starts, naming them.
  ``install_packages=True`` asks for Kubeflow's way: a virtualenv for the job (seeing the
  packages already installed) into which pip installs the missing ones.
- Kubeflow's local backend runs one process whatever ``num_nodes`` says; here ``num_nodes``
  worker processes stand in for the nodes, so WORLD_SIZE and the ranks are the cluster's.
- Kubeflow's local job has one step named ``train``; here it is ``node-0``, the name the
  cluster's first node has (and the default step of ``get_job_logs``, in both SDKs). Step
  statuses are pod phases (Pending, Running, Succeeded, Failed) as on a Kiln cluster, and a
  wait for a job that fails raises :class:`kiln.JobFailedError`, as on a cluster, rather than
  waiting on until the timeout as Kubeflow's local backend does.
- Initializers download nothing here (as in Kubeflow): one given is ignored, with a warning.
  Of the options, only ``Name`` applies (as in Kubeflow); the others are refused.

State: each job has a directory ``STATE_DIR/NAME`` with its program and its log ``node-0.log``.
STATE_DIR is the config's ``state_dir`` (kept), else a temporary directory of this backend
that is removed when Python exits. Jobs live as long as this Python process: at exit it waits
for the ones still running (Kubeflow's job threads keep the interpreter alive the same way),
and Ctrl-C during that wait stops them.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import deque
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Union

from kiln import _function, errors

__all__ = ["LocalProcessBackend", "LOCAL_RUNTIME", "STEP"]

#: The one runtime the local backend has, as Kubeflow's: torch, one node, image "local".
LOCAL_RUNTIME = "torch-distributed"
LOCAL_IMAGE = "local"
#: The packages a runtime needs by framework (Kubeflow's local runtime installs torch).
_RUNTIME_PACKAGES = {"torch": ["torch"]}
#: A job's one step.
STEP = "node-0"
#: The namespace local jobs report (there is none; errors name jobs namespace/name).
NAMESPACE = "local"

# Whole lines reach the shared log as they are printed: unbuffered (PYTHONUNBUFFERED, as many
# shells and CI set it), a print writes its text and its newline apart and two ranks' lines
# interleave ("RANK: 2RANK: 1"); block-buffered, they arrive only at exit.
_LINE_BUFFERED = "import sys; [s.reconfigure(line_buffering=True, write_through=False) for s in (sys.stdout, sys.stderr)]\n"

# torchrun, run by the job's Python (the torch it imports is the torch that launches). torch
# before 2.0 on Python 3.11 or newer (Debian 12's python3-torch 1.13) cannot parse its own
# default "--redirects 0": Flag iteration no longer yields Std.NONE, so from_str returns None.
_TORCHRUN = r"""
import sys
from torch.distributed import run
try:
    from torch.distributed.elastic.multiprocessing.api import Std
    if Std.from_str("0") is None:
        def _from_str(cls, vm):
            if ":" in vm:
                return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
            return Std(int(vm))
        Std.from_str = classmethod(_from_str)
except ImportError:
    pass
sys.argv[0] = "torchrun"
run.main(sys.argv[1:])
"""

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::.*)?$")
_STATUSES = ("Created", "Queued", "Running", "Suspended", "Complete", "Failed")
_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# How long delete_job waits after SIGTERM before SIGKILL.
_STOP_GRACE_SECONDS = 5.0
# Asks the job's Python which requirements it cannot import: by distribution, else by module.
_PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, re, sys
missing = []
for req in sys.argv[1:]:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    name = m.group(1) if m else req
    found = False
    for dist in (name, re.sub(r"[-_.]+", "-", name), re.sub(r"[-_.]+", "_", name)):
        try:
            md.distribution(dist)
            found = True
            break
        except md.PackageNotFoundError:
            pass
    if not found:
        try:
            found = iu.find_spec(re.sub(r"[-.]", "_", name).lower()) is not None
        except (ImportError, ValueError):
            found = False
    if not found:
        missing.append(req)
print(json.dumps(missing))
"""


class _Job:
    """A local job: its process and where its files are."""

    def __init__(self, name: str, runtime: Any, framework: str, num_nodes: int, directory: str) -> None:
        self.name = name
        self.runtime = runtime  # the Runtime it runs on, as given (or the local one)
        self.runtime_name: str = runtime.name
        self.framework = framework
        self.num_nodes = num_nodes
        self.dir = directory
        self.log = os.path.join(directory, STEP + ".log")
        self.created = datetime.now(timezone.utc)
        self.started: Optional[datetime] = None
        self.finished: Optional[datetime] = None
        self.proc: Optional[subprocess.Popen] = None
        self.exit_code: Optional[int] = None
        self.done = threading.Event()

    @property
    def status(self) -> str:
        if self.proc is None:
            return "Created"
        if not self.done.is_set():
            return "Running"
        return "Complete" if self.exit_code == 0 else "Failed"

    @property
    def phase(self) -> str:
        return {"Created": "Pending", "Running": "Running", "Complete": "Succeeded", "Failed": "Failed"}[self.status]

    def failure(self) -> str:
        if self.exit_code is None or self.exit_code == 0:
            return ""
        if self.exit_code < 0:
            try:
                sig = signal.Signals(-self.exit_code).name
            except ValueError:
                sig = str(-self.exit_code)
            what = f"{STEP} was stopped by {sig}"
        else:
            what = f"{STEP} exited with code {self.exit_code}"
        # The error is usually the log's last line (a traceback's); the rest is in the log.
        last = _last_line(self.log)
        return f"{what}: {last}" if last else what


class LocalProcessBackend:
    """Runs function trainers (``CustomTrainer(func=...)``) as processes on this machine.

    ``config`` is a ``LocalProcessBackendConfig`` (or None for its defaults); read from it:
    ``cleanup_venv`` (Kubeflow's: remove the job's virtualenv when it ends, default True),
    ``env`` (variables every job gets; the trainer's ``env`` wins), ``install_packages`` (pip
    install missing packages into a virtualenv for the job, default False), ``python`` (the
    interpreter to run jobs with, default ``sys.executable``) and ``state_dir`` (where job
    directories go, default a temporary directory removed at exit).
    """

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self.cleanup_venv = bool(getattr(config, "cleanup_venv", True))
        self.install_packages = bool(getattr(config, "install_packages", False))
        self.python = getattr(config, "python", None) or sys.executable
        self.env: Dict[str, str] = dict(getattr(config, "env", None) or {})
        state_dir = getattr(config, "state_dir", None)
        self._own_state_dir = not state_dir
        if state_dir:
            self.state_dir = os.path.abspath(os.path.expanduser(str(state_dir)))
            os.makedirs(self.state_dir, exist_ok=True)
        else:
            self.state_dir = tempfile.mkdtemp(prefix="kiln-local-")
        self._jobs: Dict[str, _Job] = {}
        self._lock = threading.Lock()
        atexit.register(self._at_exit)

    # -- runtimes ---------------------------------------------------------------------------

    def list_runtimes(self) -> List[Any]:
        """The local runtimes: ``torch-distributed`` alone, as in Kubeflow."""
        return [self.get_runtime(LOCAL_RUNTIME)]

    def get_runtime(self, name: str) -> Any:
        if name != LOCAL_RUNTIME:
            raise ValueError(f"Runtime '{name}' not found: the local backend has one runtime, {LOCAL_RUNTIME}")
        return _types.runtime(LOCAL_RUNTIME, framework="torch", image=LOCAL_IMAGE, num_nodes=1)

    def get_runtime_packages(self, runtime: Any) -> List[str]:
        """The packages a job on ``runtime`` needs beyond the trainer's (torch for torch)."""
        _, framework = self._runtime(runtime)
        return list(_RUNTIME_PACKAGES.get(framework, []))

    # -- submit -----------------------------------------------------------------------------

    def train(self, runtime: Any = None, initializer: Any = None, trainer: Any = None, options: Optional[Sequence[Any]] = None) -> str:
        """Start a job running ``trainer`` (a ``CustomTrainer``) and return its name.

        ``runtime`` is ``torch-distributed`` (the default) or a Runtime object, e.g. of a
        cluster's runtime of another framework, which runs the function with ``python``.
        ``options`` may name the job (``Name``); the others (Labels, RuntimePatch...) are
        refused, as in Kubeflow.
        Raises ValueError before anything runs for what cannot: no function trainer, a function
        or func_args that cannot run on their own, packages the job's Python lacks.
        """
        if trainer is None or not hasattr(trainer, "func"):
            got = "no trainer" if trainer is None else f"a {type(trainer).__name__}"
            raise ValueError(
                f"the local backend runs a function trainer, CustomTrainer(func=...), got {got}: "
                "a container trainer (CustomTrainerContainer) or a BuiltinTrainer needs a cluster"
            )
        if initializer is not None and (getattr(initializer, "dataset", None) is not None or getattr(initializer, "model", None) is not None):
            warnings.warn(
                "the local backend runs no initializers (as Kubeflow's): nothing is downloaded to /workspace; "
                "fetch the data yourself and pass its path through func_args",
                UserWarning,
                stacklevel=2,
            )
        runtime_obj, framework = self._runtime(runtime)
        kind = _function.entrypoint_kind(framework)
        name = _options(options)
        num_nodes = _num_nodes(getattr(trainer, "num_nodes", None))
        if kind != "torchrun" and num_nodes > 1:
            raise ValueError(
                f"num_nodes={num_nodes}: on a {framework or 'plain'} runtime the local backend runs the function once, with python; "
                f"several local workers need the torch launcher: use runtime {LOCAL_RUNTIME!r}, or num_nodes=1"
            )
        program = _function.function_program(trainer.func, getattr(trainer, "func_args", None))
        packages = list(_RUNTIME_PACKAGES.get(framework, [])) + list(_function._packages(getattr(trainer, "packages_to_install", None)))
        index_urls = _function._index_urls(getattr(trainer, "pip_index_urls", None))
        missing = self._missing(packages)
        if missing and not self.install_packages:
            raise ValueError(_missing_message(missing, self.python, kind))

        with self._lock:
            if name is None:
                name = _new_name(self._jobs)
            elif name in self._jobs:
                raise ValueError(f"TrainJob {name!r} already exists in this local backend: delete it first, or choose another name")
            directory = os.path.join(self.state_dir, name)
            # A directory of that name is from an earlier backend using the same state_dir.
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            job = _Job(name, runtime_obj, framework, num_nodes, directory)
            self._jobs[name] = job

        try:
            env = dict(os.environ)
            env.update({str(k): str(v) for k, v in self.env.items()})
            env.update({str(k): str(v) for k, v in (getattr(trainer, "env", None) or {}).items()})
            self._start(job, program, kind, missing, index_urls, env)
        except BaseException:
            # A job that did not start is not kept.
            with self._lock:
                self._jobs.pop(name, None)
            shutil.rmtree(directory, ignore_errors=True)
            raise
        job.started = datetime.now(timezone.utc)
        threading.Thread(target=self._reap, args=(job,), name=f"kiln-local-{name}", daemon=True).start()
        return name

    def _start(self, job: _Job, program: str, kind: str, missing: List[str], index_urls: List[str], env: Dict[str, str]) -> None:
        path = os.path.join(job.dir, f"train_{job.name}.py")  # Kubeflow's local file name
        with open(path, "w", encoding="utf-8") as f:
            f.write(_LINE_BUFFERED + program)
        command = self._command(job, path, kind, missing, index_urls)
        with open(os.path.join(job.dir, "command.json"), "w", encoding="utf-8") as f:
            json.dump(command, f, indent=1)
        with open(job.log, "ab") as log:
            try:
                # A session of its own: the job is a process group delete_job stops as one, and
                # Ctrl-C in this terminal does not reach it.
                job.proc = subprocess.Popen(command, cwd=job.dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                raise ValueError(f"TrainJob {job.name}: cannot start {command[0]}: {e}") from None

    # -- read -------------------------------------------------------------------------------

    def list_jobs(self, runtime: Any = None) -> List[Any]:
        """The jobs of this backend, oldest first; ``runtime`` keeps those of one runtime."""
        want = None if runtime is None else (runtime if isinstance(runtime, str) else getattr(runtime, "name", None))
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: j.created)
        return [self._train_job(j) for j in jobs if want is None or j.runtime_name == want]

    def get_job(self, name: str) -> Any:
        return self._train_job(self._job(name))

    def get_job_logs(self, name: str, step: Optional[str] = STEP, follow: bool = False, tail: Optional[int] = None) -> Iterator[str]:
        """The lines the job printed (its workers' output together, stdout and stderr).

        ``step`` is ``node-0`` (its one step), or None for every step with each line prefixed
        ``[node-0]``, as the cluster client does. ``follow`` streams new lines until the job
        ends; ``tail`` starts with the last lines.
        """
        job = self._job(name)
        if step is not None and step != STEP:
            raise ValueError(f"TrainJob {name} has no step {step!r}: a local job has one, {STEP}")
        prefix = "" if step else f"[{STEP}] "
        return self._lines(job, follow, tail, prefix)

    def get_job_events(self, name: str) -> List[Any]:
        """No events: a local job has no Kubernetes objects."""
        self._job(name)
        return []

    def wait_for_job_status(
        self,
        name: str,
        status: Union[str, Iterable[str]] = frozenset({"Complete"}),
        timeout: float = 600,
        polling_interval: Optional[float] = 2,
        callbacks: Optional[Sequence[Callable[[Any], None]]] = None,
    ) -> Any:
        """Wait until the job reaches one of ``status`` and return it.

        Each callback is called with the job at every poll. A job that fails while ``Failed``
        is not among ``status`` raises :class:`kiln.JobFailedError`; ``timeout`` seconds raise
        TimeoutError. The wait ends as soon as the process does, not at the next poll.
        """
        wanted = _statuses(status)
        if polling_interval is None:  # kiln's TrainerClient passes None for "its default"
            polling_interval = min(2.0, timeout / 2)
        if polling_interval <= 0:
            raise ValueError(f"Polling interval must be a positive number, got polling_interval={polling_interval}")
        if polling_interval >= timeout:
            raise ValueError(f"Polling interval must be strictly less than timeout. Received polling_interval={polling_interval}, timeout={timeout}")
        job = self._job(name)
        deadline = time.monotonic() + timeout
        while True:
            tj = self._train_job(job)
            for cb in callbacks or ():
                cb(tj)
            if tj.status in wanted:
                return tj
            if tj.status == "Failed":
                raise errors.JobFailedError(tj)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.DeadlineExceededError(f"TrainJob {NAMESPACE}/{name} did not reach {'/'.join(sorted(wanted))} in {timeout:g}s (it is {tj.status})")
            job.done.wait(min(polling_interval, remaining))

    # -- control ----------------------------------------------------------------------------

    def delete_job(self, name: str) -> None:
        """Stop the job (SIGTERM to its process group, SIGKILL after 5 s) and remove it with its
        directory."""
        job = self._job(name)
        self._stop(job)
        with self._lock:
            self._jobs.pop(name, None)
        shutil.rmtree(job.dir, ignore_errors=True)

    def close(self) -> None:
        """Stop every job and remove the state directory if this backend made it."""
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
        for job in jobs:
            self._stop(job)
        if self._own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- inside -----------------------------------------------------------------------------

    def _runtime(self, runtime: Any) -> "tuple[Any, str]":
        """A runtime and its framework: the local one by name, or any Runtime object."""
        if runtime is None:
            runtime = LOCAL_RUNTIME
        if isinstance(runtime, str):
            runtime = self.get_runtime(runtime)
        elif not isinstance(getattr(runtime, "name", None), str):
            raise ValueError(f"runtime: want a runtime name or a Runtime, got a {type(runtime).__name__}")
        return runtime, _framework(runtime)

    def _job(self, name: str) -> _Job:
        with self._lock:
            job = self._jobs.get(name)
        if job is None:
            raise _NotFound(f'TrainJob "{name}" not found in the local backend')
        return job

    def _missing(self, packages: List[str]) -> List[str]:
        if not packages:
            return []
        try:
            out = subprocess.run([self.python, "-c", _PROBE, *packages], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ValueError(f"cannot run the local backend's Python {self.python}: {e}") from None
        if out.returncode != 0:
            raise ValueError(f"cannot ask {self.python} which packages it has: {out.stderr.strip()[-500:]}")
        return list(json.loads(out.stdout))

    def _command(self, job: _Job, path: str, kind: str, missing: List[str], index_urls: List[str]) -> List[str]:
        python = self.python
        venv = os.path.join(job.dir, "venv")
        if missing:
            python = os.path.join(venv, "bin", "python")
        if kind == "torchrun":
            # --standalone: rendezvous on a free local port, so jobs side by side do not collide.
            # A 0.2 s monitor: torch 1.x looks at its workers every 5 s, a wait for nothing.
            run = [python, "-c", _TORCHRUN, "--standalone", f"--nproc_per_node={job.num_nodes}", "--monitor_interval=0.2", path]
        else:
            run = [python, path]
        if not missing:
            return run
        # Kubeflow's way, for the packages this Python lacks: a virtualenv for the job that sees
        # the packages already installed, pip installs into it, and it is removed at the end.
        lines = []
        if self.cleanup_venv:
            # On every way out, a failed install's "exit 1" included.
            lines.append(f"trap {shlex.quote('rm -rf ' + shlex.quote(venv))} EXIT")
        lines += [
            f"{shlex.quote(self.python)} -m venv --system-site-packages --without-pip {shlex.quote(venv)} || exit 1",
            _function.install_script(missing, index_urls, python=shlex.quote(python), log=shlex.quote(os.path.join(job.dir, "pip-install.log")), user=False),
            " ".join(shlex.quote(a) for a in run),
        ]
        return ["bash", "-c", "\n".join(lines) + "\n"]

    def _reap(self, job: _Job) -> None:
        assert job.proc is not None
        job.exit_code = job.proc.wait()
        job.finished = datetime.now(timezone.utc)
        job.done.set()

    def _stop(self, job: _Job) -> None:
        proc = job.proc
        if proc is None:
            return
        if not job.done.is_set():
            _killpg(proc.pid, signal.SIGTERM)
            job.done.wait(_STOP_GRACE_SECONDS)
        # Workers the launcher left behind, or a launcher that ignored SIGTERM.
        _killpg(proc.pid, signal.SIGKILL)
        job.done.wait(_STOP_GRACE_SECONDS)

    def _lines(self, job: _Job, follow: bool, tail: Optional[int], prefix: str) -> Iterator[str]:
        with open(job.log, "rb") as f:
            if tail is not None:
                if tail < 0:
                    raise ValueError(f"tail {tail}: want a number of lines, at least 0")
                last = deque(f.read().decode("utf-8", "replace").splitlines(), maxlen=tail) if tail else deque()
                for line in last:
                    yield prefix + line
                # The log is now read to its end; what follows is new.
            partial = b""
            while True:
                # Seen before reading: once the process has ended, one more read gets all it wrote.
                finished = job.done.is_set()
                chunk = f.read(65536)
                if chunk:
                    *lines, partial = (partial + chunk).split(b"\n")
                    for line in lines:
                        yield prefix + line.decode("utf-8", "replace").rstrip("\r")
                    continue
                if not follow or finished:
                    break
                job.done.wait(0.2)
            if partial:
                yield prefix + partial.decode("utf-8", "replace").rstrip("\r")

    def _train_job(self, job: _Job) -> Any:
        return _types.train_job(job)

    def _at_exit(self) -> None:
        with self._lock:
            running = [j for j in self._jobs.values() if j.proc is not None and not j.done.is_set()]
        try:
            if running:
                print(
                    f"kiln: waiting for {len(running)} local job(s) still running: {', '.join(j.name for j in running)} (Ctrl-C stops them)",
                    file=sys.stderr,
                    flush=True,
                )
                for j in running:
                    j.done.wait()
        except KeyboardInterrupt:
            pass
        self.close()


class _NotFound(errors.NotFoundError, ValueError):
    """A job this backend does not have: kiln's NotFoundError (a RuntimeError, as the cluster
    client raises), and a ValueError, as Kubeflow's local backend raises."""


def _last_line(path: str) -> str:
    """What a failed job's log says about why: the exception that ended its first traceback
    near the end (in a distributed job the first failure is the cause and the other ranks'
    errors, then torchrun's ChildFailedError, follow from it), else its last line."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 65536))
            # Not the rules of "=" or "-" torchrun frames its error summary with.
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip().strip("=-*")]
    except OSError:
        return ""
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")), len(lines))
    for ln in lines[start:]:
        m = _EXCEPTION_LINE.match(ln)
        if m and not m.group(1).endswith("ChildFailedError"):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _framework(runtime: Any) -> str:
    """A runtime's framework: kiln's ``runtime.framework`` or Kubeflow's ``runtime.trainer.framework``."""
    fw = getattr(runtime, "framework", None)
    if not isinstance(fw, str):
        fw = getattr(getattr(runtime, "trainer", None), "framework", None)
    return fw if isinstance(fw, str) else ""


def _num_nodes(n: Any) -> int:
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"trainer.num_nodes: want a whole number of at least 1, got {n!r}")
    return n


def _new_name(taken: Dict[str, Any]) -> str:
    # Kubeflow's: a letter and 11 hex digits.
    while True:
        name = random.choice(string.ascii_lowercase) + uuid.uuid4().hex[:11]
        if name not in taken:
            return name


def _options(options: Optional[Sequence[Any]]) -> Optional[str]:
    """The job name an option gives (Kubeflow's Name, by its field). As in Kubeflow, Name is the
    one option every backend takes; the others act on Kubernetes objects, which a local job
    does not have, and are refused."""
    name: Optional[str] = None
    for opt in options or ():
        if isinstance(getattr(opt, "name", None), str) and type(opt).__name__ == "Name":
            name = opt.name
        else:
            raise ValueError(
                f"option {type(opt).__name__} is not compatible with the local backend: it acts on the TrainJob's Kubernetes objects, "
                "which a local job does not have (Name is the option every backend takes); drop it for local runs"
            )
    if name is not None and (len(name) > 63 or not _NAME_RE.match(name)):
        raise ValueError(f"Name {name!r}: want lowercase letters, digits and '-', starting with a letter, at most 63 characters")
    return name


def _statuses(status: Union[str, Iterable[str]]) -> Set[str]:
    items = {status} if isinstance(status, str) else set(status)
    bad = sorted(s for s in items if s not in _STATUSES)
    if bad:
        raise ValueError(f"status {', '.join(bad)}: want one of {', '.join(_STATUSES)}")
    if not items:
        raise ValueError(f"status: name at least one of {', '.join(_STATUSES)}")
    return items


def _missing_message(missing: List[str], python: str, kind: str) -> str:
    why = " (the torch-distributed runtime runs the function with torch's launcher)" if kind == "torchrun" and "torch" in missing else ""
    return (
        f"the local backend runs the job with {python}, which cannot import {', '.join(missing)}{why}. "
        f"It installs nothing unless asked: install them there ({python} -m pip install {' '.join(shlex.quote(m) for m in missing)}), "
        "point LocalProcessBackendConfig(python=...) at a Python that has them, "
        "or set LocalProcessBackendConfig(install_packages=True) to pip install them into a virtualenv for the job (needs a reachable index)"
    )


class _Types:
    """Builds kiln's TrainJob, Step and Runtime from local facts, by their field names, from
    kiln.types when it has them, else kiln.client (imported here, when first needed)."""

    def cls(self, name: str) -> Any:
        for module in ("kiln.types", "kiln.client"):
            try:
                mod = __import__(module, fromlist=[name])
            except ImportError:
                continue
            c = getattr(mod, name, None)
            if c is not None:
                return c
        raise ImportError(f"kiln has no {name} type (looked in kiln.types and kiln.client)")

    def new(self, type_name: str, /, **values: Any) -> Any:
        c = self.cls(type_name)
        if dataclasses.is_dataclass(c):
            fields = {f.name for f in dataclasses.fields(c) if f.init}
            values = {k: v for k, v in values.items() if k in fields}
        return c(**values)

    def runtime(self, name: str, *, framework: str, image: str, num_nodes: int) -> Any:
        c = self.cls("Runtime")
        values: Dict[str, Any] = dict(
            name=name,
            namespace="",
            framework=framework,
            image=image,
            num_nodes=num_nodes,
            # Kubeflow's local runtime is a TrainingRuntime (not cluster-wide).
            kind="TrainingRuntime",
            cluster=False,
            deprecated=False,
            steps=["node"],
        )
        required = {f.name for f in dataclasses.fields(c) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING} if dataclasses.is_dataclass(c) else set()
        if "trainer" in required:  # Kubeflow's own shape: Runtime(name, trainer=RuntimeTrainer(...))
            trainer_type = getattr(self.cls("TrainerType"), "CUSTOM_TRAINER", None)
            values["trainer"] = self.new("RuntimeTrainer", trainer_type=trainer_type, framework=framework, image=image, num_nodes=num_nodes)
        return self.new("Runtime", **values)

    def train_job(self, job: _Job) -> Any:
        status = job.status
        reason = "Error" if status == "Failed" else ""
        message = job.failure()
        step = self.new(
            "Step",
            name=STEP,
            status=job.phase,
            pod=f"{job.name}-{STEP}",
            pod_name=f"{job.name}-{STEP}",
            node=socket.gethostname(),
            devices={},
            device="cpu",
            device_count=str(job.num_nodes),
            exit_code=job.exit_code,
            reason=reason,
            message=message,
        )
        return self.new(
            "TrainJob",
            name=job.name,
            namespace=NAMESPACE,
            runtime=job.runtime,
            status=status,
            reason=reason,
            message=message,
            num_nodes=job.num_nodes,
            creation_timestamp=job.created,
            start_time=job.started,
            completion_time=job.finished,
            labels={},
            steps=[step],
        )


_types = _Types()
