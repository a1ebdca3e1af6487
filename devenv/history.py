"""The history store: the PostgreSQL cluster (port 54320) holding the console's own database,
shared by the demo and the tests."""

from __future__ import annotations

from pathlib import Path

from .binaries import find_binaries
from .cluster import Cluster
from .fleet import ClusterSpec, start_one
from .ports import HISTORY_PORT

HISTORY_MAJOR = 17
HISTORY_NAME = "history"
HISTORY_DB = "pgconsole"
DEFAULT_DATABASE_URL = f"postgres://postgres@127.0.0.1:{HISTORY_PORT}/{HISTORY_DB}"


def history_spec() -> ClusterSpec:
    def _setup(c: Cluster, created: bool) -> None:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", params=[HISTORY_DB]):
            c.execute(f'CREATE DATABASE "{HISTORY_DB}"')

    return ClusterSpec(
        name=HISTORY_NAME,
        major=HISTORY_MAJOR,
        port=HISTORY_PORT,
        preload=["pg_stat_statements"],
        setup=_setup,
        tls=False,  # the console's own database on loopback
    )


def up_history() -> tuple[Cluster, str]:
    """Start (or reuse) the history store; returns (cluster, what was done)."""
    spec = history_spec()
    c = Cluster(
        name=spec.name,
        major=spec.major,
        port=spec.port,
        datadir=Path(spec.base) / spec.name,
        bindir=find_binaries(spec.major) or Path("/nonexistent"),
    )
    if c.is_running():
        spec.setup(c, False)
        return c, "reused running"
    existed = c.initialized
    c = start_one(spec)
    return c, "started existing" if existed else "created"
