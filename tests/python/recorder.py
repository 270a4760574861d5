# SPDX-License-Identifier: Apache-2.0
# The Python client tests' recorder fixture: a tiny HTTP server on a free loopback port that records what is POSTed.
# (Not a conftest.py: tests/integration has the one module named conftest that its tests import from.)
"""
These tests need no cluster: the Recorder server answers each request with the status and JSON body it
is told to (200 {"job","epoch","names","targets":[]} by default) and keeps every request it received.
The package under test is python/fasttier (on sys.path through pytest.ini's pythonpath).
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Recorder:
    def __init__(self):
        self.requests = []    # (method, path, parsed JSON body or raw bytes)
        self.authorization = []  # the Authorization header of each request (None when absent)
        self.replies = []     # (status, body dict[, headers dict]) to answer with, in turn; then the default
        self.lock = threading.Lock()
        self.server = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def hints(self):
        """The order-hint values posted, in order."""
        return [body["value"] for method, _, body in self.requests
                if method == "POST" and isinstance(body, dict) and body.get("action") == "order-hint"]


def _handler(rec):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            with rec.lock:
                rec.requests.append(("POST", self.path, body))
                rec.authorization.append(self.headers.get("Authorization"))
                reply = rec.replies.pop(0) if rec.replies else None
            if reply is None:
                value = body.get("value", {}) if isinstance(body, dict) else {}
                reply = (200, {"job": value.get("job", "default"), "epoch": value.get("epoch"),
                               "names": len(value.get("objnames", [])), "targets": []})
            status, doc = reply[:2]
            data = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (reply[2] if len(reply) > 2 else {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST  # a GET has no body: recorded as b""

    return Handler


@pytest.fixture
def recorder():
    rec = Recorder()
    rec.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    t = threading.Thread(target=rec.server.serve_forever, daemon=True)
    t.start()
    try:
        yield rec
    finally:
        rec.server.shutdown()
        rec.server.server_close()
        t.join(5)
