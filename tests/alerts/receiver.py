"""A real HTTP receiver on loopback for the alerts' tests: it records every request (path, headers, body) and
answers from a script of statuses (the last one repeats); "hang" keeps the connection open without a word."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    script: list = field(default_factory=lambda: [200])
    requests: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def answer(self):
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


@contextlib.contextmanager
def receiver(*script) -> Iterator[Receiver]:
    box: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            box["r"].requests.append(Received(self.path, dict(self.headers.items()), body))
            status = box["r"].answer()
            if status == "hang":
                box["r"].release.wait(30)
                return
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box["r"] = Receiver(server.server_address[1], list(script) or [200])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box["r"]
    finally:
        box["r"].release.set()
        server.shutdown()
        server.server_close()
