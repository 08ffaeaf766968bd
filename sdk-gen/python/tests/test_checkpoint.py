"""kiln.checkpoint: settings, atomic saves, retention, resume, and a real SIGTERM to a training process."""

import contextlib
import io
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from kiln import checkpoint
from kiln.checkpoint import EXIT_CONFIG, EXIT_PREEMPTED, Checkpointer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_KEYS = ("KILN_CHECKPOINT_DIR", "KILN_CHECKPOINT_INTERVAL", "KILN_CHECKPOINT_KEEP", "RANK", "WORLD_SIZE")


def clean_env(**values):
    """os.environ without the variables the helper reads, plus values."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(values)
    return mock.patch.dict(os.environ, env, clear=True)


class Model:
    """Shaped like a torch module: state_dict() and load_state_dict()."""

    def __init__(self, weight=0.0):
        self.weight = weight

    def state_dict(self):
        return {"weight": self.weight}

    def load_state_dict(self, state):
        self.weight = state["weight"]


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        env = clean_env()
        env.start()
        self.addCleanup(env.stop)

    def make(self, **kwargs):
        kwargs.setdefault("directory", self.dir)
        kwargs.setdefault("signals", ())
        with contextlib.redirect_stderr(io.StringIO()):
            return Checkpointer(**kwargs)

    def quiet(self, fn, *args, **kwargs):
        """fn's result and what it logged."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            result = fn(*args, **kwargs)
        return result, err.getvalue()

    # settings

    def test_exit_codes(self):
        self.assertEqual((EXIT_PREEMPTED, EXIT_CONFIG), (75, 78))

    def test_settings_from_environment(self):
        with clean_env(KILN_CHECKPOINT_DIR=self.dir, KILN_CHECKPOINT_INTERVAL="25", KILN_CHECKPOINT_KEEP="5"):
            c = Checkpointer(signals=())
        self.assertEqual((c.directory, c.interval, c.keep, c.rank, c.world_size), (self.dir, 25, 5, 0, 1))

    def test_defaults_and_arguments_override(self):
        with clean_env(KILN_CHECKPOINT_DIR="/nonexistent/elsewhere", KILN_CHECKPOINT_INTERVAL="bad"):
            c = Checkpointer(directory=self.dir, interval=7, keep=2, signals=())
        self.assertEqual((c.directory, c.interval, c.keep), (self.dir, 7, 2))
        c = Checkpointer(directory=self.dir, signals=())
        self.assertEqual((c.interval, c.keep), (100, 3))

    def test_missing_directory(self):
        with self.assertRaises(ValueError) as e:
            Checkpointer(signals=())
        self.assertIn("KILN_CHECKPOINT_DIR", str(e.exception))
        self.assertIn("directory=", str(e.exception))

    def test_bad_settings(self):
        for env, raw in [
            ("KILN_CHECKPOINT_INTERVAL", "0"),
            ("KILN_CHECKPOINT_INTERVAL", "ten"),
            ("KILN_CHECKPOINT_INTERVAL", "1.5"),
            ("KILN_CHECKPOINT_KEEP", "0"),
            ("KILN_CHECKPOINT_KEEP", "-1"),
            ("RANK", "x"),
        ]:
            with self.subTest(env=env, raw=raw), clean_env(**{env: raw}):
                with self.assertRaises(ValueError) as e:
                    Checkpointer(directory=self.dir, signals=())
                self.assertIn(env, str(e.exception))
                self.assertIn(repr(raw), str(e.exception))
                self.assertIn("expected", str(e.exception))
        for kwargs in [{"interval": 0}, {"interval": "5"}, {"keep": 0}, {"keep": True}]:
            with self.subTest(kwargs=kwargs), self.assertRaises(ValueError) as e:
                Checkpointer(directory=self.dir, signals=(), **kwargs)
            self.assertIn(list(kwargs)[0] + "=", str(e.exception))

    def test_creates_directory(self):
        d = os.path.join(self.dir, "a", "b")
        self.make(directory=d)
        self.assertTrue(os.path.isdir(d))

    def test_import_needs_only_the_standard_library(self):
        code = "import sys, kiln.checkpoint; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
        self.assertEqual((out.returncode, out.stdout.strip()), (0, "[]"), out.stderr)

    # saving

    def test_save_is_atomic_and_named(self):
        c = self.make()
        path, log = self.quiet(c.save, 42, model=Model(1.5), extra={"x": 1})
        self.assertEqual(path, os.path.join(self.dir, "step-000000042.ckpt"))
        self.assertEqual(os.listdir(self.dir), ["step-000000042.ckpt"])
        self.assertRegex(log, r"kiln.checkpoint: saved step 42 to .*step-000000042.ckpt \(\d+\.\d MB in \d+\.\d\ds\)\n")
        state = c.load(path)
        self.assertEqual(state["step"], 42)
        self.assertEqual(state["objects"], {"model": {"weight": 1.5}, "extra": {"x": 1}})
        self.assertIsInstance(state["time"], float)

    def test_crash_while_writing_leaves_no_checkpoint(self):
        c = self.make()
        with mock.patch.object(checkpoint.os, "replace", side_effect=OSError("disk gone")):
            with self.assertRaises(OSError):
                self.quiet(c.save, 10, state={"a": 1})
        self.assertEqual(os.listdir(self.dir), [])
        self.assertIsNone(c.latest())

    def test_stale_temporary_files_removed_by_rank_0(self):
        stale = os.path.join(self.dir, ".tmp-step-000000030.123.abcd")
        with open(stale, "wb") as f:
            f.write(b"half a checkpoint")
        with clean_env(RANK="1", WORLD_SIZE="2"):
            self.make()
        self.assertTrue(os.path.exists(stale))
        self.make()
        self.assertFalse(os.path.exists(stale))

    def test_latest_counts_only_complete_names(self):
        c = self.make()
        self.assertIsNone(c.latest())
        for name in ["step-12.ckpt", "step-000000099.ckpt.bak", ".tmp-step-000000500.1.ff", "step-0000000100.ckpt", "notes"]:
            open(os.path.join(self.dir, name), "wb").close()
        self.assertIsNone(c.latest())
        self.quiet(c.save, 7)
        self.quiet(c.save, 3)
        self.assertEqual(c.latest(), (7, os.path.join(self.dir, "step-000000007.ckpt")))
        self.assertEqual([s for s, _ in c.checkpoints()], [3, 7])

    def test_retention_keeps_the_newest(self):
        c = self.make(keep=2)
        for n in (1, 2, 3, 4, 5):
            self.quiet(c.save, n)
        self.assertEqual(sorted(os.listdir(self.dir)), ["step-000000004.ckpt", "step-000000005.ckpt"])
        self.quiet(c.save, 2)  # never deletes what it just wrote, even when older
        self.assertIn("step-000000002.ckpt", os.listdir(self.dir))

    def test_step_saves_every_interval(self):
        c = self.make(interval=3)
        for n in range(1, 11):
            stop, _ = self.quiet(c.step, n, model=Model(n))
            self.assertFalse(stop)
        self.assertEqual([s for s, _ in c.checkpoints()], [3, 6, 9])
        self.assertEqual(c.load(c.latest()[1])["objects"]["model"], {"weight": 9})

    def test_other_ranks_do_not_write(self):
        with clean_env(RANK="1", WORLD_SIZE="2"):
            c = self.make(interval=1)
            self.assertEqual(c.rank, 1)
            for n in range(1, 4):
                self.quiet(c.step, n, state={"n": n})
            self.assertIsNone(self.quiet(c.save, 9)[0])
        self.assertEqual(os.listdir(self.dir), [])

    # resuming

    def test_resume_empty(self):
        start, log = self.quiet(self.make().resume, model=Model())
        self.assertEqual(start, 0)
        self.assertIn(f"kiln.checkpoint: no checkpoint in {self.dir}; starting from step 0", log)

    def test_resume_restores_objects(self):
        c = self.make(interval=5)
        model, state = Model(), {"seen": []}
        for n in range(1, 13):
            model.weight = n * 0.5
            state["seen"].append(n)
            self.quiet(c.step, n, model=model, state=state)
        model2, state2 = Model(), {"junk": True}
        start, log = self.quiet(self.make().resume, model=model2, state=state2)
        self.assertEqual(start, 10)
        self.assertEqual(model2.weight, 5.0)
        self.assertEqual(state2, {"seen": list(range(1, 11))})
        self.assertIn("kiln.checkpoint: resuming from step 10 (" + os.path.join(self.dir, "step-000000010.ckpt") + ")", log)

    def test_resume_rejects_objects_it_cannot_restore(self):
        with self.assertRaises(TypeError) as e:
            self.make().resume(epoch=3)
        self.assertIn("epoch=", str(e.exception))

    def test_corrupt_newest_falls_back_to_older(self):
        c = self.make()
        self.quiet(c.save, 10, state={"at": 10})
        good, _ = self.quiet(c.save, 20, state={"at": 20})
        with open(good, "rb") as f:
            data = f.read()
        # A final-looking name with half a file (a copy from a crashed tool, a disk that lied), and a
        # temporary file of a process that died mid-write.
        bad = os.path.join(self.dir, "step-000000030.ckpt")
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        with open(os.path.join(self.dir, ".tmp-step-000000040.1.00"), "wb") as f:
            f.write(data)
        c = self.make()
        self.assertFalse([n for n in os.listdir(self.dir) if n.startswith(".tmp-")])
        state = {}
        start, log = self.quiet(c.resume, state=state)
        self.assertEqual((start, state), (20, {"at": 20}))
        self.assertIn(f"warning: cannot load {bad}", log)
        self.assertIn("resuming from step 20", log)
        with self.assertRaises(Exception):
            c.load(bad)

    def test_not_a_checkpoint(self):
        path = os.path.join(self.dir, "step-000000001.ckpt")
        with open(path, "wb") as f:
            pickle.dump([1, 2], f)
        with self.assertRaises(ValueError):
            self.make().load(path)

    # stopping

    def test_signal_in_process(self):
        before = signal.getsignal(signal.SIGTERM)
        c = self.make(signals=(signal.SIGTERM,), exit=False, interval=1000)
        self.assertIsNot(signal.getsignal(signal.SIGTERM), before)
        self.assertFalse(self.quiet(c.step, 1)[0])
        with tempfile.TemporaryFile() as err:  # the handler writes to fd 2 itself
            saved = os.dup(2)
            os.dup2(err.fileno(), 2)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs in the main thread between bytecodes
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            err.seek(0)
            self.assertEqual(err.read(), b"kiln.checkpoint: received SIGTERM; saving a checkpoint at the end of this step, then stopping\n")
        self.assertTrue(c.stop_requested)
        stop, log = self.quiet(c.step, 2, state={"x": 2})
        self.assertTrue(stop)
        self.assertIn("kiln.checkpoint: stopped after step 2", log)
        self.assertEqual(c.latest()[0], 2)
        c.close()
        self.assertIs(signal.getsignal(signal.SIGTERM), before)

    def test_request_stop_exits_75(self):
        with self.make(interval=1000) as c:
            c.request_stop()
            with self.assertRaises(SystemExit) as e:
                self.quiet(c.step, 5, state={})
        self.assertEqual(e.exception.code, 75)
        self.assertEqual(c.latest()[0], 5)

    def test_main_thread_only(self):
        errors = []

        def run():
            try:
                Checkpointer(directory=self.dir)
            except RuntimeError as e:
                errors.append(str(e))
            self.make()  # without signals, any thread will do

        t = threading.Thread(target=run)
        t.start()
        t.join()
        self.assertEqual(len(errors), 1)
        self.assertIn("main thread", errors[0])


TRAIN = """
import sys, time
from kiln.checkpoint import Checkpointer

total = int(sys.argv[1])
state = {"trained": 0}
with Checkpointer(interval=1000) as ckpt:
    start = ckpt.resume(state=state)
    print("start", start, flush=True)
    for step in range(start, total):
        time.sleep(0.02)
        state["trained"] += 1
        print("step", step + 1, flush=True)
        ckpt.step(step + 1, state=state)
print("done", state["trained"], flush=True)
"""


class SignalProcessTest(unittest.TestCase):
    """A training process that gets SIGTERM, as from an evicted pod, and its restart."""

    def run_training(self, d, total, kill_after=None):
        env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
        env.update(PYTHONPATH=ROOT, KILN_CHECKPOINT_DIR=d)
        p = subprocess.Popen([sys.executable, "-c", TRAIN, str(total)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines = []
        try:
            for line in p.stdout:
                lines.append(line.split())
                if kill_after is not None and lines[-1] == ["step", str(kill_after)]:
                    os.kill(p.pid, signal.SIGTERM)
            code = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            err = p.stderr.read()
            p.stderr.close()
        return code, lines, err

    def test_sigterm_checkpoints_exits_75_and_resumes(self):
        total = 60
        with tempfile.TemporaryDirectory() as d:
            code, lines, err = self.run_training(d, total, kill_after=10)
            self.assertEqual(code, 75, err)
            first = [int(n) for word, n in lines if word == "step"]
            last = first[-1]
            self.assertEqual(first, list(range(1, last + 1)))
            self.assertGreaterEqual(last, 10)
            self.assertLess(last, total)
            self.assertIn("received SIGTERM; saving a checkpoint at the end of this step, then exiting with code 75", err)
            self.assertIn(f"stopped after step {last}; exiting with code 75", err)
            # interval=1000: the emergency checkpoint is the only one, at the step the signal ended
            self.assertEqual(os.listdir(d), [f"step-{last:09d}.ckpt"])

            code, lines, err = self.run_training(d, total)
            self.assertEqual(code, 0, err)
            self.assertEqual(lines[0], ["start", str(last)])
            second = [int(n) for word, n in lines if word == "step"]
            self.assertEqual(second, list(range(last + 1, total + 1)))
            self.assertEqual(len(first) + len(second), total)
            self.assertEqual(lines[-1], ["done", str(total)])  # the restored counter went on
            self.assertIn(f"resuming from step {last}", err)


if __name__ == "__main__":
    unittest.main()


class TorchrunExitCodeTest(unittest.TestCase):
    """kiln.torchrun's choice of exit code (its run needs PyTorch: the e2e suite runs it)."""

    def test_worker_codes(self):
        from kiln.torchrun import exit_code

        self.assertEqual(exit_code([75, 75]), checkpoint.EXIT_PREEMPTED)
        self.assertEqual(exit_code([1, 78]), checkpoint.EXIT_CONFIG)
        self.assertEqual(exit_code([75, 78]), checkpoint.EXIT_CONFIG)
        self.assertEqual(exit_code([1, -9]), 1)

    def test_import_needs_no_torch(self):
        import kiln.torchrun  # noqa: F401 - torch is imported by main() only

        self.assertNotIn("torch", sys.modules)
