"""A local Connect server for the SDK's wire tests: it answers as the API server does (unary
calls in JSON, streams in Connect's envelopes) and keeps what it was sent."""

import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple


class Server:
    """Answers each unary method (by its name, e.g. GetCronTrainJob) with the (status, JSON)
    given for it; the n-th call of a streaming method answers streams[n]: its messages, then its
    end (an error, or None for none), or with drop=True no end at all, as a connection that
    breaks. With lose_first, the first request arrives but its answer is lost. Each request is
    kept as {"path", "method", "headers", "body"}."""

    def __init__(
        self,
        answers: Optional[Dict[str, Tuple[int, Dict[str, Any]]]] = None,
        streams: Optional[List[Dict[str, Any]]] = None,
        lose_first: bool = False,
    ) -> None:
        self.received: List[Dict[str, Any]] = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                method = self.path.rsplit("/", 1)[-1]
                streaming = self.headers.get("Content-Type") == "application/connect+json"
                if streaming:
                    body = body[5:]  # one enveloped request
                srv.received.append({"path": self.path, "method": method, "headers": dict(self.headers), "body": json.loads(body)})
                if lose_first and len(srv.received) == 1:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if not streaming:
                    status, answer = (answers or {}).get(method, (404, {"code": "unimplemented", "message": self.path}))
                    self.send(status, "application/json", json.dumps(answer).encode())
                    return
                n = len([r for r in srv.received if r["method"] == method]) - 1
                s = (streams or [])[n] if n < len(streams or []) else {"messages": [], "end": {"code": "internal", "message": "no more streams"}}
                data = b"".join(self.envelope(0, m) for m in s["messages"])
                if not s.get("drop"):
                    data += self.envelope(2, {"error": s["end"]} if s.get("end") else {})
                self.send(200, "application/connect+json", data)

            def envelope(self, flags: int, msg: Dict[str, Any]) -> bytes:
                payload = json.dumps(msg).encode()
                return struct.pack(">BI", flags, len(payload)) + payload

            def send(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def bodies(self, method: str) -> List[Dict[str, Any]]:
        return [r["body"] for r in self.received if r["method"] == method]
