"""A real HTTP receiver on loopback for the alerts' tests: it records every request (path, headers, body) and
answers from a script of statuses (the last one repeats); "hang" keeps the connection open without a word,
"trickle" sends its status line and then a header one byte every `trickle_every_s` (a receiver that would hold a
thread forever were each read bounded alone)."""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devenv.tls import devenv_tls


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
    trickle_every_s: float = 0.2
    tls: bool = False
    in_flight: dict[str, int] = field(default_factory=dict)  # path -> requests being answered now
    most_in_flight: dict[str, int] = field(default_factory=dict)  # path -> the most at once
    most_at_once: int = 0  # requests being answered at once, whatever their path: the most
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _enter(self, path: str) -> None:
        with self.lock:
            self.in_flight[path] = self.in_flight.get(path, 0) + 1
            self.most_in_flight[path] = max(self.most_in_flight.get(path, 0), self.in_flight[path])
            self.most_at_once = max(self.most_at_once, sum(self.in_flight.values()))

    def _leave(self, path: str) -> None:
        with self.lock:
            self.in_flight[path] -= 1

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/hook" if self.tls else f"http://127.0.0.1:{self.port}/hook"

    def answer(self):
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def devenv_certificate() -> tuple[Path, Path, Path]:
    """(certificate, key, CA) of devenv's server certificate for localhost (devenv/tls.py, what the monitored
    clusters present): a client trusts it when given the CA (the SSL_CERT_FILE environment variable, which
    OpenSSL's default verify paths read)."""
    folder = devenv_tls()
    return folder / "server.crt", folder / "server.key", folder / "ca.crt"


@contextlib.contextmanager
def receiver(*script, tls: tuple[Path, Path] | None = None) -> Iterator[Receiver]:
    """`tls`: (certificate, key) to answer over HTTPS with (devenv_certificate)."""
    box: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            box["r"]._enter(self.path)
            try:
                self._answer()
            finally:
                box["r"]._leave(self.path)

        def _answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            box["r"].requests.append(Received(self.path, dict(self.headers.items()), body))
            status = box["r"].answer()
            if status == "hang":
                box["r"].release.wait(30)
                return
            if status == "trickle":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                self.wfile.flush()
                while not box["r"].release.is_set():
                    hung_up, _, _ = select.select([self.connection], [], [], box["r"].trickle_every_s)
                    try:
                        if hung_up and not self.connection.recv(1, socket.MSG_PEEK):
                            return  # the console gave up: seen at once, so that in_flight is exact
                        self.wfile.write(b"a")
                        self.wfile.flush()
                    except OSError:
                        return
                return
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    box["r"] = Receiver(server.server_address[1], list(script) or [200], tls=tls is not None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box["r"]
    finally:
        box["r"].release.set()
        server.shutdown()
        server.server_close()
