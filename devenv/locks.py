"""The lock files (requirements/*.txt) as pip reads them: every pin with its version and hashes, and the lines
that are not pinned with hashes; and what a lock would leave unmet, installed as make install installs it (without
resolving a dependency). Read by the lock's tests (tests/test_lock.py) and by make licenses."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


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


def unmet_requirements(
    pins: dict[str, Pin],
    roots: list[Requirement],
    requires: Callable[[str], list[str] | None],
    environment: dict[str, str] | None = None,
) -> list[str]:
    """What the lock `pins` would leave unmet, installed with --no-deps: from `roots` (what pyproject.toml asks
    for), every requirement of every package reached, extras included (`fonttools[woff]` brings brotli and zopfli,
    which `pip check` does not look for), evaluated for `environment` (this machine's by default) and checked
    against the pinned version. `requires(name)` gives a package's Requires-Dist lines (importlib.metadata's
    `requires`, reading the installed distributions, for a lock installed here)."""
    environment = environment or default_environment()
    unmet: list[str] = []
    extras_seen: dict[str, set[str]] = {}
    todo: list[tuple[str, Requirement]] = [("pyproject.toml", root) for root in roots]
    while todo:
        asker, requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        pin = pins.get(name)
        if pin is None or not requirement.specifier.contains(Version(pin.version), prereleases=True):
            unmet.append(f"{asker} needs {requirement}, the lock has {pin.version if pin else 'nothing'}")
            continue
        extras = {""} | {canonicalize_name(extra) for extra in requirement.extras}
        new = extras - extras_seen.setdefault(name, set())
        if not new:
            continue
        extras_seen[name] |= new
        for line in requires(pin.name) or []:
            needed = Requirement(line)
            if needed.marker is None or any(needed.marker.evaluate({**environment, "extra": e}) for e in new):
                todo.append((f"{pin.name}=={pin.version}", needed))
    return sorted(set(unmet))
