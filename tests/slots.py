"""What each pytest worker has of its own when the suite runs on several (pytest-xdist, as `make test` runs it):
its test clusters' ports and folders, its Redis database and its lock on them. Worker gw<n> is slot n; a run
without xdist is slot 0, with the ports, folders and database the suite always had. The test database is
pytest-django's own per worker (test_pgconsole_gw<n>)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from devenv.paths import RUN_DIR
from devenv.ports import TEST_SLOT_STRIDE, TEST_SLOTS

#: The tests' Redis database per slot (docs/development.md, Redis databases: 0 the demo; 5, 7 and 11 single test
#: modules; 12 and 13 benchmarks).
REDIS_DBS = (9, 10, 14)
assert len(REDIS_DBS) == TEST_SLOTS


def slot() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    n = int(worker.removeprefix("gw"))
    if n >= TEST_SLOTS:
        raise RuntimeError(f"pytest worker {worker}: the suite has ports and databases for {TEST_SLOTS} workers")
    return n


def port(base: int) -> int:
    """Worker 0's port `base` (devenv.ports), as this worker's."""
    return base + slot() * TEST_SLOT_STRIDE


def cluster_dir() -> Path:
    """Where this worker's test clusters live (their ClusterSpec.base)."""
    return RUN_DIR if slot() == 0 else RUN_DIR / f"slot{slot()}"


def redis_url() -> str:
    return f"redis://127.0.0.1:6379/{REDIS_DBS[slot()]}"


def lock_path() -> Path:
    """The machine-wide lock on this slot's clusters (their ports are the machine's, whichever checkout runs)."""
    suffix = "" if slot() == 0 else f"-slot{slot()}"
    return Path(tempfile.gettempdir()) / f"pgconsole-test-clusters{suffix}.lock"


def own_env(name: str, make: Callable[[], str]) -> None:
    """os.environ[name] as this worker's own: kept where it was given (by a developer's shell, or by a test to the
    console's process it starts, which loads these settings too), made where it is missing or another worker's
    (pytest-xdist's workers inherit the environment of the process that loaded the settings first)."""
    marker = f"PGCONSOLE_TEST_SLOT_OF_{name}"
    if name not in os.environ or os.environ.get(marker, str(slot())) != str(slot()):
        os.environ[name] = make()
        os.environ[marker] = str(slot())
