"""A real HTTP receiver on loopback for the alerts' tests: it records every request (path, headers, body) and
answers from a script of statuses (the last one repeats); "hang" keeps the connection open without a word,
"trickle" sends its status line and then a header one byte every `trickle_every_s` (a receiver that would hold a
thread forever were each read bounded alone)."""

from __future__ import annotations

import contextlib
import datetime
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


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
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _enter(self, path: str) -> None:
        with self.lock:
            self.in_flight[path] = self.in_flight.get(path, 0) + 1
            self.most_in_flight[path] = max(self.most_in_flight.get(path, 0), self.in_flight[path])

    def _leave(self, path: str) -> None:
        with self.lock:
            self.in_flight[path] -= 1

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/hook" if self.tls else f"http://127.0.0.1:{self.port}/hook"

    def answer(self):
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) for the name localhost, signed by itself: a client trusts it when told to (the
    SSL_CERT_FILE environment variable, which OpenSSL's default verify paths read)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "receiver.crt", folder / "receiver.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@contextlib.contextmanager
def receiver(*script, tls: tuple[Path, Path] | None = None) -> Iterator[Receiver]:
    """`tls`: (certificate, key) to answer over HTTPS with (self_signed)."""
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
