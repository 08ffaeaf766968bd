"""kiln.backends.local: jobs run as processes on this machine, with no platform. A plain-python job
from start to logs (always), failures, timeouts, deletion of a whole process group, what it
refuses; and the Kubeflow examples (examples/kubeflow) run through it with torch DDP on gloo
when a Python with torch is at hand (Debian's python3-torch will do)."""

import contextlib
import dataclasses
import io
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import types
import unittest
import warnings
from typing import Callable, Dict, List, Optional
from unittest import mock

import kiln
from kiln import errors
from kiln.backends import local
from kiln.backends.local import LocalProcessBackend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "kubeflow")


def _kiln_types():
    """Whether kiln has the TrainJob, Step and Runtime types the backend returns."""
    try:
        for name in ("TrainJob", "Step", "Runtime"):
            local._types.cls(name)
    except ImportError:
        return False
    return True


HAVE_TYPES = _kiln_types()


@dataclasses.dataclass
class _StandInTrainer:
    """Kubeflow's CustomTrainer fields, for as long as kiln does not export CustomTrainer."""

    func: Callable
    func_args: Optional[dict] = None
    image: Optional[str] = None
    packages_to_install: Optional[List[str]] = None
    pip_index_urls: List[str] = dataclasses.field(default_factory=lambda: ["https://pypi.org/simple"])
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[Dict[str, str]] = None


def _custom_trainer():
    c = getattr(kiln, "CustomTrainer", None)
    if c is None:
        try:
            from kiln import types as kt

            c = getattr(kt, "CustomTrainer", None)
        except ImportError:
            c = None
    return c or _StandInTrainer


CustomTrainer = _custom_trainer()
PLAIN = types.SimpleNamespace(name="plain-python", framework="")  # a runtime of no torch: python


def _torch_python():
    """A Python that imports torch: this one, else the system's (Debian's python3-torch).
    KILN_SDK_TORCH_TESTS=0 says none: make test's second pass (the oldest Python the SDK
    supports) would run the same torch jobs with the same interpreter again."""
    if os.environ.get("KILN_SDK_TORCH_TESTS") == "0":
        return None
    for py in dict.fromkeys([sys.executable, "/usr/bin/python3", shutil.which("python3") or ""]):
        if py and os.path.exists(py):
            try:
                ok = subprocess.run([py, "-c", "import torch.distributed"], capture_output=True, timeout=120).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                return py
    return None


def write_args(path, lr, epochs):
    import json
    import os

    print("training", lr, epochs)
    print("env", os.environ.get("KILN_TEST_VAR"), os.environ.get("FROM_CONFIG"))
    with open(path, "w") as f:
        json.dump({"lr": lr, "epochs": epochs, "cwd": os.getcwd()}, f)
    print("done")


def fail_loudly():
    print("about to fail")
    raise RuntimeError("the loss went to nan")


def sleep_with_child(pid_file):
    import subprocess
    import sys
    import time

    # A child of its own, as torchrun's workers are: deleting the job must stop it too.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(pid_file, "w") as f:
        f.write(str(child.pid))
    print("sleeping", flush=True)
    time.sleep(120)


def rank_one_breaks():
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    if dist.get_rank() == 1:
        raise ValueError("rank one broke")
    dist.barrier()


def count_lines(n):
    import time

    for i in range(n):
        print("line", i, flush=True)
        time.sleep(0.05)


def uses_test_package():
    import kiln_test_pkg

    print("value", kiln_test_pkg.VALUE)


def make_index(directory):
    """A package index in directory (PEP 503, as pip reads a file:// URL) with one wheel:
    kiln-test-pkg 0.1, whose module kiln_test_pkg has VALUE = 42. Returns its URL."""
    import base64
    import hashlib
    import zipfile

    files = {
        "kiln_test_pkg/__init__.py": b"VALUE = 42\n",
        "kiln_test_pkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: kiln-test-pkg\nVersion: 0.1\n",
        "kiln_test_pkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: kiln-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b'=').decode()},{len(v)}\n" for k, v in files.items()
    )
    project = os.path.join(directory, "kiln-test-pkg")
    os.makedirs(project)
    wheel = "kiln_test_pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(project, wheel), "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
        z.writestr("kiln_test_pkg-0.1.dist-info/RECORD", record + "kiln_test_pkg-0.1.dist-info/RECORD,,\n")
    with open(os.path.join(project, "index.html"), "w") as f:
        f.write(f'<html><body><a href="{wheel}">{wheel}</a></body></html>\n')
    return "file://" + directory


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie no one reaped yet is not alive.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


@unittest.skipUnless(HAVE_TYPES, "kiln has no TrainJob/Step/Runtime types yet (kiln.types or kiln.client)")
class LocalBackendTest(unittest.TestCase):
    def backend(self, **config):
        b = LocalProcessBackend(types.SimpleNamespace(**config) if config else None)
        self.addCleanup(b.close)
        return b

    def test_plain_python_job(self):
        b = self.backend(env={"FROM_CONFIG": "yes"})
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            t = CustomTrainer(func=write_args, func_args={"path": out, "lr": 0.1, "epochs": 3}, env={"KILN_TEST_VAR": "hello"})
            name = b.train(runtime=PLAIN, trainer=t)
            seen = []
            job = b.wait_for_job_status(name, timeout=60, polling_interval=0.5, callbacks=[seen.append])
            self.assertEqual(job.status, "Complete")
            self.assertTrue(seen and seen[-1].status == "Complete")
            with open(out) as f:
                self.assertEqual(f.read()[:27], '{"lr": 0.1, "epochs": 3, "c')
        self.assertEqual(job.name, name)
        self.assertEqual(job.runtime.name, "plain-python")
        self.assertEqual(job.num_nodes, 1)
        self.assertEqual(job.namespace, "local")
        self.assertIsNotNone(job.creation_timestamp)
        self.assertLessEqual(job.start_time, job.completion_time)
        self.assertEqual([s.name for s in job.steps], ["node-0"])
        self.assertEqual(job.steps[0].status, "Succeeded")
        self.assertEqual(job.steps[0].pod_name, f"{name}-node-0")
        self.assertEqual(job.steps[0].exit_code, 0)
        self.assertEqual(list(b.get_job_logs(name)), ["training 0.1 3", "env hello yes", "done"])
        self.assertEqual(list(b.get_job_logs(name, step=None)), ["[node-0] training 0.1 3", "[node-0] env hello yes", "[node-0] done"])
        self.assertEqual(list(b.get_job_logs(name, tail=1)), ["done"])
        self.assertEqual(list(b.get_job_logs(name, follow=True)), ["training 0.1 3", "env hello yes", "done"])
        with self.assertRaisesRegex(ValueError, "no step 'node-1'"):
            list(b.get_job_logs(name, step="node-1"))
        self.assertEqual(b.get_job_events(name), [])
        self.assertEqual([j.name for j in b.list_jobs()], [name])
        self.assertEqual([j.name for j in b.list_jobs(runtime="plain-python")], [name])
        self.assertEqual(b.list_jobs(runtime="torch-distributed"), [])
        self.assertEqual(b.get_job(name).status, "Complete")
        directory = os.path.join(b.state_dir, name)
        self.assertTrue(os.path.exists(os.path.join(directory, f"train_{name}.py")))
        b.delete_job(name)
        self.assertFalse(os.path.exists(directory))
        with self.assertRaises(errors.NotFoundError):
            b.get_job(name)
        with self.assertRaises(ValueError):  # as Kubeflow's local backend raises
            b.get_job(name)

    @unittest.skipUnless(hasattr(kiln, "LocalProcessBackendConfig"), "kiln has no LocalProcessBackendConfig yet")
    def test_through_trainer_client(self):
        # What a Kubeflow user writes: TrainerClient(backend_config=LocalProcessBackendConfig()).
        client = kiln.TrainerClient(backend_config=kiln.LocalProcessBackendConfig())
        self.assertIsInstance(client._local, LocalProcessBackend)
        self.addCleanup(client._local.close)
        options = []
        try:
            from kiln.options import Name

            options = [Name("through-the-client")]
        except ImportError:
            pass
        name = client.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 3}), options=options)
        job = client.wait_for_job_status(name, timeout=60)
        self.assertEqual(job.status, "Complete")
        self.assertEqual(list(client.get_job_logs(name)), ["line 0", "line 1", "line 2"])
        self.assertEqual([j.name for j in client.list_jobs()], [name])
        if options:
            self.assertEqual(name, "through-the-client")
        client.delete_job(name)
        self.assertEqual(client.list_jobs(), [])

    def test_follow_streams_while_running(self):
        b = self.backend()
        name = b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 20}))
        got = []
        for line in b.get_job_logs(name, follow=True):
            got.append(line)
            if len(got) == 1:
                self.assertEqual(b.get_job(name).status, "Running")  # the first line came before the end
        self.assertEqual(got, [f"line {i}" for i in range(20)])
        self.assertEqual(b.get_job(name).status, "Complete")

    def test_failure(self):
        b = self.backend()
        name = b.train(runtime=PLAIN, trainer=CustomTrainer(func=fail_loudly))
        with self.assertRaises(errors.JobFailedError) as cm:
            b.wait_for_job_status(name, timeout=60, polling_interval=0.5)
        self.assertIn("node-0 exited with code 1: RuntimeError: the loss went to nan", str(cm.exception))
        job = b.wait_for_job_status(name, status={"Failed"}, timeout=60, polling_interval=0.5)
        self.assertEqual((job.status, job.reason, job.steps[0].status, job.steps[0].exit_code), ("Failed", "Error", "Failed", 1))
        logs = list(b.get_job_logs(name))
        self.assertEqual(logs[0], "about to fail")
        self.assertIn("Traceback (most recent call last):", logs)

    def test_timeout_and_delete_stops_the_process_group(self):
        b = self.backend()
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "child.pid")
            name = b.train(runtime=PLAIN, trainer=CustomTrainer(func=sleep_with_child, func_args={"pid_file": pid_file}))
            deadline = time.monotonic() + 30
            while not read(pid_file):
                self.assertLess(time.monotonic(), deadline, "the job did not start its child")
                time.sleep(0.05)
            child = int(read(pid_file))
        self.assertEqual(b.get_job(name).status, "Running")
        self.assertEqual(b.get_job(name).steps[0].status, "Running")
        with self.assertRaises(TimeoutError):
            b.wait_for_job_status(name, timeout=0.5, polling_interval=0.1)
        leader = b._jobs[name].proc.pid
        started = time.monotonic()
        b.delete_job(name)
        self.assertLess(time.monotonic() - started, 4, "SIGTERM should have been enough")
        self.assertFalse(alive(leader))
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(child), "the job's child survived delete_job")
        self.assertEqual(b.list_jobs(), [])

    def test_refusals(self):
        b = self.backend()
        with self.assertRaisesRegex(ValueError, "CustomTrainer\\(func=...\\)"):
            b.train(trainer=types.SimpleNamespace(image="x"))
        with self.assertRaisesRegex(ValueError, "lambda"):
            b.train(runtime=PLAIN, trainer=CustomTrainer(func=lambda: 1))
        with self.assertRaisesRegex(ValueError, "cannot import kiln-no-such-package-xyz.*install_packages=True"):
            b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}, packages_to_install=["kiln-no-such-package-xyz"]))
        with self.assertRaisesRegex(ValueError, "num_nodes=2.*torch-distributed"):
            b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}, num_nodes=2))
        with self.assertRaisesRegex(ValueError, "Runtime 'jax-distributed' not found"):
            b.train(runtime="jax-distributed", trainer=CustomTrainer(func=count_lines, func_args={"n": 1}))
        self.assertEqual(b.list_jobs(), [])
        # packages this Python has are fine (pip is everywhere pip is)
        name = b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}, packages_to_install=["pip"]))
        b.wait_for_job_status(name, timeout=60, polling_interval=0.5)

    def test_a_python_that_cannot_start(self):
        b = self.backend(python="/nonexistent/python3")
        with self.assertRaisesRegex(ValueError, "cannot start /nonexistent/python3"):
            b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}))
        self.assertEqual(b.list_jobs(), [])
        self.assertEqual(os.listdir(b.state_dir), [])

    def test_torch_runtime_needs_torch(self):
        if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
            self.skipTest("this Python has torch")
        b = self.backend()
        with self.assertRaisesRegex(ValueError, "cannot import torch \\(the torch-distributed runtime runs the function with torch's launcher\\)"):
            b.train(trainer=CustomTrainer(func=count_lines, func_args={"n": 1}))

    def test_options(self):
        b = self.backend()
        Name = type("Name", (), {"__init__": lambda self, name: setattr(self, "name", name)})
        Labels = type("Labels", (), {"__init__": lambda self, labels: setattr(self, "labels", labels)})
        t = CustomTrainer(func=count_lines, func_args={"n": 1})
        name = b.train(runtime=PLAIN, trainer=t, options=[Name("my-job")])
        self.assertEqual(name, "my-job")
        with self.assertRaisesRegex(ValueError, "already exists"):
            b.train(runtime=PLAIN, trainer=t, options=[Name("my-job")])
        with self.assertRaisesRegex(ValueError, "Labels is not compatible with the local backend"):
            b.train(runtime=PLAIN, trainer=t, options=[Labels({"a": "b"})])
        with self.assertRaisesRegex(ValueError, "lowercase"):
            b.train(runtime=PLAIN, trainer=t, options=[Name("My_Job")])
        generated = b.train(runtime=PLAIN, trainer=t)
        self.assertRegex(generated, "^[a-z][0-9a-f]{11}$")  # Kubeflow's job names

    def test_initializer_is_ignored_with_a_warning(self):
        b = self.backend()
        init = types.SimpleNamespace(dataset="hf://tatsu-lab/alpaca", model=None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            name = b.train(runtime=PLAIN, initializer=init, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}))
        self.assertIn("runs no initializers", str(w[0].message))
        self.assertEqual(b.wait_for_job_status(name, timeout=60, polling_interval=0.5).status, "Complete")

    def test_wait_arguments(self):
        b = self.backend()
        name = b.train(runtime=PLAIN, trainer=CustomTrainer(func=count_lines, func_args={"n": 1}))
        with self.assertRaisesRegex(ValueError, "strictly less than timeout"):
            b.wait_for_job_status(name, timeout=2, polling_interval=2)
        with self.assertRaisesRegex(ValueError, "positive"):
            b.wait_for_job_status(name, polling_interval=0)
        with self.assertRaisesRegex(ValueError, "status Done"):
            b.wait_for_job_status(name, status={"Done"})
        self.assertEqual(b.wait_for_job_status(name, status="Complete", timeout=60, polling_interval=0.5).status, "Complete")

    def test_runtimes(self):
        b = self.backend()
        runtimes = b.list_runtimes()
        self.assertEqual([r.name for r in runtimes], ["torch-distributed"])
        rt = b.get_runtime("torch-distributed")
        self.assertEqual((rt.trainer.framework, rt.trainer.num_nodes), ("torch", 1))
        self.assertEqual(b.get_runtime_packages(rt), ["torch"])
        with self.assertRaisesRegex(ValueError, "one runtime, torch-distributed"):
            b.get_runtime("mpi-distributed")

    def test_install_packages_into_a_job_virtualenv(self):
        # Kubeflow's way, asked for: a virtualenv for the job (seeing this Python's packages) and
        # pip, here from a local index. The package is there for the job only; the virtualenv
        # goes when the job ends.
        if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            self.skipTest("this Python has no pip")
        b = self.backend(install_packages=True)
        with tempfile.TemporaryDirectory() as index:
            url = make_index(index)
            t = CustomTrainer(func=uses_test_package, packages_to_install=["kiln-test-pkg"], pip_index_urls=[url])
            name = b.train(runtime=PLAIN, trainer=t)
            job = b.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=240, polling_interval=1)
            logs = list(b.get_job_logs(name))
            self.assertEqual(job.status, "Complete", logs)
            self.assertEqual(logs[-1], "value 42")
            self.assertFalse(os.path.exists(os.path.join(b.state_dir, name, "venv")))
            self.assertNotEqual(subprocess.run([sys.executable, "-c", "import kiln_test_pkg"], capture_output=True).returncode, 0)

            # A package the index does not have: the job fails with pip's words in its log.
            t = CustomTrainer(func=count_lines, func_args={"n": 1}, packages_to_install=["kiln-no-such-package-xyz"], pip_index_urls=[url])
            name = b.train(runtime=PLAIN, trainer=t)
            job = b.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=240, polling_interval=1)
        logs = "\n".join(b.get_job_logs(name))
        self.assertEqual(job.status, "Failed", logs)
        self.assertIn("ERROR: Failed to install Python packages: kiln-no-such-package-xyz", logs)
        self.assertNotIn("line 0", logs)
        self.assertFalse(os.path.exists(os.path.join(b.state_dir, name, "venv")))


class _Client:
    """kiln.TrainerClient for the examples, backed by one LocalProcessBackend."""

    backend: LocalProcessBackend

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, attr):
        return getattr(type(self).backend, attr)


@unittest.skipUnless(HAVE_TYPES, "kiln has no TrainJob/Step/Runtime types yet (kiln.types or kiln.client)")
class KubeflowExamplesTest(unittest.TestCase):
    """examples/kubeflow, written for a cluster, run on this machine: TrainerClient() is the local backend."""

    @classmethod
    def setUpClass(cls):
        cls.torch_python = _torch_python()

    def local_client(self):
        """kiln.TrainerClient(backend_config=LocalProcessBackendConfig()) running jobs with the
        Python that has torch, and its backend; while kiln has no LocalProcessBackendConfig, a
        stand-in client around a LocalProcessBackend."""
        config_type = getattr(kiln, "LocalProcessBackendConfig", None)
        if config_type is None:
            backend = LocalProcessBackend(types.SimpleNamespace(python=self.torch_python))
            self.addCleanup(backend.close)
            return type("Client", (_Client,), {"backend": backend})(), backend
        config = config_type()
        config.python = self.torch_python
        client = kiln.TrainerClient(backend_config=config)
        backend = client._local
        self.assertIsInstance(backend, LocalProcessBackend)
        self.addCleanup(backend.close)
        return client, backend

    def run_example(self, filename):
        if not self.torch_python:
            self.skipTest(
                "torch is not importable by this Python nor by the system's python3: install it "
                "(apt-get install python3-torch, or pip install torch) to run the torch DDP examples"
            )
        client, backend = self.local_client()
        out = io.StringIO()
        started = time.monotonic()
        # The examples call TrainerClient() (a cluster's); here every call is one local client.
        with mock.patch.object(kiln, "TrainerClient", lambda *a, **kw: client), mock.patch.object(kiln, "CustomTrainer", CustomTrainer, create=True):
            with contextlib.redirect_stdout(out):
                runpy.run_path(os.path.join(EXAMPLES, filename), run_name="__main__")
        took = time.monotonic() - started
        jobs = backend.list_jobs()
        self.assertEqual(len(jobs), 1)
        return jobs[0], out.getvalue().splitlines(), took

    def test_custom_training_ddp(self):
        job, lines, took = self.run_example("custom_training_ddp.py")
        self.assertEqual((job.status, job.num_nodes, job.runtime.name), ("Complete", 2, "torch-distributed"))
        self.assertIn("rank 0 of 2", lines)
        self.assertIn("rank 1 of 2", lines)
        losses = [float(ln.split("Loss: ")[1]) for ln in lines if ln.startswith("Step ")]
        self.assertEqual(len(losses), 20, lines)  # rank 0 prints each of the 20 steps
        self.assertLess(losses[-1], losses[0] / 5, losses)  # the model learned
        self.assertLess(took, 300)

    def test_a_failing_rank_fails_the_job_with_its_error(self):
        if not self.torch_python:
            self.skipTest("torch is not importable by this Python nor by the system's python3")
        client, _ = self.local_client()
        name = client.train(trainer=CustomTrainer(func=rank_one_breaks, num_nodes=2))
        with self.assertRaises(errors.JobFailedError) as cm:
            client.wait_for_job_status(name, timeout=120, polling_interval=1)
        self.assertIn("node-0 exited with code 1: ValueError: rank one broke", str(cm.exception))

    def test_readme_first_job(self):
        job, lines, _ = self.run_example("readme_first_job.py")
        self.assertEqual((job.status, job.num_nodes), ("Complete", 3))
        self.assertEqual(sorted(ln for ln in lines if ln.startswith("RANK: ")), ["RANK: 0", "RANK: 1", "RANK: 2"])
        self.assertEqual([ln for ln in lines if ln.startswith("WORLD_SIZE: ")], ["WORLD_SIZE: 3"] * 3)


if __name__ == "__main__":
    unittest.main()
