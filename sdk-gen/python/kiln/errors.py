"""The errors of the Kiln API: one exception class per Connect code.

Every call raises a subclass of :class:`KilnError`. Its ``message`` is the server's (it
names the field or the permission at fault); ``field_violations`` lists the fields a
request got wrong, as the server's ``google.rpc.BadRequest`` detail says; ``retry_after``
is the server's ``google.rpc.RetryInfo`` delay, in seconds, when it sent one::

    try:
        client.train(runtime="torch-distributed", trainer=CustomTrainerContainer(num_nodes=0))
    except kiln.InvalidArgumentError as e:
        for v in e.field_violations:
            print(v.field, v.description)
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type

__all__ = [
    "KilnError",
    "FieldViolation",
    "CanceledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "JobFailedError",
    "KilnWarning",
    "error_from_wire",
    "error_from_http_status",
]


@dataclass(frozen=True)
class FieldViolation:
    """A field of a request that is wrong, and why (``field`` is e.g. ``spec.trainer.numNodes``)."""

    field: str
    description: str


class KilnError(RuntimeError):
    """An error of the Kiln API: ``code`` is the Connect code, e.g. ``invalid_argument``.

    A RuntimeError, as the Kubeflow SDK's API failures are: ``except RuntimeError`` written for
    it catches every Kiln API error too, NotFoundError included."""

    code = "unknown"

    def __init__(
        self,
        message: str,
        *,
        field_violations: Optional[List[FieldViolation]] = None,
        retry_after: Optional[float] = None,
        details: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field_violations: List[FieldViolation] = list(field_violations or [])
        self.retry_after = retry_after
        #: the raw details as the server sent them ({"type": ..., "value": base64}).
        self.details: List[Dict[str, Any]] = list(details or [])

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class CanceledError(KilnError):
    code = "canceled"


class UnknownError(KilnError):
    code = "unknown"


class InvalidArgumentError(KilnError, ValueError):
    code = "invalid_argument"


class DeadlineExceededError(KilnError, TimeoutError):
    code = "deadline_exceeded"


class NotFoundError(KilnError, LookupError):
    code = "not_found"


class AlreadyExistsError(KilnError):
    code = "already_exists"


class PermissionDeniedError(KilnError, PermissionError):
    code = "permission_denied"


class ResourceExhaustedError(KilnError):
    code = "resource_exhausted"


class FailedPreconditionError(KilnError):
    code = "failed_precondition"


class AbortedError(KilnError):
    code = "aborted"


class OutOfRangeError(KilnError):
    code = "out_of_range"


class UnimplementedError(KilnError, NotImplementedError):
    code = "unimplemented"


class InternalError(KilnError):
    code = "internal"


class UnavailableError(KilnError, ConnectionError):
    code = "unavailable"


class DataLossError(KilnError):
    code = "data_loss"


class UnauthenticatedError(KilnError, PermissionError):
    code = "unauthenticated"


class JobFailedError(RuntimeError):
    """A job that was waited for failed (``wait_for_job_status`` without ``Failed`` in its statuses)."""

    def __init__(self, job: Any) -> None:
        self.job = job
        super().__init__(f"TrainJob {job.namespace}/{job.name} failed ({job.reason}): {job.message}")


class KilnWarning(UserWarning):
    """What the server warned of when it created a job or schedule: something that may keep it
    from running (a claim its pods need that the namespace lacks, more than its queue can ever
    admit, no command, the queue Kueue chose). Raised with :func:`warnings.warn`, so Python
    prints it once; ``warnings.simplefilter("error", kiln.KilnWarning)`` makes it an error."""


_BY_CODE: Dict[str, Type[KilnError]] = {
    c.code: c
    for c in (
        CanceledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}

_BAD_REQUEST = "google.rpc.BadRequest"
_RETRY_INFO = "google.rpc.RetryInfo"


def error_from_wire(obj: Any, *, fallback: str = "unknown") -> KilnError:
    """The exception of a Connect error object ({"code", "message", "details"})."""
    if not isinstance(obj, dict):
        return _BY_CODE[fallback](f"malformed error from the server: {obj!r}")
    code = obj.get("code") if isinstance(obj.get("code"), str) else fallback
    cls = _BY_CODE.get(code, UnknownError)
    message = obj.get("message") if isinstance(obj.get("message"), str) else code
    details = [d for d in obj.get("details") or [] if isinstance(d, dict)]
    violations: List[FieldViolation] = []
    retry_after: Optional[float] = None
    for d in details:
        try:
            value = _b64(d.get("value", ""))
            if d.get("type") == _BAD_REQUEST:
                violations.extend(_bad_request(value))
            elif d.get("type") == _RETRY_INFO:
                retry_after = _retry_info(value)
        except ValueError:
            continue  # a detail this SDK cannot read does not hide the error itself
    return cls(message, field_violations=violations, retry_after=retry_after, details=details)


# HTTP status → Connect code, as the Connect protocol maps them when a response carries no
# Connect error (a proxy's answer, say).
_HTTP = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    408: "deadline_exceeded",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def error_from_http_status(status: int, reason: str, body: bytes) -> KilnError:
    """The exception of an HTTP response that carries no Connect error."""
    code = _HTTP.get(status, "unknown")
    text = body[:200].decode("utf-8", "replace").strip()
    return _BY_CODE[code](f"HTTP {status} {reason}" + (f": {text}" if text else ""))


def _b64(s: str) -> bytes:
    s = s.replace("-", "+").replace("_", "/")
    return base64.b64decode(s + "=" * (-len(s) % 4))


def _fields(buf: bytes) -> Iterator[Tuple[int, Any]]:
    """The (field number, value) pairs of a protobuf message: varints as int, LEN as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            yield num, v
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated protobuf")
            yield num, buf[i : i + n]
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("bad protobuf varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _bad_request(buf: bytes) -> List[FieldViolation]:
    out = []
    for num, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            f = {n: x for n, x in _fields(v) if isinstance(x, bytes)}
            out.append(FieldViolation(f.get(1, b"").decode(), f.get(2, b"").decode()))
    return out


def _retry_info(buf: bytes) -> Optional[float]:
    for num, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            d = dict(_fields(v))
            return float(d.get(1, 0)) + d.get(2, 0) / 1e9
    return None
