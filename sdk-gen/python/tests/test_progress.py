"""kiln.progress against a local status server: the body, the token, progress and ETA, batching and
rate limiting, failures and backoff, ranks, limits, TLS, the exit flush, the Hugging Face callback,
and the Checkpointer's reports."""

import calendar
import contextlib
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

from kiln import progress
from kiln.checkpoint import Checkpointer
from kiln.progress import KilnCallback, Reporter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_KEYS = (
    "KUBEFLOW_TRAINER_SERVER_URL",
    "KUBEFLOW_TRAINER_SERVER_CA_CERT",
    "KUBEFLOW_TRAINER_SERVER_TOKEN",
    "KILN_PROGRESS_INTERVAL",
    "KILN_PROGRESS",
    "KILN_PROGRESS_LOG",
    "KILN_CHECKPOINT_DIR",
    "RANK",
    "WORLD_SIZE",
)
PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
WALL = 1795600800.0  # 2026-11-25T10:00:00Z
WARNING = "cannot report progress to "


def clean_env(**values):
    """os.environ without the variables the module reads, plus values."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(values)
    return mock.patch.dict(os.environ, env, clear=True)


class FakeClock:
    """Monotonic seconds that move only when told."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def set(self, t):
        self.now = float(t)


class StatusServer:
    """A status server in a thread. It records each request and answers from a script of
    (code, headers, body) answers; with none left, 200 and the body echoed."""

    def __init__(self, tls=None, keep_alive=False, hang_up=False):
        """keep_alive: HTTP/1.1, the connection kept between requests; hang_up: then closed
        after each answer without a word, as a server does to a connection left idle."""
        self.requests = []
        self.answers = []
        self.cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.cond:
                    code, headers, body = outer.answers.pop(0) if outer.answers else (200, {}, raw)
                    outer.requests.append({"path": self.path, "headers": self.headers, "body": json.loads(raw), "client": self.client_address})
                    outer.cond.notify_all()
                if isinstance(body, dict):
                    body = json.dumps(body).encode()
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if hang_up:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}{PATH}"

    def answer(self, code, message=None, **headers):
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
        with self.cond:
            self.answers.append((code, headers, body))

    def wait(self, n, timeout=5.0):
        """The first n requests, once they came."""
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"{len(self.requests)} requests, not {n}")
            return list(self.requests)

    def count(self):
        with self.cond:
            return len(self.requests)

    def last(self):
        with self.cond:
            return self.requests[-1]["body"]["trainerStatus"]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def metrics(status):
    return {m["name"]: m["value"] for m in status.get("metrics", [])}


def settle(r, attempts, timeout=5.0):
    """Wait until r has dealt with the answers of `attempts` posts."""
    with r._cond:
        if not r._cond.wait_for(lambda: r._attempts >= attempts, timeout):
            raise AssertionError(f"{r._attempts} attempts, not {attempts}")


def quiet_period():
    """Long enough for the reporter's thread to post if it were going to (it is local and idle)."""
    time.sleep(0.15)


class ProgressTest(unittest.TestCase):
    def setUp(self):
        self.err = io.StringIO()
        redirect = contextlib.redirect_stderr(self.err)  # the reporter's thread writes there too
        redirect.__enter__()
        self.addCleanup(redirect.__exit__, None, None, None)
        env = clean_env()
        env.start()
        self.addCleanup(env.stop)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.token = os.path.join(self.dir, "token")
        self.write_token("tok-1\n")
        self.server = StatusServer()
        self.addCleanup(self.server.close)
        self.clock = FakeClock()
        default = mock.patch.object(progress, "_default", None)
        default.start()
        self.addCleanup(default.stop)
        self.addCleanup(self.close_default)  # runs first: the default this test made

    def close_default(self):
        if progress._default is not None:
            progress._default.close(0.5)

    def write_token(self, text):
        with open(self.token, "w") as f:
            f.write(text)

    def make(self, **kwargs):
        kwargs.setdefault("url", self.server.url)
        kwargs.setdefault("token_file", self.token)
        kwargs.setdefault("interval", 5)
        kwargs.setdefault("clock", self.clock)
        kwargs.setdefault("wall_clock", lambda: WALL)
        r = Reporter(**kwargs)
        self.addCleanup(r.close, 0.5)
        return r

    def lines(self, text):
        return [line for line in self.err.getvalue().splitlines() if text in line]

    # the protocol

    def test_body_and_headers(self):
        class Scalar:  # numpy's float32, a 0-d tensor
            def __float__(self):
                return 0.25

        class Index:  # numpy's int64
            def __index__(self):
                return 7

            def __float__(self):
                return 7.0

        r = self.make()
        r.report(
            step=500,
            total_steps=1000,
            metrics={"loss": 0.43125, "learning_rate": 3e-05, "tokens": 12345678901, "ok": True, "run": "bert-base",
                     "grad_norm": float("nan"), "scale": float("inf"), "f32": Scalar(), "i64": Index(), "big": 1234567.891},
            epoch=1.5,
        )
        self.assertTrue(r.flush())
        (req,) = self.server.wait(1)
        self.assertEqual(req["path"], PATH)
        self.assertEqual(req["headers"]["Authorization"], "Bearer tok-1")
        self.assertEqual(req["headers"]["Content-Type"], "application/json")
        self.assertEqual(req["body"], {"trainerStatus": {
            "progressPercentage": 50,
            "metrics": [
                {"name": "step", "value": "500"},
                {"name": "total_steps", "value": "1000"},
                {"name": "epoch", "value": "1.5"},
                {"name": "loss", "value": "0.43125"},
                {"name": "learning_rate", "value": "3e-05"},
                {"name": "tokens", "value": "12345678901"},
                {"name": "ok", "value": "true"},
                {"name": "run", "value": "bert-base"},
                {"name": "grad_norm", "value": "nan"},
                {"name": "scale", "value": "inf"},
                {"name": "f32", "value": "0.25"},
                {"name": "i64", "value": "7"},
                {"name": "big", "value": "1.23457e+06"},
            ],
            "lastUpdatedTime": "2026-11-25T10:00:00Z",
        }})
        self.assertTrue(r.flush())  # nothing new: nothing posted
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.assertEqual(self.err.getvalue(), "")

    def test_time_is_rfc3339_utc(self):
        r = self.make(wall_clock=time.time)
        before = time.time()
        r.report(step=1)
        self.assertTrue(r.flush())
        stamp = self.server.last()["lastUpdatedTime"]
        self.assertRegex(stamp, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        parsed = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
        self.assertLessEqual(abs(parsed - before), 2)

    def test_token_file_read_for_each_post(self):
        r = self.make()
        r.report(step=1)
        self.assertTrue(r.flush())
        self.write_token("tok-2")  # the kubelet rotated it
        r.report(step=2)
        self.assertTrue(r.flush())
        self.assertEqual([q["headers"]["Authorization"] for q in self.server.wait(2)], ["Bearer tok-1", "Bearer tok-2"])
        os.remove(self.token)
        r.report(step=3)
        self.assertFalse(r.flush())
        self.assertEqual(self.server.count(), 2)
        (line,) = self.lines(WARNING)
        self.assertIn(f"cannot read the token file {self.token}", line)
        no_token = self.make(token_file=None)
        no_token.report(step=4)
        self.assertTrue(no_token.flush())
        self.assertIsNone(self.server.wait(3)[-1]["headers"]["Authorization"])

    # progress and the estimate

    def test_progress_and_eta(self):
        r = self.make()
        r.report(step=0, total_steps=1000)
        self.assertEqual(r._status()[0]["progressPercentage"], 0)
        self.assertNotIn("estimatedRemainingSeconds", r._status()[0])  # no rate from one report
        for step in range(1, 501):  # 10 steps a second
            self.clock.set(step / 10)
            r.report(step=step, total_steps=1000)
        self.assertTrue(r.flush())
        last = self.server.last()
        self.assertEqual((last["progressPercentage"], last["estimatedRemainingSeconds"]), (50, 50))
        self.clock.set(50.05)
        r.report(step=999)
        self.assertEqual(r._status()[0]["progressPercentage"], 99)  # floor
        r.report(step=1200)
        status = r._status()[0]
        self.assertEqual((status["progressPercentage"], status["estimatedRemainingSeconds"]), (100, 0))

    def test_eta_of_a_resumed_run_uses_its_own_rate(self):
        r = self.make()
        self.clock.set(1000)
        r.report(step=9000, total_steps=10000)  # restored from a checkpoint: no rate yet
        self.assertEqual(r._status()[0]["progressPercentage"], 90)
        self.assertNotIn("estimatedRemainingSeconds", r._status()[0])
        for i in range(1, 101):  # 5 steps a second
            self.clock.set(1000 + i / 5)
            r.report(step=9000 + i)
        self.assertEqual(r._status()[0]["estimatedRemainingSeconds"], 180)  # 900 steps / 5 per second
        r.report(step=10)  # counting again from low: a new run, a new rate
        self.assertNotIn("estimatedRemainingSeconds", r._status()[0])

    def test_eta_follows_the_recent_rate(self):
        r = self.make()
        step = 0
        for t in range(0, 600):  # 1 step a second for 10 minutes, then 4 a second
            self.clock.set(t)
            step += 1 if t < 300 else 4
            r.report(step=step, total_steps=100_000)
        eta = r._status()[0]["estimatedRemainingSeconds"]
        remaining = 100_000 - step
        self.assertLess(abs(eta - remaining / 4), remaining / 4 * 0.05, eta)

    # batching and rate limiting

    def test_burst_is_coalesced(self):
        r = self.make()
        r.report(step=0, total_steps=100, metrics={"loss": 9.0})  # the first goes at once
        settle(r, 1)
        self.clock.set(1)
        for i in range(1, 101):
            r.report(step=i, metrics={"loss": 1 / i, f"m{i % 3}": i})
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.clock.set(5)
        r.report()  # nothing new, but what is pending is due
        settle(r, 2)
        self.assertEqual(self.server.count(), 2)
        self.assertEqual(metrics(self.server.last()), {"step": "100", "total_steps": "100", "loss": "0.01", "m1": "100", "m2": "98", "m0": "99"})

    def test_connection_kept_between_posts(self):
        server = StatusServer(keep_alive=True)
        self.addCleanup(server.close)
        r = self.make(url=server.url, interval=1)
        for t in range(4):
            self.clock.set(t)
            r.report(step=t + 1)
            settle(r, t + 1)
        clients = {req["client"] for req in server.wait(4)}
        self.assertEqual(len(clients), 1, "one connection, one TLS handshake, for every post")

    def test_connection_closed_by_the_server_is_made_again_unnoticed(self):
        server = StatusServer(keep_alive=True, hang_up=True)
        self.addCleanup(server.close)
        r = self.make(url=server.url, interval=1)
        for t in range(3):
            self.clock.set(t)
            r.report(step=t + 1)
            settle(r, t + 1)
            self.assertTrue(r._accepted)
        self.assertEqual([metrics(req["body"]["trainerStatus"])["step"] for req in server.wait(3)], ["1", "2", "3"])
        self.assertEqual(self.lines("cannot report"), [], "a kept connection the server closed is no failure")

    def test_at_most_one_post_per_interval(self):
        r = self.make(interval=5)
        r.report(step=1)
        settle(r, 1)
        for t in (1, 2, 3, 4.9):
            self.clock.set(t)
            r.report(step=int(t * 10))
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.clock.set(5)
        r.report(step=50)
        settle(r, 2)
        self.assertEqual(metrics(self.server.last())["step"], "50")
        self.clock.set(9.9)
        r.report(step=99)
        quiet_period()
        self.assertEqual(self.server.count(), 2)
        self.clock.set(10)
        r.report(step=99)  # the same again: due now
        settle(r, 3)
        self.clock.set(100)
        r.report(step=99, metrics={})  # nothing changed: nothing to post
        quiet_period()
        self.assertEqual(self.server.count(), 3)

    def test_interval_settings(self):
        for raw, want, warned in [("", 5.0, False), ("10", 10.0, False), ("2.5", 2.5, False), ("0.2", 1.0, True), ("soon", 5.0, True)]:
            with self.subTest(raw=raw), clean_env(KILN_PROGRESS_INTERVAL=raw):
                self.err.truncate(0)
                self.err.seek(0)
                self.assertEqual(Reporter(url=self.server.url).interval, want)
                self.assertEqual(bool(self.lines("KILN_PROGRESS_INTERVAL")), warned)
        self.assertEqual(Reporter(url=self.server.url, interval=0.25).interval, 0.25)  # an argument may be lower
        for kwargs, says in [
            ({"interval": 0}, "interval=0: expected a number of seconds above 0"),
            ({"interval": "5"}, "interval='5'"),
            ({"timeout": -1}, "timeout=-1"),
            ({"url": "ftp://x/y"}, "'ftp://x/y': expected an https:// URL"),
            ({"url": "kiln-webhook:10443"}, "expected an https:// URL"),
        ]:
            with self.subTest(kwargs=kwargs), self.assertRaises(ValueError) as e:
                Reporter(**{"url": self.server.url, **kwargs})
            self.assertIn(says, str(e.exception))

    # failures

    def test_server_down_never_slows_training(self):
        # A server that accepts connections and never answers: the worst case.
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        self.addCleanup(hole.close)
        url = f"http://127.0.0.1:{hole.getsockname()[1]}{PATH}"
        r = self.make(url=url, clock=time.monotonic, interval=1, timeout=0.5)
        began = time.perf_counter()
        for i in range(1000):
            r.report(step=i, total_steps=1000, metrics={"loss": 1.0 / (i + 1), "lr": 0.1})
        self.assertLess(time.perf_counter() - began, 0.05)
        began = time.monotonic()
        self.assertFalse(r.flush(timeout=0.2))  # the thread's post is stuck
        self.assertLess(time.monotonic() - began, 1.0)
        settle(r, 1)
        (line,) = self.lines(WARNING)
        self.assertTrue(line.startswith(f"kiln.progress: {WARNING}{url}: "), line)
        self.assertTrue(line.endswith(" timed out; training continues, retrying in the background"), line)
        r.close(0.1)

    def test_unreachable_server_is_logged_once_and_backs_off(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens: connection refused
        url = f"http://127.0.0.1:{port}{PATH}"
        r = self.make(url=url, interval=5)
        r.report(step=1)
        settle(r, 1)
        t = 0
        for n, backoff in enumerate([5, 10, 20, 40, 60, 60], start=2):
            self.clock.set(t + backoff - 0.5)
            r.report(step=n * 10)  # too early: no attempt
            if n < 4:
                quiet_period()
            self.assertEqual(r._attempts, n - 1)
            t += backoff
            self.clock.set(t)
            r.report(step=n * 10 + 1)
            settle(r, n)
        self.assertEqual(r._attempts, 7)
        (line,) = self.err.getvalue().splitlines()  # one line for seven failures
        self.assertTrue(line.startswith(f"kiln.progress: {WARNING}{url}: ConnectionRefusedError: "), line)
        self.assertTrue(line.endswith("; training continues, retrying in the background"), line)

    def test_recovery_is_logged_once(self):
        for _ in range(3):
            self.server.answer(503, "the apiserver is busy")
        r = self.make()
        r.report(step=1)
        settle(r, 1)
        for n, t in [(2, 5), (3, 15), (4, 35)]:
            self.clock.set(t)
            r.report(step=n)
            settle(r, n)
        self.assertEqual(self.server.count(), 4)
        self.assertEqual(metrics(self.server.last())["step"], "4")
        self.assertEqual(self.err.getvalue().splitlines(), [
            f"kiln.progress: {WARNING}{self.server.url}: 503 Service Unavailable: the apiserver is busy; training continues, retrying in the background",
            f"kiln.progress: reporting progress to {self.server.url} again (after 3 failed attempts)",
        ])
        self.clock.set(40)
        r.report(step=5)  # back to the interval
        settle(r, 5)

    def test_bad_request_is_logged_and_dropped(self):
        message = ("TrainJob ns/job status update is invalid, nothing was written: "
                   "trainerStatus.metrics[2].value: Too long: may not be more than 64 bytes")
        self.server.answer(400, message)
        self.server.answer(400, message)
        r = self.make()
        r.report(step=1, metrics={"loss": 0.5, "odd": 1})
        self.assertFalse(r.flush())
        self.clock.set(100)
        r.report()  # the rejected update is not sent again
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.assertEqual(self.err.getvalue().splitlines(), [
            f"kiln.progress: the server rejected a progress update: 400 Bad Request: {message}; dropped it",
            "kiln.progress: no longer reporting the metric 'odd'",  # metrics[2]: step, loss, odd
        ])
        r.report(step=2)
        self.assertFalse(r.flush())  # the same message again: not logged again
        self.assertEqual(len(self.lines("the server rejected")), 1)
        r.report(step=3)
        self.assertTrue(r.flush())
        self.assertEqual(metrics(self.server.last()), {"step": "3", "loss": "0.5"})
        self.assertEqual(self.lines(WARNING), [])

    def test_too_many_requests_honours_retry_after(self):
        self.server.answer(429, "TrainJob ns/job posts more than 5 updates a second", **{"Retry-After": "30"})
        r = self.make(interval=5)
        r.report(step=1)
        settle(r, 1)
        for t in (10, 29.9):
            self.clock.set(t)
            r.report(step=int(t))
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.clock.set(30)
        r.report(step=30)
        settle(r, 2)
        self.assertEqual(metrics(self.server.last())["step"], "30")
        self.assertEqual(len(self.lines(WARNING)), 1)
        self.assertIn("429 Too Many Requests: TrainJob ns/job posts more than 5 updates a second", self.lines(WARNING)[0])
        self.assertEqual(len(self.lines("again")), 1)

    def test_forbidden_retries_every_minute_with_a_fresh_token(self):
        self.server.answer(403, "the token is not for TrainJob ns/job")
        self.server.answer(401, "the token expired")
        r = self.make()
        r.report(step=1)
        settle(r, 1)
        self.clock.set(59)
        r.report(step=2)
        quiet_period()
        self.assertEqual(self.server.count(), 1)
        self.clock.set(60)
        r.report(step=3)
        settle(r, 2)
        self.write_token("tok-new")
        self.clock.set(120)
        r.report(step=4)
        settle(r, 3)
        self.assertEqual([q["headers"]["Authorization"] for q in self.server.wait(3)], ["Bearer tok-1", "Bearer tok-1", "Bearer tok-new"])
        self.assertEqual(self.err.getvalue().splitlines(), [
            f"kiln.progress: {WARNING}{self.server.url}: 403 Forbidden: the token is not for TrainJob ns/job; training continues, retrying in the background",
            f"kiln.progress: reporting progress to {self.server.url} again (after 2 failed attempts)",
        ])

    def test_flush_says_whether_the_server_took_it(self):
        r = self.make()
        self.assertTrue(r.flush())  # nothing reported: nothing to send
        r.report(step=1)
        self.assertTrue(r.flush())
        self.server.answer(500, "boom")
        r.report(step=2)
        self.assertFalse(r.flush())
        self.assertTrue(r.flush())  # still pending: posted again at once, whatever the backoff
        self.assertEqual(self.server.count(), 3)
        self.assertEqual(len(self.lines(WARNING)), 1)
        self.assertEqual(len(self.lines("again")), 1)

    # who reports

    def test_other_ranks_report_nothing(self):
        with clean_env(RANK="1"):
            r = self.make()
        r.report(step=1, total_steps=2, metrics={"loss": 1})
        r.checkpoint(1, "/ckpt/step-1")
        self.assertFalse(r.flush())
        self.assertIsNone(r._thread)

        class Dist:  # torch.distributed, initialized: its rank wins over RANK
            def __init__(self, rank):
                self.rank = rank

            def is_available(self):
                return True

            def is_initialized(self):
                return True

            def get_rank(self):
                return self.rank

        with clean_env(RANK="0"):
            r2 = self.make()
        with mock.patch.dict(sys.modules, {"torch.distributed": Dist(3)}):
            r2.report(step=1)
            self.assertFalse(r2.flush())
        with clean_env(RANK="3"):
            r3 = self.make()
        with mock.patch.dict(sys.modules, {"torch.distributed": Dist(0)}):
            r3.report(step=7)
            self.assertTrue(r3.flush())
        self.assertEqual(self.server.count(), 1)
        self.assertEqual(metrics(self.server.last()), {"step": "7"})

    def test_no_server_no_cost(self):
        r = progress.get_reporter()
        self.assertFalse(r.enabled)
        began = time.perf_counter()
        for i in range(10_000):
            progress.report(step=i, total_steps=10_000, metrics={"loss": 0.1})
        progress.checkpoint(1, "/x")
        self.assertLess(time.perf_counter() - began, 0.1)
        self.assertFalse(progress.flush())
        self.assertIsNone(r._thread)
        self.assertEqual(self.err.getvalue(), "")
        with clean_env(KUBEFLOW_TRAINER_SERVER_URL=self.server.url, KILN_PROGRESS="0"):
            self.assertFalse(Reporter().enabled)

    def test_log_instead_of_a_server(self):
        with clean_env(KILN_PROGRESS_LOG="1"):
            r = self.make(url=None)
        self.assertTrue(r.enabled)
        r.report(step=1, total_steps=4, metrics={"loss": 2.5})
        self.clock.set(1)
        r.report(step=2, metrics={"loss": 1.25})
        self.assertTrue(r.flush())
        self.assertEqual(self.lines("progress")[-1], "kiln.progress: progress 50% (about 2s left): step=2 total_steps=4 loss=1.25")
        self.assertEqual(self.server.count(), 0)

    def test_from_the_environment(self):
        with clean_env(KUBEFLOW_TRAINER_SERVER_URL=self.server.url, KUBEFLOW_TRAINER_SERVER_TOKEN=self.token,
                       KUBEFLOW_TRAINER_SERVER_CA_CERT="/nonexistent/ca.crt", KILN_PROGRESS_INTERVAL="7"):
            r = progress.get_reporter()
            self.assertIs(progress.get_reporter(), r)
        self.assertEqual((r.url, r.token_file, r.ca_file, r.interval), (self.server.url, self.token, "/nonexistent/ca.crt", 7.0))
        progress.report(step=3, total_steps=6)
        self.assertTrue(progress.flush())  # http: no CA needed
        self.assertEqual(self.server.last()["progressPercentage"], 50)
        with clean_env(KUBEFLOW_TRAINER_SERVER_URL="kiln-webhook:10443/status"):
            self.assertFalse(Reporter().enabled)
        self.assertEqual(len(self.lines("KUBEFLOW_TRAINER_SERVER_URL")), 1)

    # limits

    def test_bad_names_and_values_are_skipped_with_one_warning(self):
        r = self.make()
        long_name = "n" * 65
        for _ in range(3):
            r.report(step=1, metrics={long_name: 1, "": 2, "obj": object(), "s": "", "text": "v" * 70, "ok": 1})
        r.report(step=True)
        r.report(step=2.5)
        self.assertTrue(r.flush())
        got = metrics(self.server.last())
        self.assertEqual(got, {"step": "1", "text": "v" * 63 + "\u2026", "ok": "1"})
        log = self.err.getvalue()
        self.assertEqual(log.count(long_name), 1)
        self.assertIn(f"kiln.progress: warning: skipped the metric {long_name!r}: a name has 1 to 64 characters", log)
        self.assertEqual(log.count("skipped the metric ''"), 1)
        self.assertEqual(log.count("skipped the metric 'obj': object is not a number"), 1)
        self.assertEqual(log.count("skipped the metric 's': its value is empty"), 1)
        self.assertEqual(log.count("the metric 'text' is cut to 64 characters"), 1)
        self.assertIn("kiln.progress: warning: ignored step=True: expected a whole number, 0 or more", log)
        self.assertEqual(log.count("ignored step="), 1)  # once for the field, whatever the value (2.5 too)
        r.report(metrics=[("loss", 1)])  # not a mapping: warned, not raised
        self.assertIn("metrics= must map names to values, not list", self.err.getvalue())

    def test_at_most_256_metrics(self):
        r = self.make()
        many = {f"m{i}": i for i in range(257)}
        r.report(metrics=many)
        r.report(metrics=many)
        self.assertTrue(r.flush())
        got = self.server.last()["metrics"]
        self.assertEqual([m["name"] for m in got], [f"m{i}" for i in range(256)])
        (line,) = self.lines("more than 256")
        self.assertIn("dropped 'm256'", line)
        r.report(step=1)  # the step needs a place: a metric gives it up
        r.checkpoint(1, "/c")
        self.assertTrue(r.flush())
        names = [m["name"] for m in self.server.last()["metrics"]]
        self.assertEqual(len(names), 256)
        self.assertEqual(names[:3], ["step", "checkpoint_step", "checkpoint_path"])

    def test_checkpoint_path_keeps_its_end(self):
        r = self.make()
        path = "/mnt/shared/checkpoints/" + "a-very-long-experiment-name-" * 3 + "/step-000012000.ckpt"
        self.assertGreater(len(path), 64)
        r.checkpoint(12000, path)
        r.report(step=12000, total_steps=20000)
        self.assertTrue(r.flush())
        got = metrics(self.server.last())
        value = got["checkpoint_path"]
        self.assertEqual(len(value), 64)
        self.assertTrue(value.startswith("\u2026"))
        self.assertTrue(path.endswith(value[1:]))
        self.assertEqual(got["checkpoint_step"], "12000")
        self.clock.set(10)
        r.report(step=12010, metrics={"loss": 0.1})  # sticky: in every later post
        self.assertTrue(r.flush())
        self.assertEqual(metrics(self.server.last())["checkpoint_path"], value)
        r.checkpoint(12100, "/ckpt/step-000012100.ckpt")
        self.assertTrue(r.flush())
        self.assertEqual(metrics(self.server.last())["checkpoint_path"], "/ckpt/step-000012100.ckpt")

    # TLS

    def test_tls_verified_against_the_ca_file(self):
        openssl = shutil.which("openssl")
        if openssl is None:
            self.skipTest("no openssl to make a certificate")
        cert, key = os.path.join(self.dir, "tls.crt"), os.path.join(self.dir, "tls.key")
        out = subprocess.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=kiln-webhook",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            capture_output=True, text=True,
        )
        if out.returncode != 0:
            self.skipTest("openssl cannot make a certificate: " + out.stderr.strip())
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        server = StatusServer(tls)
        self.addCleanup(server.close)
        self.assertTrue(server.url.startswith("https://"))
        r = self.make(url=server.url, ca_file=cert)
        r.report(step=1, total_steps=2)
        self.assertTrue(r.flush())
        self.assertEqual(server.last()["progressPercentage"], 50)
        untrusting = self.make(url=server.url, ca_file=None)  # the system's CAs do not sign it
        untrusting.report(step=1)
        self.assertFalse(untrusting.flush())
        self.assertIn("CERTIFICATE_VERIFY_FAILED", self.lines(WARNING)[0])
        missing = self.make(url=server.url, ca_file=os.path.join(self.dir, "nope.crt"))
        missing.report(step=1)
        self.assertFalse(missing.flush())
        self.assertIn("cannot load the CA file", self.lines(WARNING)[1])
        self.assertEqual(server.count(), 1)

    # the end of a run

    def test_close_posts_what_is_pending(self):
        with self.make() as r:
            r.report(step=1)
            settle(r, 1)
            r.report(step=2, metrics={"loss": 0.5})  # within the interval: pending
        self.assertEqual(metrics(self.server.wait(2)[-1]["body"]["trainerStatus"]), {"step": "2", "loss": "0.5"})
        r.report(step=3)  # closed: ignored
        self.assertFalse(r.flush())
        self.assertFalse(r._thread.is_alive())
        self.assertEqual(self.server.count(), 2)

    def test_exit_posts_what_is_pending(self):
        code = (
            "import kiln.progress as p\n"
            "p.report(step=1, total_steps=10, metrics={'loss': 2.0})\n"
            "import time; time.sleep(0.1)\n"
            "p.report(step=2, total_steps=10, metrics={'loss': 1.0})\n"  # within the interval: only the exit posts it
        )
        env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
        env.update(PYTHONPATH=ROOT, KUBEFLOW_TRAINER_SERVER_URL=self.server.url, KUBEFLOW_TRAINER_SERVER_TOKEN=self.token)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual((out.returncode, out.stderr), (0, ""))
        reqs = self.server.wait(2)
        self.assertEqual([metrics(q["body"]["trainerStatus"])["step"] for q in reqs], ["1", "2"])
        self.assertEqual(self.server.last()["progressPercentage"], 20)

    def test_import_is_light(self):
        code = "import sys, threading, kiln.progress; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'transformers')), threading.active_count())"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
        self.assertEqual((out.returncode, out.stdout.strip()), (0, "[] 1"), out.stderr)

    # Hugging Face

    def test_callback_through_a_transformers_like_loop(self):
        events = ["on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_step_begin",
                  "on_substep_end", "on_step_end", "on_evaluate", "on_predict", "on_save", "on_log",
                  "on_prediction_step", "on_optimizer_step", "on_pre_optimizer_step"]
        r = self.make()
        cb = KilnCallback(reporter=r)
        args = types.SimpleNamespace(output_dir="/out/run-1", logging_steps=2, save_steps=4)
        state = types.SimpleNamespace(global_step=0, max_steps=8, epoch=0.0, is_world_process_zero=True, log_history=[])
        control = types.SimpleNamespace(should_save=False, should_log=False)
        called = set()

        def call(event, **kwargs):
            called.add(event)
            self.assertIsNone(getattr(cb, event)(args, state, control, model=object(), **kwargs))

        call("on_init_end")
        call("on_train_begin")
        for epoch in range(2):
            call("on_epoch_begin")
            for _ in range(4):
                call("on_step_begin")
                call("on_substep_end")
                call("on_pre_optimizer_step")
                call("on_optimizer_step")
                state.global_step += 1
                state.epoch = state.global_step / 4
                self.clock.set(state.global_step)
                call("on_step_end")
                if state.global_step % args.logging_steps == 0:
                    call("on_log", logs={"loss": 1.0 / state.global_step, "learning_rate": 5e-5, "grad_norm": 0.75, "epoch": state.epoch, "note": "text"})
                if state.global_step % args.save_steps == 0:
                    call("on_save")
            call("on_prediction_step")
            call("on_evaluate", metrics={"eval_loss": 0.5, "eval_runtime": 1.25, "epoch": state.epoch})
            call("on_log", logs={"eval_loss": 0.5, "epoch": state.epoch})
            call("on_epoch_end")
        call("on_predict", metrics={"test_loss": 0.6})
        call("on_train_end")
        self.assertEqual(called, set(events))
        last = self.server.last()  # on_train_end flushed
        self.assertEqual(metrics(last), {
            "step": "8", "total_steps": "8", "epoch": "2", "checkpoint_step": "8", "checkpoint_path": "/out/run-1/checkpoint-8",
            "loss": "0.125", "learning_rate": "5e-05", "grad_norm": "0.75", "eval_loss": "0.5", "eval_runtime": "1.25",
        })
        self.assertEqual((last["progressPercentage"], last["estimatedRemainingSeconds"]), (100, 0))
        self.assertIsNone(cb.on_a_future_event(args, state, control))  # events of newer versions
        with self.assertRaises(AttributeError):
            cb.not_an_event  # noqa: B018
        n = self.server.count()
        other = types.SimpleNamespace(global_step=9, max_steps=8, is_world_process_zero=False)
        for event in events:
            getattr(cb, event)(args, other, control, logs={"loss": 1})  # another process: nothing
            getattr(cb, event)(None, types.SimpleNamespace(), None)  # nothing usable: no exception
        r.flush()
        self.assertEqual(metrics(self.server.last())["step"], "8")
        self.assertLessEqual(self.server.count(), n + 1)

    def test_callback_uses_the_process_reporter(self):
        with clean_env(KUBEFLOW_TRAINER_SERVER_URL=self.server.url):
            cb = KilnCallback()
            state = types.SimpleNamespace(global_step=3, max_steps=12, epoch=0.25, is_world_process_zero=True)
            cb.on_step_end(None, state, None)
            cb.on_train_end(None, state, None)
        self.assertEqual(self.server.last()["progressPercentage"], 25)

    # kiln.checkpoint

    def test_checkpointer_reports_steps_and_checkpoints(self):
        r = self.make()
        with mock.patch.object(progress, "_default", r), Checkpointer(directory=self.dir, interval=2, signals=()) as c:
            c.step(1, state={"n": 1})
            settle(r, 1)
            self.clock.set(10)
            c.step(2, state={"n": 2})  # saves
            self.assertTrue(r.flush())
            got = metrics(self.server.last())
            self.assertEqual(got["step"], "2")
            self.assertEqual(got["checkpoint_step"], "2")
            self.assertTrue(os.path.join(self.dir, "step-000000002.ckpt").endswith(got["checkpoint_path"].lstrip("\u2026")))
            with mock.patch.object(progress, "checkpoint", side_effect=RuntimeError("broken")), \
                    mock.patch.object(progress, "report", side_effect=RuntimeError("broken")):
                self.assertFalse(c.step(4, state={"n": 4}))  # progress never breaks training
            self.assertEqual(c.latest()[0], 4)


if __name__ == "__main__":
    unittest.main()
