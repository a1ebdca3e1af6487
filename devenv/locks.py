"""The lock files (requirements/*.txt) as pip reads them: every pin with its version and hashes, and the lines
that are not pinned with hashes. Read by the lock's tests (tests/test_lock.py) and by make licenses."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class Pin:
    name: str  # canonical: lower case, `-`
    version: str
    hashes: frozenset[str]


@dataclass(frozen=True)
class Lock:
    pins: dict[str, Pin]
    unhashed: list[str]  # every requirement line that is not `name==version --hash=sha256:...`


PIN = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})+)"
)


def parse_lock(text: str) -> Lock:
    """A requirements file as pip reads it: `\\` continues a line, a line starting with # is a comment."""
    pins, unhashed, pending = {}, [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical, pending = (pending + line).strip(), ""
        match = PIN.fullmatch(logical)
        if match is None:
            unhashed.append(logical)
            continue
        name = canonicalize_name(match["name"])
        hashes = frozenset(re.findall(r"sha256:([0-9a-f]{64})", match["hashes"]))
        pins[name] = Pin(name, match["version"], hashes)
    return Lock(pins, unhashed)
