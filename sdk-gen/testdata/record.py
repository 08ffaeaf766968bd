#!/usr/bin/env python3
"""Record Connect exchanges with a real Kiln API server for the SDKs' wire-format tests.

Run against the local platform (make up), from the repository's root:

    KILN_CONFIG=$PWD/bin/platform/kiln/config.yaml python3 sdk-gen/testdata/record.py

Each exchange is written to sdk-gen/testdata/wire/<name>.json: the request (path, content
type, body) and the response exactly as the server sent it (status, content type, body in
base64). The Python, TypeScript and Go tests replay them from a local HTTP server and check
what their decoders make of them. The token is never recorded.
"""

import base64
import http.client
import json
import os
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from kiln import config  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "wire")


def exchange(ctx, name, service, method, body, stream=False, note="", timeout_ms=None):
    u = ctx.server.split("://", 1)[1]
    host, port = u.split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=ctx.certificate_authority), timeout=60)
    payload = json.dumps(body, separators=(",", ":")).encode()
    ctype = "application/connect+json" if stream else "application/json"
    if stream:
        payload = struct.pack(">BI", 0, len(payload)) + payload
    conn.request("POST", f"/{service}/{method}", body=payload, headers={
        "Content-Type": ctype, "Connect-Protocol-Version": "1", "Authorization": "Bearer " + ctx.token,
        "Accept-Encoding": "identity", "Connect-Accept-Encoding": "identity",
        **({"Connect-Timeout-Ms": str(timeout_ms)} if timeout_ms else {})})
    resp = conn.getresponse()
    data = resp.read()
    rec = {
        "note": note,
        "request": {"path": f"/{service}/{method}", "contentType": ctype, "body": body, "timeoutMs": timeout_ms},
        "response": {"status": resp.status, "contentType": resp.getheader("Content-Type"), "bodyBase64": base64.b64encode(data).decode()},
    }
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(rec, f, indent=2)
        f.write("\n")
    print(name, resp.status, len(data), "bytes")
    return rec


def main():
    ctx = config.resolve()
    svc = "kiln.v1.TrainJobService"
    ns = ctx.namespace or "default"
    job = {"name": "wire-rec", "spec": {"runtime": "torch-distributed", "nodes": 2, "command": ["torchrun", "train.py"],
           "queue": "default", "activeDeadlineSeconds": "28800", "ttlSecondsAfterFinished": 86400}}
    exchange(ctx, "create-ok", svc, "CreateTrainJob", {"namespace": ns, "trainJob": job, "requestId": "wire-rec-1"},
             note="a job created through a Kueue queue, with a deadline and a TTL")
    time.sleep(8)
    exchange(ctx, "get-complete", svc, "GetTrainJob", {"namespace": ns, "name": "wire-rec"}, note="the same job, complete, with its steps")
    exchange(ctx, "watch-complete", svc, "WatchTrainJobs", {"namespace": ns, "name": "wire-rec", "heartbeatSeconds": 1}, stream=True,
             note="a watch of one finished job: ADDED, SYNCED, heartbeats, then deadline_exceeded at the 2.5 s timeout", timeout_ms=2500)
    exchange(ctx, "logs", svc, "StreamLogs", {"namespace": ns, "name": "wire-rec", "step": "node-0"}, stream=True,
             note="the logs of a finished step, then the end of the stream")
    exchange(ctx, "logs-not-found", svc, "StreamLogs", {"namespace": ns, "name": "wire-missing"}, stream=True,
             note="a stream that ends with an error in its end-of-stream message")
    exchange(ctx, "create-invalid", svc, "CreateTrainJob",
             {"namespace": ns, "trainJob": {"name": "x" * 70, "spec": {"runtime": "torch-distributed"}}, "requestId": "wire-rec-2"},
             note="a refused request: invalid_argument with a google.rpc.BadRequest detail naming the field")
    exchange(ctx, "list-denied", svc, "ListTrainJobs", {"namespace": "kube-system"}, note="permission_denied")
    exchange(ctx, "delete-ok", svc, "DeleteTrainJob", {"namespace": ns, "name": "wire-rec"}, note="an empty response")


if __name__ == "__main__":
    main()
