"""The Connect protocol over HTTP/1.1 with JSON, standard library only.

Unary calls are ``POST /<service>/<method>`` with ``application/json``; server streams are
``application/connect+json``, each message in an envelope (1 byte of flags, 4 bytes of
big-endian length) and a last, flagged envelope that carries the stream's error, if any.
See https://connectrpc.com/docs/protocol.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import struct
import time
import urllib.parse
from typing import Any, Dict, Iterator, Optional, Type, TypeVar

from kiln import errors
from kiln._proto import Message

__all__ = ["Transport", "USER_AGENT"]

M = TypeVar("M", bound=Message)

USER_AGENT = "kiln-sdk-python/0.1.0"

_END_STREAM = 0x02
_COMPRESSED = 0x01
_MAX_MESSAGE = 64 << 20


class Transport:
    """Calls one Kiln API server.

    ``server`` is ``https://host:port`` (or ``http://`` for a server without TLS); the
    token, when given, is sent as a bearer token; ``token_file`` is read again for every
    call (a pod's projected ServiceAccount token rotates); ``ca_file`` holds the CAs that
    sign the server's certificate (the system's are trusted otherwise); ``ca_data`` is PEM of
    more CAs to trust (with ``ca_file``'s, or the system's), e.g. the ``caBundle`` a cluster
    publishes with Kiln's URL.
    """

    def __init__(
        self,
        server: str,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        ca_file: Optional[str] = None,
        ca_data: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 4,
    ) -> None:
        u = urllib.parse.urlsplit(server)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"server {server!r}: want a URL such as https://kiln.example.com or http://127.0.0.1:18090")
        self.server = server.rstrip("/")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port or (443 if u.scheme == "https" else 80)
        self._prefix = u.path.rstrip("/")
        self._token = token
        self._token_file = token_file
        self.timeout = timeout
        self.retries = retries
        self._ssl: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            try:
                self._ssl = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"certificate-authority {ca_file}: {e}") from None
            if ca_data:
                try:
                    self._ssl.load_verify_locations(cadata=ca_data)
                except (ssl.SSLError, ValueError) as e:
                    raise ValueError(f"certificate-authority data (the caBundle of kube-public/kiln-info): {e}") from None

    # -- calls ---------------------------------------------------------------------------

    def unary(
        self,
        service: str,
        method: str,
        request: Message,
        response_type: Type[M],
        *,
        timeout: Optional[float] = None,
        idempotent: bool = False,
    ) -> M:
        """Call a unary method. Idempotent calls are retried while the server is unavailable."""
        body = request.to_json().encode()
        attempt = 0
        while True:
            try:
                status, reason, data = self._post(service, method, body, "application/json", timeout)
                if status != 200:
                    raise _unary_error(status, reason, data)
                break
            except errors.UnavailableError as e:
                attempt += 1
                if not idempotent or attempt > self.retries:
                    raise
                time.sleep(e.retry_after if e.retry_after else min(0.2 * 2**attempt, 3.0))
        try:
            return response_type.from_json(data.decode("utf-8"))
        except ValueError as e:
            raise errors.InternalError(f"{service}/{method}: cannot decode the response: {e}") from None

    def server_stream(
        self,
        service: str,
        method: str,
        request: Message,
        response_type: Type[M],
        *,
        timeout: Optional[float] = None,
    ) -> Iterator[M]:
        """Call a server-streaming method; the iterator yields each response message.

        Closing the iterator (or leaving a ``for`` loop early) closes the connection, which
        cancels the call on the server.
        """
        body = request.to_json().encode()
        frame = struct.pack(">BI", 0, len(body)) + body
        conn, resp = self._open(service, method, frame, "application/connect+json", timeout, stream=True)
        try:
            if resp.status != 200:
                data = resp.read()
                raise _unary_error(resp.status, resp.reason, data)
            while True:
                head = _read_exact(resp, 5)
                if head is None:
                    raise errors.UnavailableError(f"{service}/{method}: the stream ended without its end-of-stream message")
                flags, length = struct.unpack(">BI", head)
                if length > _MAX_MESSAGE:
                    raise errors.ResourceExhaustedError(f"{service}/{method}: a message of {length} bytes is over the limit")
                payload = _read_exact(resp, length) if length else b""
                if payload is None:
                    raise errors.UnavailableError(f"{service}/{method}: the stream broke in the middle of a message")
                if flags & _COMPRESSED:
                    raise errors.InternalError(f"{service}/{method}: the server sent a compressed message this SDK did not ask for")
                if flags & _END_STREAM:
                    end = json.loads(payload.decode("utf-8") or "{}")
                    if isinstance(end, dict) and end.get("error"):
                        raise errors.error_from_wire(end["error"])
                    return
                try:
                    yield response_type.from_json(payload.decode("utf-8"))
                except ValueError as e:
                    raise errors.InternalError(f"{service}/{method}: cannot decode a response: {e}") from None
        except errors.KilnError:
            # The server's own error: some are OSErrors too (PermissionDeniedError is a
            # PermissionError), and are not the network's.
            raise
        except (OSError, http.client.HTTPException) as e:
            raise _network_error(self.server, e) from None
        finally:
            conn.close()

    # -- HTTP ----------------------------------------------------------------------------

    def _headers(self, content_type: str, timeout: Optional[float]) -> Dict[str, str]:
        h = {
            "Content-Type": content_type,
            "Connect-Protocol-Version": "1",
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
        }
        if content_type == "application/connect+json":
            h["Connect-Accept-Encoding"] = "identity"
        if timeout is not None:
            h["Connect-Timeout-Ms"] = str(max(1, int(timeout * 1000)))
        token = self._token
        if not token and self._token_file:
            try:
                with open(self._token_file, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as e:
                raise errors.UnauthenticatedError(f"reading the token file (token-file or KILN_TOKEN_FILE): {e}") from None
        if token:
            h["Authorization"] = "Bearer " + token
        h.update(_trace_headers())
        return h

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=t, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=t)

    def _open(
        self, service: str, method: str, body: bytes, content_type: str, timeout: Optional[float], stream: bool = False
    ) -> Any:
        # A stream may idle between messages (heartbeats come every 15 s by default): its
        # socket waits without a read timeout unless the caller gave one.
        conn = self._connection(timeout if (timeout is not None or not stream) else None)
        if stream and timeout is None:
            conn.timeout = None
        try:
            conn.request("POST", f"{self._prefix}/{service}/{method}", body=body, headers=self._headers(content_type, timeout))
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _network_error(self.server, e) from None

    def _post(self, service: str, method: str, body: bytes, content_type: str, timeout: Optional[float]) -> Any:
        conn, resp = self._open(service, method, body, content_type, timeout)
        try:
            return resp.status, resp.reason, resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise _network_error(self.server, e) from None
        finally:
            conn.close()


def _read_exact(resp: http.client.HTTPResponse, n: int) -> Optional[bytes]:
    buf = b""
    while len(buf) < n:
        chunk = resp.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _unary_error(status: int, reason: str, data: bytes) -> errors.KilnError:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return errors.error_from_http_status(status, reason, data)
    if isinstance(obj, dict) and isinstance(obj.get("code"), str):
        return errors.error_from_wire(obj)
    return errors.error_from_http_status(status, reason, data)


def _network_error(server: str, e: BaseException) -> errors.KilnError:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return errors.DeadlineExceededError(f"no answer from the Kiln API server at {server} in time: {e}")
    if isinstance(e, ssl.SSLCertVerificationError):
        return errors.UnavailableError(
            f"the Kiln API server at {server} presented a certificate this client does not trust: {e.verify_message} "
            "(set certificate-authority in the Kiln configuration, or KILN_CA_FILE)"
        )
    return errors.UnavailableError(f"cannot reach the Kiln API server at {server}: {e} (check the server in the Kiln configuration or KILN_SERVER)")


def _trace_headers() -> Dict[str, str]:
    """The W3C trace context to send: the current span's when OpenTelemetry is installed and
    configured (optional; the SDK needs only the standard library), else TRACEPARENT and
    TRACESTATE from the environment (OpenTelemetry's environment carriers). The API server
    continues that trace, and the operator's spans for a job it creates join it."""
    h: Dict[str, str] = {}
    propagate = _otel_propagate()
    if propagate is not None:
        propagate.inject(h)
    if "traceparent" not in h and os.environ.get("TRACEPARENT"):
        h["traceparent"] = os.environ["TRACEPARENT"]
        if os.environ.get("TRACESTATE"):
            h["tracestate"] = os.environ["TRACESTATE"]
    return h


_OTEL_UNSET = object()
_otel: Any = _OTEL_UNSET


def _otel_propagate() -> Any:
    """opentelemetry.propagate when installed, else None (looked up once)."""
    global _otel
    if _otel is _OTEL_UNSET:
        try:
            from opentelemetry import propagate  # type: ignore[import-not-found]

            _otel = propagate
        except ImportError:
            _otel = None
    return _otel
