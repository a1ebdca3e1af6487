"""A local SMTP sink for the demo: an SMTP server on loopback (aiosmtpd) that accepts every message and
writes it to a folder as an .eml file (open one with any mail client, or read it as text). Nothing is
relayed anywhere."""

from __future__ import annotations

import re
import socket
import threading
from datetime import datetime
from pathlib import Path

from .paths import RUN_DIR

MAIL_DIR = RUN_DIR / "mail"


class _Handler:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self._lock:
            self.count += 1
            n = self.count
        to = re.sub(r"[^A-Za-z0-9@._-]", "_", (envelope.rcpt_tos or ["nobody"])[0])[:80]
        path = self.folder / f"{datetime.now():%Y%m%d-%H%M%S}-{n:03d}-{to}.eml"
        path.write_bytes(envelope.original_content or envelope.content)
        return "250 Message accepted (written to a file, not relayed)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MailSink:
    """start() listens on 127.0.0.1 (a free port); stop() closes it. Messages land in `folder`."""

    def __init__(self, folder: Path = MAIL_DIR, port: int | None = None) -> None:
        self.folder = folder
        self.port = port or _free_port()
        self._handler = _Handler(folder)
        self._controller = None

    @property
    def url(self) -> str:
        """As EMAIL_URL (console/settings.py) takes it."""
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def received(self) -> int:
        return self._handler.count

    def start(self) -> MailSink:
        from aiosmtpd.controller import Controller

        self.folder.mkdir(parents=True, exist_ok=True)
        self._controller = Controller(self._handler, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
