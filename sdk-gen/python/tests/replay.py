"""A local HTTP server that answers with exchanges recorded from a real Kiln API server
(sdk-gen/testdata/wire, written by sdk-gen/testdata/record.py) and keeps what it was sent."""

import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

WIRE = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "wire")


def load(name: str) -> Dict[str, Any]:
    with open(os.path.join(WIRE, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


class Replay:
    """Serves the named exchanges, each once, in order of arrival per path."""

    def __init__(self, *names: str, lose_first: bool = False) -> None:
        self.exchanges = [load(n) for n in names]
        self.lose_first = lose_first
        self.received: List[Dict[str, Any]] = []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                replay.received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if replay.lose_first and len(replay.received) == 1:
                    # The request arrived; its answer is lost on the way back.
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                for i, ex in enumerate(replay.exchanges):
                    if ex["request"]["path"] == self.path:
                        del replay.exchanges[i]
                        data = base64.b64decode(ex["response"]["bodyBase64"])
                        self.send_response(ex["response"]["status"])
                        self.send_header("Content-Type", ex["response"]["contentType"])
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "Replay":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
