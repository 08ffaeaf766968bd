"""The proto3 JSON mapping of the generated messages (kiln._gen), standard library only.

Every generated message is a dataclass with a ``_fields`` table of :class:`Field`; this
module turns one into the JSON the Connect protocol carries and back, as protobuf's
canonical JSON mapping says: lowerCamelCase names, 64-bit integers as strings, enums by
name, ``google.protobuf.Timestamp`` as RFC 3339, default values left out. Unknown fields
and enum values from a newer server are ignored, so an older SDK keeps working.
"""

from __future__ import annotations

import base64
import enum
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Dict, Optional, Tuple, Type, TypeVar

__all__ = ["Field", "Kind", "Message", "format_timestamp", "parse_timestamp"]


class Kind(enum.Enum):
    """The kind of one value of a field."""

    STRING = "string"
    BOOL = "bool"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT = "float"
    BYTES = "bytes"
    ENUM = "enum"
    MESSAGE = "message"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True)
class Field:
    """One field of a generated message: its attribute, its JSON name and its kind."""

    name: str
    json_name: str
    kind: Kind
    ref: Any = None
    repeated: bool = False
    optional: bool = False
    map_key: Optional[Kind] = None


M = TypeVar("M", bound="Message")

_ZERO = {Kind.STRING: "", Kind.BOOL: False, Kind.INT32: 0, Kind.INT64: 0, Kind.FLOAT: 0.0, Kind.BYTES: b""}


class Message:
    """The base of every generated message."""

    _fields: ClassVar[Tuple[Field, ...]] = ()

    def to_dict(self) -> Dict[str, Any]:
        """The message in protobuf's JSON mapping, default values left out."""
        out: Dict[str, Any] = {}
        for f in self._fields:
            value = getattr(self, f.name)
            if f.map_key is not None:
                if value:
                    out[f.json_name] = {str(k): _encode(f, v) for k, v in value.items()}
            elif f.repeated:
                if value:
                    out[f.json_name] = [_encode(f, v) for v in value]
            elif value is None:
                continue
            elif f.optional or f.kind in (Kind.MESSAGE, Kind.TIMESTAMP):
                out[f.json_name] = _encode(f, value)
            elif value != _zero(f):
                out[f.json_name] = _encode(f, value)
        return out

    def to_json(self) -> str:
        """The message as compact JSON."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls: Type[M], data: Dict[str, Any]) -> M:
        """The message of a JSON object; fields may be named in JSON or proto style."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: want a JSON object, got {type(data).__name__}")
        kwargs: Dict[str, Any] = {}
        for f in cls._fields:
            if f.json_name in data:
                raw = data[f.json_name]
            elif f.name in data:
                raw = data[f.name]
            else:
                continue
            if raw is None:
                continue
            try:
                if f.map_key is not None:
                    kwargs[f.name] = {_decode_key(f.map_key, k): _decode(f, v) for k, v in raw.items()}
                elif f.repeated:
                    kwargs[f.name] = [_decode(f, v) for v in raw]
                else:
                    kwargs[f.name] = _decode(f, raw)
            except (TypeError, ValueError, AttributeError) as e:
                raise ValueError(f"{cls.__name__}.{f.json_name}: {e}") from None
        return cls(**kwargs)

    @classmethod
    def from_json(cls: Type[M], text: str) -> M:
        """The message of a JSON document."""
        return cls.from_dict(json.loads(text))


def _zero(f: Field) -> Any:
    if f.kind is Kind.ENUM:
        return 0
    return _ZERO.get(f.kind)


def _encode(f: Field, value: Any) -> Any:
    k = f.kind
    if k is Kind.MESSAGE:
        return value.to_dict()
    if k is Kind.TIMESTAMP:
        return format_timestamp(value)
    if k is Kind.INT64:
        return str(int(value))
    if k is Kind.ENUM:
        try:
            return f.ref(value).name
        except ValueError:
            return int(value)
    if k is Kind.BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def _decode(f: Field, raw: Any) -> Any:
    k = f.kind
    if k is Kind.MESSAGE:
        return f.ref.from_dict(raw)
    if k is Kind.TIMESTAMP:
        return parse_timestamp(raw)
    if k in (Kind.INT32, Kind.INT64):
        if isinstance(raw, bool):
            raise ValueError(f"want an integer, got {raw!r}")
        return int(raw)
    if k is Kind.FLOAT:
        return float(raw)
    if k is Kind.BOOL:
        if not isinstance(raw, bool):
            raise ValueError(f"want true or false, got {raw!r}")
        return raw
    if k is Kind.STRING:
        if not isinstance(raw, str):
            raise ValueError(f"want a string, got {raw!r}")
        return raw
    if k is Kind.BYTES:
        return base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_" if ("-" in raw or "_" in raw) else None)
    if k is Kind.ENUM:
        if isinstance(raw, str):
            try:
                return f.ref[raw]
            except KeyError:
                return f.ref(0)  # a value this SDK does not know yet
        try:
            return f.ref(int(raw))
        except ValueError:
            return int(raw)
    raise ValueError(f"unknown kind {k}")


def _decode_key(k: Kind, raw: str) -> Any:
    if k in (Kind.INT32, Kind.INT64):
        return int(raw)
    if k is Kind.BOOL:
        return raw == "true"
    return raw


_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_timestamp(text: str) -> datetime:
    """A timezone-aware UTC datetime of an RFC 3339 timestamp (nanoseconds are truncated)."""
    m = _TS.match(text)
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0").ljust(9, "0")[:6])
    dt = datetime(year, month, day, hour, minute, second, micros, tzinfo=timezone.utc)
    off = m.group(8)
    if off not in ("Z", "z"):
        sign = 1 if off[0] == "+" else -1
        dt -= sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6]))
    return dt


def format_timestamp(dt: datetime) -> str:
    """An RFC 3339 timestamp in UTC; a naive datetime is taken as UTC."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone(timezone.utc)
    s = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        s += f".{dt.microsecond:06d}".rstrip("0")
    return s + "Z"
