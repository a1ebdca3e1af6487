"""The fault tests' own world, on ports of their own (devenv.ports.TEST_FAULT_PORT_BASE, 55540-55549): a history
store, monitored PostgreSQL clusters and a Redis that they stop, kill, restart and fill without touching what
the other tests share; the console's worker and beat run against them as separate processes. What the history
stored is read back by SQL (the test process's own Django talks to the test database)."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import psycopg
import redis

from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, start_one
from devenv.history import HISTORY_MAJOR
from devenv.ports import TEST_FAULT_PORT_BASE
from history import codec
from history.columns import COUNTER_NAMES
from tests import slots
from tests.conftest import monitored_spec
from tests.processes import BIN, ROOT

HISTORY_PORT = slots.port(TEST_FAULT_PORT_BASE)
PRIMARY_PORT = HISTORY_PORT + 1
REPLICA_PORT = HISTORY_PORT + 2
OTHER_PORT = HISTORY_PORT + 3
REDIS_PORT = HISTORY_PORT + 4
DB = "pgconsole_faults"
ORG = "faults"
INTERVAL_S = 3  # shorter than the product allows (5): the faults happen within a few intervals
CALLS = COUNTER_NAMES.index("calls")
MONITORED_MAJOR = 15


@dataclass(frozen=True)
class Snap:
    taken_at: datetime
    prev_taken_at: datetime | None
    kind: str
    interval_s: float | None
    block: codec.Block | None


@dataclass
class History:
    """The fault tests' history store: a PostgreSQL 17 cluster with database pgconsole_faults, migrated by the
    product's own `manage.py migrate`."""

    cluster: Cluster

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.cluster.port}/{DB}"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.cluster.port}/{DB}"

    def sql(self, query: str, params: tuple | list = ()) -> list[tuple]:
        """One statement on a connection of its own (it survives the store's restarts)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def snapshots(self, server_id: int) -> list[Snap]:
        rows = self.sql(
            "SELECT taken_at, prev_taken_at, kind, interval_s, statements FROM collectors_snapshot "
            "WHERE server_id = %s ORDER BY taken_at",
            [server_id],
        )
        return [Snap(t, p, k, i, codec.decode(bytes(b)) if b is not None else None) for t, p, k, i, b in rows]

    def booked(self, server_id: int, queryid: int) -> int:
        """The calls of `queryid` over every stored interval of the server."""
        ids = [
            r[0]
            for r in self.sql(
                "SELECT id FROM collectors_statement WHERE server_id = %s AND queryid = %s", [server_id, queryid]
            )
        ]
        total = 0
        for snap in self.snapshots(server_id):
            if snap.block is not None:
                total += int(snap.block.counters[np.isin(snap.block.statement_id, ids), CALLS].sum())
        return total

    def server(self, server_id: int) -> dict:
        cols = ("consecutive_failures", "last_error_class", "last_error_message", "last_success_at", "status_notes")
        row = self.sql(f"SELECT {', '.join(cols)} FROM console_server WHERE id = %s", [server_id])[0]
        return dict(zip(cols, row, strict=True))

    def errors(self, server_id: int) -> list[tuple[datetime, str, str]]:
        return self.sql(
            "SELECT at, error_class, message FROM collectors_collectionerror WHERE server_id = %s ORDER BY at",
            [server_id],
        )


def chained(snaps: list[Snap]) -> bool:
    """Every delta continues the snapshot before it: no interval is booked twice, none skipped unseen."""
    return all(b.kind != "delta" or b.prev_taken_at == a.taken_at for a, b in zip(snaps, snaps[1:], strict=False))


def gaps_s(snaps: list[Snap]) -> list[float]:
    return [(b.taken_at - a.taken_at).total_seconds() for a, b in zip(snaps, snaps[1:], strict=False)]


def collect_tasks(worker_log: str) -> list[str]:
    """The ids of the collection tasks a worker received, in order (a redelivered one shows twice)."""
    return re.findall(r"Task collectors\.tasks\.collect_server\[([^\]]+)\] received", worker_log)


def claims(worker_log: str) -> int:
    """How many collections the dispatcher claimed (each dispatch task returns its count)."""
    found = re.findall(
        r"Task collectors\.tasks\.dispatch_due_collections\[[^\]]+\] succeeded in \S+: (\d+)", worker_log
    )
    return sum(map(int, found))


class RedisServer:
    """A redis-server of the fault tests (no persistence, as the compose file runs it)."""

    def __init__(self, port: int, folder: Path):
        self.port, self.folder = port, folder
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        argv = [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
        ]
        with open(self.folder / "redis.log", "a") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not self.answers():
            assert time.monotonic() < deadline and self.proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)

    def answers(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)

    def flush(self) -> None:
        redis.Redis.from_url(self.url).flushall()


@dataclass
class FaultWorld:
    history: History
    redis: RedisServer
    primary: Cluster  # monitored: Debian's PostgreSQL 15, whose client programs (pg_basebackup) are all there
    folder: Path

    def env(self, **extra: str) -> dict[str, str]:
        from django.conf import settings

        return {
            "DATABASE_URL": self.history.url,
            "REDIS_URL": self.redis.url,
            "CREDENTIALS_KEY": settings.CREDENTIALS_KEY,
            "DISPATCH_TICK_S": "0.5",
            "ADVISOR_INTERVAL_S": "3600",  # not what these tests are about
            "COLLECTOR_ACTIVITY_SAMPLES": "0",
            "EXPORT_ROOT": str(self.folder / "exports"),
            **extra,
        }

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**_os_env(), **self.env()},
            timeout=120,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def register(self, name: str, dsn: str, *, interval_s: int = INTERVAL_S, org: str = ORG) -> int:
        """A server added as a DBA adds one (`manage.py servers add`), then given the tests' short interval."""
        self.manage("servers", "add", name, "--dsn", dsn, "--org", org, "--interval", "60")
        self.history.sql("UPDATE console_server SET interval_s = %s WHERE name = %s", [interval_s, name])
        return self.history.sql("SELECT id FROM console_server WHERE name = %s", [name])[0][0]

    def register_many(self, dsns: dict[str, str], *, interval_s: int = INTERVAL_S, org: str = ORG) -> dict[str, int]:
        """Several servers added as `register` adds one, the commands after the first side by side (the first may
        create the organization): name -> id."""
        first, *rest = dsns
        ids = {first: self.register(first, dsns[first], interval_s=interval_s, org=org)}
        with ThreadPoolExecutor(max_workers=4) as pool:
            added = pool.map(lambda name: self.register(name, dsns[name], interval_s=interval_s, org=org), rest)
            ids.update(zip(rest, added, strict=True))
        return ids

    def disable_all(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self.history.sql("UPDATE console_server SET enabled = false")


def _os_env() -> dict[str, str]:
    import os

    return dict(os.environ)


def history_spec() -> ClusterSpec:
    def setup(c: Cluster, created: bool) -> None:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")

    return ClusterSpec(
        name="fault-history", major=HISTORY_MAJOR, port=HISTORY_PORT, fresh=True, setup=setup, base=slots.cluster_dir()
    )


def start_world(folder: Path) -> FaultWorld:
    history = History(start_one(history_spec()))
    primary = start_one(monitored_spec(MONITORED_MAJOR, name="fault-primary", port=PRIMARY_PORT))
    world = FaultWorld(history, RedisServer(REDIS_PORT, folder / "redis"), primary, folder)
    world.manage("migrate", "--noinput", "-v0")
    world.redis.start()
    return world


def stop_world(world: FaultWorld) -> None:
    world.redis.stop()
    for c in (world.primary, world.history.cluster):
        with contextlib.suppress(Exception):
            c.destroy()
