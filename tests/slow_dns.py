"""A real DNS server on loopback that answers slowly, for the alerts' tests: every A query for a name under
ZONE is answered 127.0.0.1 after `delay_s` (AAAA: no address, after the same wait), each query on a thread of
its own, and every query recorded. A resolver asks a name server on port 53 only, so it listens on a loopback
address of its own (127.53.x.y); and only the processes started through `within(argv)` ask it: each runs in a
mount namespace of its own where /etc/resolv.conf is this server's file (the machine's is untouched, and so is
every other process's lookup). Both take root (binding port 53, mounting): without it the tests that need slow
names are skipped, with the reason."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ZONE = "pgconsole.test"
_A, _AAAA = 1, 28


@dataclass
class SlowNames:
    address: str  # where it listens (port 53)
    resolv_conf: Path
    delay_s: float
    queries: list[tuple[str, int]] = field(default_factory=list)  # (name, type) in the order they came

    def name(self, label: str) -> str:
        return f"{label}.{ZONE}"

    def within(self, argv: list[str]) -> list[str]:
        """`argv` run so that its lookups go to this server (a mount namespace of its own; the same pid, so a
        test stops or kills it as it would the command itself)."""
        mount = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(self.resolv_conf), *argv]

    def asked(self, name: str) -> int:
        return sum(1 for n, kind in self.queries if n == name and kind == _A)


def _question(data: bytes) -> tuple[str, int, int]:
    """(name, type, end of the question) of a query."""
    labels, i = [], 12
    while data[i]:
        labels.append(data[i + 1 : i + 1 + data[i]].decode("ascii", "replace"))
        i += data[i] + 1
    (kind,) = struct.unpack(">H", data[i + 1 : i + 3])
    return ".".join(labels).lower(), kind, i + 5


def _answer(data: bytes) -> bytes:
    name, kind, end = _question(data)
    ours = name == ZONE or name.endswith("." + ZONE)
    records = b""
    if ours and kind == _A:
        records = b"\xc0\x0c" + struct.pack(">HHIH", _A, 1, 60, 4) + socket.inet_aton("127.0.0.1")
    flags = 0x8180 if ours else 0x8183  # an answer, recursion available; NXDOMAIN outside the zone
    return data[:2] + struct.pack(">HHHHH", flags, 1, 1 if records else 0, 0, 0) + data[12:end] + records


def _bound() -> socket.socket:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a slow name server takes root: port 53 on a loopback address, and a mount namespace")
    for _ in range(20):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        address = f"127.53.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
        try:
            sock.bind((address, 53))
            return sock
        except OSError:
            sock.close()
    pytest.skip("no loopback address with port 53 free")


@contextlib.contextmanager
def slow_names(delay_s: float, folder: Path) -> Iterator[SlowNames]:
    sock = _bound()
    conf = folder / "resolv.conf"
    # One server, one try, as long as it takes: the console's own deadline is what gives up on the name.
    conf.write_text(f"nameserver {sock.getsockname()[0]}\noptions timeout:30 attempts:1\n")
    server = SlowNames(sock.getsockname()[0], conf, delay_s)
    check = subprocess.run(server.within(["true"]), capture_output=True, text=True)
    if check.returncode != 0:
        sock.close()
        pytest.skip(f"no mount namespace here: {check.stderr.strip()}")
    stop = threading.Event()

    def answer(data: bytes, client: tuple) -> None:
        if not stop.wait(delay_s):
            with contextlib.suppress(OSError, IndexError, struct.error):
                sock.sendto(_answer(data), client)

    def serve() -> None:
        sock.settimeout(0.2)  # to see `stop`
        while not stop.is_set():
            try:
                data, client = sock.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            with contextlib.suppress(IndexError, struct.error):
                server.queries.append(_question(data)[:2])
            threading.Thread(target=answer, args=(data, client), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()  # the threads still waiting to answer send nothing more
        thread.join(5)
        sock.close()
