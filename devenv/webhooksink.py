"""A local webhook receiver for the demo: an HTTP server on loopback (a thread of http.server) that writes every
POST it receives to a folder as a JSON file, with its headers, its body (parsed where it is JSON) and whether its
signature verifies with the signing secret it was given (alerts/signing.py, as a real receiver checks it).
Nothing is forwarded anywhere.

A POST whose signature does not verify is still written, and answered 401 as a receiver would refuse it, so that
the console's delivery record shows the refusal; without a secret every POST is accepted (204)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .paths import RUN_DIR

WEBHOOK_DIR = RUN_DIR / "webhooks"
MAX_BODY = 1 << 20  # a console alert is a few KB


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "pgconsole-demo-webhook-sink"

    def do_POST(self) -> None:
        sink = self.server.sink
        try:
            length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        except ValueError:
            length = 0
        body = self.rfile.read(length) if length > 0 else b""
        verified = sink.check(self.headers, body)
        sink.write(self.path, dict(self.headers.items()), body, verified)
        self.send_response(401 if verified is False else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's name
        pass  # the files are the log; the demo's output stays readable


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, sink: WebhookSink) -> None:
        self.sink = sink
        super().__init__(("127.0.0.1", sink.port), _Handler)


class WebhookSink:
    """start() listens on 127.0.0.1 (a free port unless given); stop() closes it. POSTs land in `folder`, one
    JSON file each. `secret`: the signing secret of the channel that sends here (may be set after start(), once
    the channel exists) and `verify` how to check a signature with it; without either, signatures are not
    checked."""

    def __init__(
        self,
        folder: Path = WEBHOOK_DIR,
        port: int = 0,
        secret: str | None = None,
        verify: Callable[[str, dict[str, str], bytes], bool] | None = None,
    ) -> None:
        self.folder = folder
        self.port = port
        self.secret = secret
        self.verify = verify  # the console's own check (alerts.signing.verify), handed in: devenv imports no app
        self.received = 0
        self.verified = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The URL to give the webhook channel."""
        return f"http://127.0.0.1:{self.port}/alerts"

    def check(self, headers, body: bytes) -> bool | None:
        """Whether the signature verifies with the secret (None: no secret, or no way, to check it with)."""
        if not self.secret or self.verify is None:
            return None
        return self.verify(self.secret, dict(headers.items()), body)

    def write(self, path: str, headers: dict[str, str], body: bytes, verified: bool | None) -> Path:
        with self._lock:
            self.received += 1
            self.verified += verified is True
            n = self.received
        text = body.decode("utf-8", "replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        event = parsed.get("event") if isinstance(parsed, dict) else None
        record = {
            "received_at": datetime.now().astimezone().isoformat(),
            "path": path,
            "headers": headers,
            "signature_verified": verified,
            "body": parsed if parsed is not None else text,
        }
        name = f"{datetime.now():%Y%m%d-%H%M%S}-{n:03d}-{event if isinstance(event, str) else 'post'}"
        target = self.folder / f"{''.join(c if c.isalnum() or c in '-_' else '_' for c in name)}.json"
        partial = target.with_suffix(".part")  # renamed when complete: a reader never sees half a file
        partial.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        partial.replace(target)
        return target

    def start(self) -> WebhookSink:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._server = _Server(self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-sink", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
