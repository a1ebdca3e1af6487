"""Many clusters at once: a ClusterSpec says what a cluster should be; start_many brings a set up
in parallel (reusing data directories), stop_many and existing_clusters deal with what runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .account import _is_root, run_as
from .binaries import find_binaries
from .cluster import Cluster, cluster
from .errors import ClusterError
from .paths import RUN_DIR


@dataclass
class ClusterSpec:
    name: str
    major: int
    port: int
    settings: dict[str, Any] = field(default_factory=dict)
    preload: list[str] = field(default_factory=list)
    #: wipe the data directory and initdb again
    fresh: bool = False
    #: pg_hba.conf lines placed before initdb's trust lines
    hba: list[str] = field(default_factory=list)
    #: called with the started Cluster (in the worker thread); ``created`` is
    #: True when the datadir was just initialized.
    setup: Callable[[Cluster, bool], None] | None = None
    base: Path | str = RUN_DIR
    #: offer TLS with devenv's certificate (devenv.tls), as the servers the console monitors should
    tls: bool = True


def start_one(spec: ClusterSpec) -> Cluster:
    """Create (if needed) and start one cluster according to ``spec``.

    With ``fresh=False`` an existing data directory is reused: the managed
    configuration is rewritten and a running server restarted if it changed.
    """
    c = cluster(spec.name, spec.major, spec.port, spec.base)
    if c.initialized:
        version = (c.datadir / "PG_VERSION").read_text().strip()
        if version != str(spec.major):
            if not spec.fresh:
                raise ClusterError(
                    f"[{c.name}] {c.datadir} holds a PostgreSQL {version} cluster, not "
                    f"{spec.major}; delete it or use fresh=True"
                )
    created = False
    if spec.fresh or not c.initialized:
        c.destroy()
        c.initdb(spec.settings, spec.preload, spec.hba, spec.tls)
        created = True
    else:
        changed = c.configure(spec.settings, spec.preload, spec.hba, spec.tls)
        if changed and c.is_running():
            c.restart()
    c.start()
    if spec.setup is not None:
        spec.setup(c, created)
    return c


def monitored_setup(
    *,
    dbname: str,
    monitor_user: str,
    monitor_password: str,
    extensions: Iterable[str] = ("pg_stat_statements",),
    db_owner: str | None = None,
) -> Callable[[Cluster, bool], None]:
    """A ClusterSpec.setup for a server to monitor: database ``dbname`` with ``extensions``, and a
    LOGIN role in pg_monitor with a password (stored as SCRAM where password_encryption says so),
    as docs/monitoring-role.md asks of a real server."""
    extensions = tuple(extensions)

    def setup(c: Cluster, created: bool) -> None:
        if db_owner and not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", params=[db_owner]):
            c.execute(f"CREATE ROLE {db_owner} LOGIN")
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", params=[dbname]):
            c.execute(f"CREATE DATABASE {dbname}" + (f" OWNER {db_owner}" if db_owner else ""))
        for ext in extensions:
            c.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}", dbname=dbname)
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", params=[monitor_user]):
            c.execute(f"CREATE ROLE {monitor_user} LOGIN IN ROLE pg_monitor")
        c.execute(f"ALTER ROLE {monitor_user} LOGIN PASSWORD '{monitor_password}'")

    return setup


def start_many(
    specs: Iterable[ClusterSpec | Mapping[str, Any]],
    *,
    max_workers: int | None = None,
    stop_on_error: bool = True,
) -> dict[str, Cluster]:
    """Start a set of clusters in parallel threads; returns name -> Cluster.

    If any fails, the others started by this call are stopped (unless
    ``stop_on_error=False``) and one ClusterError describing every failure is
    raised.
    """
    specs = [s if isinstance(s, ClusterSpec) else ClusterSpec(**s) for s in specs]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate cluster names in {names}")
    if not specs:
        return {}
    if _is_root():
        run_as()  # create the user once, before the threads
    started: dict[str, Cluster] = {}
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=max_workers or len(specs), thread_name_prefix="devenv-pg") as pool:
        futures = {s.name: pool.submit(start_one, s) for s in specs}
        for name, fut in futures.items():
            try:
                started[name] = fut.result()
            except Exception as exc:  # noqa: BLE001 - collected and re-raised
                errors.append(f"{name}: {exc}")
    if errors:
        if stop_on_error:
            stop_many(started.values())
        raise ClusterError("could not start clusters:\n" + "\n".join(errors))
    return started


def stop_many(clusters: Iterable[Cluster], mode: str = "fast") -> None:
    clusters = list(clusters)
    if not clusters:
        return

    def _stop(c: Cluster) -> None:
        try:
            c.stop(mode)
        except ClusterError:
            c.kill()

    with ThreadPoolExecutor(max_workers=len(clusters), thread_name_prefix="devenv-stop") as pool:
        list(pool.map(_stop, clusters))


def existing_clusters(base: Path | str = RUN_DIR) -> list[Cluster]:
    """Clusters found under ``base`` (by their PG_VERSION); binaries not installed."""
    found = []
    for pg_version in sorted(Path(base).glob("*/PG_VERSION")):
        datadir = pg_version.parent
        try:
            major = int(pg_version.read_text().strip())
        except ValueError:
            continue
        port = 0
        conf = datadir / "postgresql.conf"
        with contextlib.suppress(OSError):
            for line in conf.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "port":
                    with contextlib.suppress(ValueError):
                        port = int(value.split("#")[0].strip().strip("'"))
        bindir = find_binaries(major) or Path("/nonexistent")
        found.append(Cluster(name=datadir.name, major=major, port=port, datadir=datadir, bindir=bindir))
    return found
