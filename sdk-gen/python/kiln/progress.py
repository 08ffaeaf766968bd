"""Report a training run's progress to its TrainJob: ``kubectl get trainjob`` and the Kiln UI show it.

In a ``torchrun`` training loop (``torchrun --nproc_per_node=8 train.py``)::

    import kiln.progress

    for step in range(start, total_steps):
        loss = train_step(step)
        # cheap and never blocking: the newest values are posted in the background
        # every KILN_PROGRESS_INTERVAL seconds, by rank 0 only
        kiln.progress.report(step=step + 1, total_steps=total_steps,
                             metrics={"loss": loss, "lr": sched.get_last_lr()[0]})

With Hugging Face ``transformers`` (this module does not import it)::

    from transformers import Trainer
    from kiln.progress import KilnCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[KilnCallback()])
    trainer.train()    # steps, epoch, logged metrics (loss, learning_rate, eval_loss...) and checkpoints

:class:`kiln.checkpoint.Checkpointer` reports its steps and checkpoints by itself.

This is the trainer side of Kubeflow Trainer's progress protocol (v2.3, KEP-2779): the state is POSTed
as ``{"trainerStatus": {"progressPercentage", "estimatedRemainingSeconds", "metrics",
"lastUpdatedTime"}}``, and the TrainJob's ``status.trainerStatus`` shows the newest. Metrics are
name/value strings; every metric reported stays in the following posts with its newest value. Kiln
also reads these: ``step``, ``total_steps``, ``epoch``, and ``checkpoint_step`` and ``checkpoint_path``
(the newest checkpoint, :func:`checkpoint`). ``progressPercentage`` is ``100 * step / total_steps``;
``estimatedRemainingSeconds`` comes from the step rate this process measured over the last minutes.

Environment variables, set by Kiln's runtimes in training pods (constructor arguments win):

``KUBEFLOW_TRAINER_SERVER_URL``
    where progress goes (``url=``): the https URL of the TrainJob's status endpoint. Unset (a run on
    your laptop), nothing is sent and :func:`report` costs next to nothing.
``KUBEFLOW_TRAINER_SERVER_CA_CERT``
    the PEM file of the CAs that sign the server's certificate (``ca_file=``).
``KUBEFLOW_TRAINER_SERVER_TOKEN``
    the file of the bearer token (``token_file=``); read again for every post, as the kubelet rotates it.
``KILN_PROGRESS_INTERVAL``
    post at most every this many seconds (``interval=``), 1 or more; default 5.
``KILN_PROGRESS``
    ``0`` sends nothing, whatever else is set.
``KILN_PROGRESS_LOG``
    ``1`` also prints each update to stderr (``log=``), with or without a server: handy locally.
``RANK``
    set by ``torchrun``; only rank 0 reports (once ``torch.distributed`` is initialized, its rank).

Reporting never stops training: :func:`report` only records the newest values (in time proportional
to the number of metrics), a daemon thread posts them, and no network or server error reaches the
caller. An unreachable server, 5xx or 429 (its ``Retry-After`` honoured) are retried with a backoff
of up to a minute, logged once to stderr when they start and once when they end; 401 and 403 are
retried every minute (the token may be rotated); a 400's update is dropped, its message logged once.
What is pending is posted once more by :func:`flush`, :meth:`Reporter.close` and at interpreter
exit (5 seconds at most). Nothing is posted while nothing changes: a job with a
``kiln.dev/progress-deadline`` must report something new within it, or Kiln takes it as stalled. A process forked from a reporting one (a DataLoader worker) reports
nothing. Standard library only.
"""

from __future__ import annotations

import atexit
import collections
import email.utils
import http.client
import json
import math
import operator
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse
import weakref
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple

__all__ = [
    "Reporter",
    "KilnCallback",
    "report",
    "checkpoint",
    "flush",
    "get_reporter",
    "ENV_URL",
    "ENV_CA_CERT",
    "ENV_TOKEN",
    "ENV_INTERVAL",
    "ENV_ENABLED",
    "ENV_LOG",
    "MAX_METRICS",
    "MAX_LENGTH",
]

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
ENV_INTERVAL = "KILN_PROGRESS_INTERVAL"
ENV_ENABLED = "KILN_PROGRESS"
ENV_LOG = "KILN_PROGRESS_LOG"

MAX_METRICS = 256
"""The most metrics one update may carry (the API's limit)."""
MAX_LENGTH = 64
"""The longest metric name or value, in characters (the API's limit)."""

DEFAULT_INTERVAL = 5.0
MIN_INTERVAL = 1.0
BACKOFF_CAP = 60.0  # the longest wait between two attempts after failures (401/403: every attempt)
RETRY_AFTER_CAP = 600.0  # a longer Retry-After is taken as this
EXIT_TIMEOUT = 5.0  # the last post at interpreter exit waits this long at most
REQUEST_TIMEOUT = 10.0
RATE_WINDOW = 120.0  # the step rate behind the ETA is measured over about this many seconds
_SAMPLES = 32  # (time, step) samples kept in that window

_STEP, _TOTAL, _EPOCH = "step", "total_steps", "epoch"
_CKPT_STEP, _CKPT_PATH = "checkpoint_step", "checkpoint_path"
_RESERVED = (_STEP, _TOTAL, _EPOCH, _CKPT_STEP, _CKPT_PATH)  # sent first, in this order
_INT32_MAX = 2**31 - 1
_ELLIPSIS = "\u2026"
_FIELD_METRIC = re.compile(r"metrics\[(\d+)\]")
_USER_AGENT = "kiln-sdk-python/0.1.0 (kiln.progress)"

_OK, _REJECTED, _AUTH, _THROTTLED, _ERROR = "ok", "rejected", "auth", "throttled", "error"
_Outcome = Tuple[str, str, Optional[float]]  # (kind, reason, Retry-After seconds)


def _log(message: str) -> None:
    print("kiln.progress: " + message, file=sys.stderr, flush=True)


def _env_flag(name: str) -> Optional[bool]:
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    return None


def _env_interval() -> float:
    raw = os.environ.get(ENV_INTERVAL, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        n = float(raw)
    except ValueError:
        n = math.nan
    if not math.isfinite(n):
        _log(f"warning: {ENV_INTERVAL}={raw!r} is not a number of seconds; using {DEFAULT_INTERVAL:g}")
        return DEFAULT_INTERVAL
    if n < MIN_INTERVAL:
        _log(f"warning: {ENV_INTERVAL}={raw!r} is below the minimum; using {MIN_INTERVAL:g}")
        return MIN_INTERVAL
    return n


def _env_rank() -> int:
    raw = os.environ.get("RANK", "").strip()
    if not raw:
        return 0
    try:
        return int(raw, 10)
    except ValueError:
        _log(f"warning: RANK={raw!r} is not a whole number; reporting as rank 0")
        return 0


def _check_url(url: str) -> str:
    """url if it is an http(s) URL with a host; raises ValueError otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{url!r}: expected an https:// URL (http:// for a local server)")
    return url


def _shorten(text: str, limit: int = MAX_LENGTH, keep_end: bool = False) -> str:
    """text in at most limit characters: cut, and an ellipsis where the cut is."""
    if len(text) <= limit:
        return text
    return _ELLIPSIS + text[-(limit - 1):] if keep_end else text[: limit - 1] + _ELLIPSIS


def _timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the second: what a Kubernetes metav1.Time holds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _retry_after(value: Optional[str]) -> Optional[float]:
    """A Retry-After header in seconds (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_CAP)


def _server_message(data: bytes) -> str:
    """The message of a Kubernetes Status body, else the body's first words."""
    text = data.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("message"), str) and obj["message"].strip():
        return " ".join(obj["message"].split())
    return _shorten(" ".join(text.split()), 300)


def _describe(status: Dict[str, Any]) -> str:
    """One line for KILN_PROGRESS_LOG: 50% (about 50s left): step=500 total_steps=1000 loss=0.43"""
    head = []
    if "progressPercentage" in status:
        head.append(f"{status['progressPercentage']}%")
    if "estimatedRemainingSeconds" in status:
        head.append(f"(about {status['estimatedRemainingSeconds']}s left)")
    metrics = " ".join(f"{m['name']}={m['value']}" for m in status.get("metrics", ()))
    return "progress " + " ".join(head) + (": " if head and metrics else "") + metrics


class Reporter:
    """Posts a training run's progress to the Kubeflow Trainer status server, in the background.

    Arguments left None come from the environment (see :mod:`kiln.progress`): ``url``, ``ca_file``
    and ``token_file`` from ``KUBEFLOW_TRAINER_SERVER_*``, ``interval`` (seconds between posts,
    above 0) from ``KILN_PROGRESS_INTERVAL``, ``log`` from ``KILN_PROGRESS_LOG``. ``url`` may be
    ``http://`` for a local server, without TLS. ``timeout`` bounds one request (seconds).
    ``clock`` (monotonic seconds) and ``wall_clock`` (seconds since the epoch, for
    ``lastUpdatedTime``) are for tests. Without a URL and without ``log``, the reporter is off.

    Only rank 0 reports; elsewhere every method does nothing. The background thread starts with
    the first report; :meth:`close` (or leaving a ``with`` block) posts what is pending and stops it.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        ca_file: Optional[str] = None,
        token_file: Optional[str] = None,
        interval: Optional[float] = None,
        *,
        log: Optional[bool] = None,
        timeout: float = REQUEST_TIMEOUT,
        clock: Optional[Callable[[], float]] = None,
        wall_clock: Optional[Callable[[], float]] = None,
    ) -> None:
        if url is not None:
            self.url: Optional[str] = _check_url(url)
        else:
            self.url = os.environ.get(ENV_URL, "").strip() or None
            if self.url is not None:
                try:
                    _check_url(self.url)
                except ValueError as e:
                    _log(f"warning: {ENV_URL}={e}; progress is not reported")
                    self.url = None
        if ca_file is None:
            ca_file = os.environ.get(ENV_CA_CERT, "").strip() or None
        if token_file is None:
            token_file = os.environ.get(ENV_TOKEN, "").strip() or None
        self.ca_file = os.fspath(ca_file) if ca_file is not None else None
        self.token_file = os.fspath(token_file) if token_file is not None else None
        if interval is None:
            self.interval = _env_interval()
        elif isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < math.inf:
            raise ValueError(f"interval={interval!r}: expected a number of seconds above 0")
        else:
            self.interval = float(interval)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout={timeout!r}: expected a number of seconds above 0")
        self.timeout = float(timeout)
        self.log = bool(_env_flag(ENV_LOG)) if log is None else bool(log)
        self.enabled = (self.url is not None or self.log) and _env_flag(ENV_ENABLED) is not False
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock or time.time
        self._env_rank = _env_rank()
        self._dist_rank: Optional[int] = None
        self._on = self.enabled  # off once closed or forked: report() looks at nothing else first

        self._cond = threading.Condition()  # guards the state below; never held during I/O
        self._post_lock = threading.Lock()  # one post at a time (the thread's, or flush()'s)
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        # the state to report
        self._step: Optional[int] = None
        self._total: Optional[int] = None
        self._eta: Optional[int] = None
        self._reserved: Dict[str, str] = {}
        self._metrics: Dict[str, str] = {}  # the user's, in the order first reported
        self._updated: Optional[float] = None  # wall clock of the last change
        self._samples: Deque[Tuple[float, int]] = collections.deque()  # (clock, step), spaced out
        # posting
        self._version = 0  # bumped by every change
        self._sent = 0  # the version the server holds (or that it rejected)
        self._next_post = -math.inf  # clock time of the next allowed post
        self._backoff = 0.0
        self._failing = False
        self._failures = 0
        self._accepted = True  # the last post's fate
        self._attempts = 0  # posts tried, for tests
        self._warned: set = set()
        self._ssl: Optional[Tuple[Any, ssl.SSLContext]] = None
        # The connection kept between posts (under self._post_lock), with what it was made
        # for: a TLS handshake per post would cost the server more than the post itself.
        self._conn: Optional[Tuple[Any, http.client.HTTPConnection]] = None
        if self.enabled:
            _live.add(self)

    # -- recording ---------------------------------------------------------------------

    def report(
        self,
        step: Any = None,
        total_steps: Any = None,
        metrics: Optional[Mapping[str, Any]] = None,
        *,
        epoch: Any = None,
    ) -> None:
        """Record the newest progress; posted within ``interval`` seconds. Never raises, never waits.

        ``step`` is the number of steps done (the global step), ``total_steps`` how many the run
        makes; ``metrics`` maps names to numbers (int, float, bool, numpy or torch scalars) or
        strings. ``step``, ``total_steps`` and ``epoch`` may be given in ``metrics`` too.
        """
        if not self._on:
            return
        try:
            if self._rank() != 0:
                return
            self._record(step, total_steps, metrics, epoch, ())
        except Exception as e:  # noqa: BLE001 - the training loop comes first
            self._warn_once(("error", type(e).__name__), f"warning: ignored a report ({type(e).__name__}: {e})")

    def checkpoint(self, step: Any, path: Any) -> None:
        """Record the newest checkpoint: ``checkpoint_step`` and ``checkpoint_path`` in every later post."""
        if not self._on:
            return
        try:
            if self._rank() != 0:
                return
            n = self._whole("checkpoint step", step)
            if n is None:
                return
            text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
            # the end of a path tells checkpoints apart
            self._record(None, None, None, None, ((_CKPT_STEP, str(n)), (_CKPT_PATH, _shorten(text, keep_end=True) or "-")))
        except Exception as e:  # noqa: BLE001
            self._warn_once(("error", type(e).__name__), f"warning: ignored a checkpoint ({type(e).__name__}: {e})")

    def _record(self, step: Any, total_steps: Any, metrics: Any, epoch: Any, extra: Tuple[Tuple[str, str], ...]) -> None:
        items: List[Tuple[str, str]] = []
        if metrics is not None:
            try:
                pairs = metrics.items()
            except AttributeError:
                self._warn_once(("metrics", "type"), f"warning: metrics= must map names to values, not {type(metrics).__name__}; ignored")
                pairs = ()
            for name, value in pairs:
                if not isinstance(name, str):
                    name = str(name)
                if name == _STEP:
                    step = value if step is None else step
                elif name == _TOTAL:
                    total_steps = value if total_steps is None else total_steps
                elif name == _EPOCH:
                    epoch = value if epoch is None else epoch
                elif not name or len(name) > MAX_LENGTH:
                    self._warn_once(("name", name), f"warning: skipped the metric {_shorten(name, 80)!r}: a name has 1 to {MAX_LENGTH} characters")
                else:
                    text = self._text(name, value)
                    if text is not None:
                        items.append((name, text))
        n = self._whole("step", step) if step is not None else None
        total = self._whole("total_steps", total_steps) if total_steps is not None else None
        if total is not None and total <= 0:
            total = None  # not known yet (transformers' max_steps before training)
        reserved = list(extra)
        if epoch is not None:
            text = self._text(_EPOCH, epoch)
            if text is not None:
                reserved.append((_EPOCH, text))

        with self._cond:
            now = self._clock()
            was_clean = self._version == self._sent
            changed = False
            if n is not None and n != self._step:
                self._observe(now, n)
                self._step = n
                changed = True
            if total is not None and total != self._total:
                self._total = total
                changed = True
            if changed:
                self._estimate(now)
            for name, text in reserved:
                if self._reserved.get(name) != text:
                    self._reserved[name] = text
                    changed = True
            user = self._metrics
            room = MAX_METRICS - len(self._reserved) - (self._step is not None) - (self._total is not None)
            for name, text in items:
                old = user.get(name)
                if old == text:
                    continue
                if old is None and len(user) >= room:
                    self._warn_once(("metrics", "many"), f"warning: more than {MAX_METRICS} metrics: sending the first {MAX_METRICS}; dropped {name!r} and any later new name")
                    continue
                user[name] = text
                changed = True
            if changed:
                self._version += 1
                self._updated = self._wall_clock()
            if self._version != self._sent and (was_clean or now >= self._next_post):
                self._wake()

    def _observe(self, now: float, step: int) -> None:
        """Adds (now, step) to the step rate's samples: this process's own reports only, so a run
        resumed at a high step measures its own speed."""
        s = self._samples
        if self._step is not None and step < self._step:
            s.clear()  # counting again from lower: a new run
        if not s:
            s.append((now, step))
            return
        while len(s) > 1 and now - s[1][0] >= RATE_WINDOW:
            s.popleft()
        if now - s[-1][0] >= RATE_WINDOW / _SAMPLES:
            s.append((now, step))

    def _estimate(self, now: float) -> None:
        """estimatedRemainingSeconds from the newest step and the rate since the oldest sample."""
        self._eta = None
        if self._step is None or self._total is None:
            return
        if self._step >= self._total:
            self._eta = 0
            return
        if not self._samples:
            return
        t0, s0 = self._samples[0]
        elapsed, done = now - t0, self._step - s0
        if elapsed > 0 and done > 0:
            self._eta = min(_INT32_MAX, round((self._total - self._step) * elapsed / done))

    def _whole(self, what: str, value: Any) -> Optional[int]:
        """value as a whole number 0 or more, or None (warned once)."""
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            try:
                n = operator.index(value)
            except TypeError:
                try:
                    f = float(value)
                except (TypeError, ValueError):
                    f = math.nan
                n = int(f) if math.isfinite(f) and f == int(f) else -1
        if isinstance(value, bool) or n < 0:
            self._warn_once(("whole", what), f"warning: ignored {what}={_shorten(repr(value), 80)}: expected a whole number, 0 or more")
            return None
        return n

    def _text(self, name: str, value: Any) -> Optional[str]:
        """A metric's value as the API's string: 1 to 64 characters, or None (warned once)."""
        if isinstance(value, str):
            text = value
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            text = format(value, ".6g")
        elif isinstance(value, int):
            text = str(value)
        else:  # numpy and torch scalars, Decimal, Fraction
            try:
                text = str(operator.index(value))
            except TypeError:
                try:
                    text = format(float(value), ".6g")
                except (TypeError, ValueError, OverflowError) as e:
                    self._warn_once(("value", name), f"warning: skipped the metric {name!r}: {type(value).__name__} is not a number or a string ({e})")
                    return None
        if len(text) > MAX_LENGTH and not isinstance(value, str):
            text = format(float(text), ".6g")  # a whole number of 65 digits or more
        if not text:
            self._warn_once(("value", name), f"warning: skipped the metric {name!r}: its value is empty")
            return None
        if len(text) > MAX_LENGTH:
            self._warn_once(("long", name), f"warning: the metric {name!r} is cut to {MAX_LENGTH} characters")
            text = _shorten(text)
        return text

    def _rank(self) -> int:
        if self._dist_rank is not None:
            return self._dist_rank
        dist = sys.modules.get("torch.distributed")  # never imported here: no group exists before it is
        if dist is not None:
            try:
                if dist.is_available() and dist.is_initialized():
                    self._dist_rank = int(dist.get_rank())
                    return self._dist_rank
            except Exception:  # noqa: BLE001 - a half-initialized torch
                pass
        return self._env_rank

    def _warn_once(self, key: Any, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _log(message)

    def _status(self) -> Tuple[Dict[str, Any], List[str]]:
        """The trainerStatus to post, and its metrics' names. Under self._cond."""
        status: Dict[str, Any] = {}
        if self._step is not None and self._total is not None:
            status["progressPercentage"] = max(0, min(100, 100 * self._step // self._total))
        if self._eta is not None:
            status["estimatedRemainingSeconds"] = self._eta
        values = dict(self._reserved)
        if self._step is not None:
            values[_STEP] = str(self._step)
        if self._total is not None:
            values[_TOTAL] = str(self._total)
        pairs = [(k, values[k]) for k in _RESERVED if k in values]
        pairs += list(self._metrics.items())[: MAX_METRICS - len(pairs)]
        if pairs:
            status["metrics"] = [{"name": k, "value": v} for k, v in pairs]
        status["lastUpdatedTime"] = _timestamp(self._updated if self._updated is not None else self._wall_clock())
        return status, [k for k, _ in pairs]

    # -- posting -----------------------------------------------------------------------

    def _wake(self) -> None:
        """Start the thread if need be and let it look at the state. Under self._cond."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="kiln-progress", daemon=True)
            self._thread.start()
        self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    if self._version == self._sent:
                        self._cond.wait()
                        continue
                    wait = self._next_post - self._clock()
                    if wait <= 0:
                        break
                    self._cond.wait(min(wait, RETRY_AFTER_CAP))
            try:
                with self._post_lock:
                    self._send(self.timeout, scheduled=True)
            except Exception as e:  # noqa: BLE001 - the thread must live on
                self._warn_once(("thread", type(e).__name__), f"warning: {type(e).__name__}: {e}")
                with self._cond:
                    self._next_post = self._clock() + BACKOFF_CAP

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Post what is pending now (not waiting for the interval or a backoff); whether the server
        holds the newest state. False on this process's other ranks, or when reporting is off.
        Waits ``timeout`` seconds at most (default: the reporter's request timeout)."""
        if not self._on or self._rank() != 0:
            return False
        limit = self.timeout if timeout is None else max(0.0, float(timeout))
        deadline = time.monotonic() + limit
        if not self._post_lock.acquire(timeout=limit):
            return False  # a post of the thread's takes longer
        try:
            return self._send(max(0.05, deadline - time.monotonic()))
        except Exception as e:  # noqa: BLE001
            self._warn_once(("flush", type(e).__name__), f"warning: {type(e).__name__}: {e}")
            return False
        finally:
            self._post_lock.release()

    def _send(self, timeout: float, scheduled: bool = False) -> bool:
        """Post the pending state, if any, and deal with the answer. Under self._post_lock. The
        thread's post (scheduled) waits for its time: a flush() may have posted since it looked."""
        with self._cond:
            if self._version == self._sent:
                return self._accepted
            if scheduled and self._clock() < self._next_post:
                return False
            version = self._version
            status, names = self._status()
            started = self._clock()
        outcome = self._deliver(status, timeout)
        with self._cond:
            self._outcome(outcome, version, names, started)
        return outcome[0] == _OK

    def _outcome(self, outcome: _Outcome, version: int, names: List[str], started: float) -> None:
        """Under self._cond."""
        kind, reason, retry_after = outcome
        self._attempts += 1
        self._accepted = kind == _OK
        if kind in (_OK, _REJECTED):
            self._sent = max(self._sent, version)
            self._next_post = started + self.interval
            self._backoff = 0.0
            if kind == _OK and self._failing:
                _log(f"reporting progress to {self.url} again (after {self._failures} failed attempt{'s' if self._failures != 1 else ''})")
                self._failing, self._failures = False, 0
            if kind == _REJECTED:
                self._warn_once(("rejected", reason), f"the server rejected a progress update: {reason}; dropped it")
                # a metric the server refuses would spoil every later update: forget it
                for i in sorted({int(i) for i in _FIELD_METRIC.findall(reason)}):
                    name = names[i] if i < len(names) else ""
                    if self._metrics.pop(name, None) is not None or self._reserved.pop(name, None) is not None:
                        _log(f"no longer reporting the metric {name!r}")
            self._cond.notify_all()
            return
        now = self._clock()
        if kind == _AUTH:
            self._backoff = BACKOFF_CAP
        else:
            self._backoff = min(BACKOFF_CAP, max(self.interval, 2 * self._backoff))
        self._next_post = now + self._backoff
        if retry_after is not None:
            self._next_post = max(started + self.interval, now + retry_after)
        self._failures += 1
        if not self._failing:
            self._failing = True
            _log(f"cannot report progress to {self.url}: {reason}; training continues, retrying in the background")
        self._cond.notify_all()

    def _deliver(self, status: Dict[str, Any], timeout: float) -> _Outcome:
        """POST {"trainerStatus": status}; what came of it. Never raises."""
        if self.log:
            _log(_describe(status))
        if self.url is None:
            return _OK, "", None
        try:
            parts = urllib.parse.urlsplit(self.url)
            headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": _USER_AGENT}
            if self.token_file is not None:
                try:  # read for every post: the kubelet rotates it
                    with open(self.token_file, encoding="utf-8") as f:
                        token = f.read().strip()
                except OSError as e:
                    return _ERROR, f"cannot read the token file {self.token_file}: {e.strerror or e}", None
                if token:
                    headers["Authorization"] = "Bearer " + token
            context: Optional[ssl.SSLContext] = None
            if parts.scheme == "https":
                try:
                    context = self._context()
                except (OSError, ssl.SSLError) as e:
                    return _ERROR, f"cannot load the CA file {self.ca_file}: {e}", None
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            body = json.dumps({"trainerStatus": status}, separators=(",", ":")).encode()
            key = (parts.scheme, parts.hostname, parts.port, self._ssl[0] if context is not None and self._ssl else None)
            for attempt in (1, 2):
                reused = self._conn is not None and self._conn[0] == key
                if not reused:
                    self._hang_up()
                    if context is not None:
                        made: http.client.HTTPConnection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=context)
                    else:
                        made = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
                    self._conn = (key, made)
                assert self._conn is not None
                conn = self._conn[1]
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                try:
                    conn.request("POST", path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()[: 1 << 16]
                    code, phrase, retry = resp.status, resp.reason, resp.getheader("Retry-After")
                    if resp.will_close:
                        self._hang_up()
                    break
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest):
                    self._hang_up()
                    if reused and attempt == 1:
                        continue  # the server closed the kept connection while it idled: a new one
                    raise
                except BaseException:
                    self._hang_up()
                    raise
        except Exception as e:  # noqa: BLE001 - OSError, ssl.SSLError, http.client.HTTPException, ...
            return _ERROR, f"{type(e).__name__}: {e}", None
        if 200 <= code < 300:
            return _OK, "", None
        reason = f"{code} {phrase}".strip()
        message = _server_message(data)
        if message:
            reason += ": " + message
        if code in (400, 413, 422):
            return _REJECTED, reason, None
        if code in (401, 403):
            return _AUTH, reason, None
        if code == 429:
            return _THROTTLED, reason, _retry_after(retry)
        return _ERROR, reason, _retry_after(retry) if code == 503 else None

    def _hang_up(self) -> None:
        """Close the kept connection, if any."""
        if self._conn is not None:
            try:
                self._conn[1].close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None

    def _context(self) -> ssl.SSLContext:
        """The TLS context, made again when the CA file changes."""
        key: Any = None
        if self.ca_file is not None:
            st = os.stat(self.ca_file)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._ssl is None or self._ssl[0] != key:
            self._ssl = (key, ssl.create_default_context(cafile=self.ca_file))
        return self._ssl[1]

    # -- the end -----------------------------------------------------------------------

    def close(self, timeout: Optional[float] = None) -> None:
        """Post what is pending (waiting ``timeout`` seconds at most), then stop the thread."""
        if self._closed:
            return
        deadline = time.monotonic() + (self.timeout if timeout is None else max(0.0, float(timeout)))
        if self._on and self._version != self._sent:
            self.flush(timeout)
        with self._cond:
            self._closed = True
            self._on = False
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, min(1.0, deadline - time.monotonic())))
        if self._post_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                self._hang_up()
            finally:
                self._post_lock.release()
        _live.discard(self)

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_live: "weakref.WeakSet[Reporter]" = weakref.WeakSet()  # enabled reporters, closed at exit
_default: Optional[Reporter] = None
_default_lock = threading.Lock()


def _at_exit() -> None:
    for r in list(_live):
        try:
            r.close(EXIT_TIMEOUT)
        except Exception:  # noqa: BLE001
            pass


def _after_fork() -> None:
    # The child has no thread to post with, and its parent reports the run.
    for r in list(_live):
        r._on = False
        r._closed = True


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def get_reporter() -> Reporter:
    """The process-wide :class:`Reporter`, made from the environment on first use."""
    global _default
    r = _default
    if r is None:
        with _default_lock:
            if _default is None:
                try:
                    _default = Reporter()
                except Exception as e:  # noqa: BLE001 - never into the training loop
                    _log(f"warning: progress is not reported: {type(e).__name__}: {e}")
                    _default = Reporter(url="http://progress.invalid", log=False, interval=DEFAULT_INTERVAL)
                    _default.enabled = _default._on = False
                    _live.discard(_default)
            r = _default
    return r


def report(step: Any = None, total_steps: Any = None, metrics: Optional[Mapping[str, Any]] = None, *, epoch: Any = None) -> None:
    """Record the run's progress with the process-wide reporter (:meth:`Reporter.report`)."""
    r = _default if _default is not None else get_reporter()
    if r._on:
        r.report(step, total_steps, metrics, epoch=epoch)


def checkpoint(step: Any, path: Any) -> None:
    """Record the newest checkpoint with the process-wide reporter (:meth:`Reporter.checkpoint`)."""
    r = _default if _default is not None else get_reporter()
    if r._on:
        r.checkpoint(step, path)


def flush(timeout: Optional[float] = None) -> bool:
    """Post what is pending now (:meth:`Reporter.flush`)."""
    return get_reporter().flush(timeout)


def _numbers(values: Any) -> Dict[str, Any]:
    """The numeric entries of a logs or metrics dict (strings such as a run name left out)."""
    if not isinstance(values, Mapping):
        return {}
    return {k: v for k, v in values.items() if not isinstance(v, str) and (hasattr(v, "__float__") or hasattr(v, "__index__"))}


class KilnCallback:
    """A Hugging Face ``transformers`` ``TrainerCallback`` that reports to the TrainJob's status.

    ``Trainer(..., callbacks=[KilnCallback()])``: each step's global step, ``max_steps`` and epoch,
    what the Trainer logs (loss, learning_rate, grad_norm, eval_loss...), each checkpoint it saves
    (``<output_dir>/checkpoint-<step>``), and a last post when training ends. Duck-typed: it needs
    no transformers import, answers every event with None, and never raises into the Trainer.
    ``reporter`` defaults to the process-wide one (:func:`get_reporter`).
    """

    def __init__(self, reporter: Optional[Reporter] = None) -> None:
        self._reporter = reporter

    @property
    def reporter(self) -> Reporter:
        return self._reporter if self._reporter is not None else get_reporter()

    @staticmethod
    def _zero(state: Any) -> bool:
        return bool(getattr(state, "is_world_process_zero", True))

    def _progress(self, state: Any, metrics: Any = None) -> None:
        try:
            if self._zero(state):
                self.reporter.report(
                    step=getattr(state, "global_step", None),
                    total_steps=getattr(state, "max_steps", None),
                    metrics=_numbers(metrics),
                    epoch=getattr(state, "epoch", None),
                )
        except Exception:  # noqa: BLE001 - report() does not raise; a strange state might
            pass

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state)  # a resumed run starts at its checkpoint's step

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state)
        try:
            if self._zero(state):
                self.reporter.flush(EXIT_TIMEOUT)
        except Exception:  # noqa: BLE001
            pass

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state, kwargs.get("metrics"))

    def on_predict(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            if self._zero(state):
                step = getattr(state, "global_step", None)
                output_dir = getattr(args, "output_dir", None) or ""
                self.reporter.checkpoint(step, os.path.join(os.fspath(output_dir), f"checkpoint-{step}"))
        except Exception:  # noqa: BLE001
            pass

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._progress(state, kwargs.get("logs"))

    def __getattr__(self, name: str) -> Any:
        """An event newer transformers versions add: ignored."""
        if name.startswith("on_"):
            return _ignore
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None
