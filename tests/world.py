"""The shared test world: register a monitored cluster, run known workloads, read back what was stored."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import psycopg
from django.db import connection

from collectors.services import CollectionResult, server_collect
from devenv.cluster import Cluster
from devenv.cluster import cluster as cluster_at
from history import codec
from history.columns import COUNTER_NAMES
from history.models import Statement
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import server_create

APP_DB = "app"
MONITOR_USER = "monitor"
MONITOR_PASSWORD = "monitor-pw"
_names = itertools.count(1)


def register(
    cluster: Cluster,
    *,
    name: str | None = None,
    dbname: str = APP_DB,
    user: str = MONITOR_USER,
    password: str | None = MONITOR_PASSWORD,
    org: str = "acme",
) -> Server:
    dsn = cluster.dsn(dbname, user, password)
    return server_create(
        name=name or f"{cluster.name}-{next(_names)}", connection=parse_dsn(dsn), organization_name=org
    )


def collect(server: Server) -> CollectionResult:
    result = server_collect(server_id=server.pk)
    assert result.ok, result.summary()
    return result


def run(cluster: Cluster, statement: str, times: int = 1, params: tuple = (), dbname: str = APP_DB) -> None:
    """Execute `statement` exactly `times` times as the superuser, each as its own transaction."""
    with psycopg.connect(cluster.dsn(dbname), autocommit=True, prepare_threshold=None) as conn:
        for _ in range(times):
            conn.execute(statement, params or None)


def settled(cluster: Cluster, sql: str, expected, dbname: str = APP_DB, *, within_s: float = 5.0) -> None:
    """Until `sql`'s one value is `expected`: the server's statistics show what a workload did (on 13 and 14 a
    backend's counts reach the statistics collector a moment after it ends; from 15 as it ends)."""
    deadline = time.monotonic() + within_s
    while True:
        if cluster.execute(sql, dbname=dbname)[0][0] == expected:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{sql} never gave {expected!r} within {within_s:g} s")
        time.sleep(0.05)


@contextmanager
def held_exclusive(cluster: Cluster, table: str, dbname: str = APP_DB) -> Iterator[None]:
    """`table` held under ACCESS EXCLUSIVE by another session for the block's length (a migration's lock, say)."""
    locked, release = threading.Event(), threading.Event()

    def hold():
        with psycopg.connect(cluster.dsn(dbname)) as holder:
            holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10), f"{table} could not be locked"
        yield
    finally:
        release.set()
        holder.join()


def server_entry(cluster: Cluster, text_like: str, dbname: str = APP_DB) -> dict:
    """The one pg_stat_statements entry whose text matches, read directly (ground truth)."""
    with psycopg.connect(cluster.dsn(dbname), autocommit=True) as conn:
        cur = conn.execute(
            "SELECT * FROM pg_stat_statements WHERE query LIKE %s AND query NOT LIKE '%%pg_stat_statements%%'",
            (text_like,),
        )
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    assert len(rows) == 1, f"expected one entry like {text_like!r}, got {len(rows)}"
    return rows[0]


@dataclass
class StoredSnapshot:
    kind: str
    interval_s: float | None
    dealloc: int | None
    dealloc_delta: int | None
    full_reset: bool
    track_planning: bool | None
    block: codec.Block | None

    def deltas_of(self, queryid: int) -> dict[str, int] | None:
        """Summed counters of the statement(s) with that queryid in this interval, or None."""
        if self.block is None:
            return None
        with connection.cursor() as cur:
            cur.execute("SELECT id FROM collectors_statement WHERE queryid = %s", [queryid])
            ids = [r[0] for r in cur.fetchall()]
        mask = np.isin(self.block.statement_id, ids)
        if not mask.any():
            return None
        summed = self.block.counters[mask].sum(axis=0)
        return dict(zip(COUNTER_NAMES, (int(v) for v in summed), strict=True))


def snapshots(server: Server) -> list[StoredSnapshot]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT kind, interval_s, dealloc, dealloc_delta, full_reset, track_planning, statements "
            "FROM collectors_snapshot WHERE server_id = %s ORDER BY taken_at",
            [server.pk],
        )
        return [
            StoredSnapshot(k, i, d, dd, fr, tp, codec.decode(bytes(p)) if p is not None else None)
            for k, i, d, dd, fr, tp, p in cur.fetchall()
        ]


def history_counts(server: Server) -> dict[str, int]:
    """Rows this server owns in every history table (to prove nothing partial was stored)."""
    out = {}
    with connection.cursor() as cur:
        for table in (
            "collectors_snapshot",
            "collectors_wait_event",
            "collectors_statement",
            "collectors_statement_state",
            "collectors_serverstate",
        ):
            cur.execute(f"SELECT count(*) FROM {table} WHERE server_id = %s", [server.pk])
            out[table] = cur.fetchone()[0]
    return out


def calls_per_snapshot(server: Server, queryid: int) -> list[int | None]:
    """The calls stored for that queryid in each snapshot, oldest first (None: nothing stored)."""
    return [None if (d := s.deltas_of(queryid)) is None else d["calls"] for s in snapshots(server)]


def stored_statement(server: Server, queryid: int) -> Statement:
    return server.statements.get(queryid=queryid)


def copy_stopped(source: Cluster, *, name: str, port: int) -> Cluster:
    """A file-level copy of a stopped cluster (same system identifier, same statistics file) under
    another name and port; configure and start it yourself."""
    assert not source.is_running(), f"{source.name} must be stopped to be copied"
    target = cluster_at(name, source.major, port, base=source.datadir.parent)
    target.destroy()
    shutil.copytree(source.datadir, target.datadir, symlinks=True)
    owner = os.stat(source.datadir)
    for root, dirs, files in os.walk(target.datadir):
        for entry in (root, *(os.path.join(root, n) for n in dirs + files)):
            os.chown(entry, owner.st_uid, owner.st_gid, follow_symlinks=False)
    (target.datadir / "postmaster.pid").unlink(missing_ok=True)
    return target


def name_switched_after_first_lookup(monkeypatch, server: Server, address: str = "169.254.169.254") -> list[str]:
    """The server's host name answers its true address at the first lookup, then `address` (a DNS record switched
    under the console's feet); the lookups of that name, as they happen."""
    import ipaddress

    from inventory import network_policy

    looked_up: list[str] = []
    resolve = network_policy.resolve

    def switched(host, port):
        if (host, port) != (server.host, server.port):
            return resolve(host, port)
        looked_up.append(host)
        return resolve(host, port) if len(looked_up) == 1 else [ipaddress.ip_address(address)]

    monkeypatch.setattr(network_policy, "resolve", switched)
    return looked_up
