"""A monitored server that restarts, fails over to its promoted replica, then is replaced by a cluster of another
lineage, while beat and a worker collect it through one address (a TCP proxy playing the virtual IP): the
lineage rules (collectors/statements/lineage.py) in the running system."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime

import pytest

from devenv.account import run_as
from devenv.cluster import cluster
from devenv.fleet import start_one
from tests.conftest import monitored_spec
from tests.processes import beat_argv, wait_for, worker_argv
from tests.production.fault_world import MONITORED_MAJOR, OTHER_PORT, REPLICA_PORT, chained
from tests.tcp_proxy import TcpProxy
from tests.world import run, server_entry

from .test_faults_worker import _dsn

pytestmark = pytest.mark.slow

QUERY = "SELECT count(*) FROM lineage_items"


def _replica_of(primary):
    """A streaming replica of `primary` (pg_basebackup -R), configured for its own port."""
    spec = monitored_spec(MONITORED_MAJOR, name="fault-replica", port=REPLICA_PORT)
    replica = cluster(spec.name, spec.major, spec.port)
    replica.destroy()
    replica.datadir.mkdir(mode=0o700)  # empty, the cluster account's: pg_basebackup fills it
    owner = run_as()
    os.chown(replica.datadir, owner.pw_uid, owner.pw_gid)
    replica._run(
        [
            str(replica.bindir / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(replica.datadir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ]
    )
    replica.configure(spec.settings, spec.preload, spec.hba, spec.tls)
    replica.start()
    return replica


def _after(h, sid: int, at: datetime):
    """The first snapshot taken after `at`, once there is one."""
    return next((s for s in h.snapshots(sid) if s.taken_at > at), None)


def test_restart_failover_and_another_lineage_while_collections_run(faults, tmp_path):
    w, h = faults.world, faults.world.history
    primary = w.primary
    run(primary, "DROP TABLE IF EXISTS lineage_items; CREATE TABLE lineage_items (id int)")
    replica = other = None
    try:
        with TcpProxy(primary.port) as address:
            sid = w.register("lineage", _dsn(address.port))
            faults.procs.start("worker", worker_argv(concurrency=2))
            faults.procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
            wait_for(lambda: len(h.snapshots(sid)) >= 2, 60, what="a baseline and a delta", logs=faults.logs)
            run(primary, QUERY, 3)

            # 1. Restarted: the same statistics (saved at shutdown), counted on exactly across the restart.
            primary.restart()
            restarted = datetime.now(UTC)
            run(primary, QUERY, 4)
            wait_for(
                lambda: _after(h, sid, restarted) is not None, 60, what="a snapshot after the restart", logs=faults.logs
            )
            assert _after(h, sid, restarted).kind == "delta"
            entry = server_entry(primary, "SELECT count(*) FROM lineage_items%")
            wait_for(lambda: h.booked(sid, entry["queryid"]) == 7, 30, what="the 7 calls booked", logs=faults.logs)
            assert entry["calls"] == 7

            # 2. Failed over: the replica promoted behind the same address. Its statistics are its own.
            replica = _replica_of(primary)
            primary.stop()
            replica._run([str(replica.bindir / "pg_ctl"), "promote", "-D", str(replica.datadir), "-w"])
            replica.execute("CHECKPOINT")  # the control file's timeline, as a failover's first checkpoint writes it
            address.retarget(replica.port)
            failed_over = datetime.now(UTC)
            wait_for(
                lambda: _after(h, sid, failed_over) is not None, 60, what="a snapshot of the replica", logs=faults.logs
            )
            first = _after(h, sid, failed_over)
            assert first.kind == "baseline" and first.block is None, first
            notes = h.server(sid)["status_notes"]
            assert "timeline 2 (was 1)" in notes and "failover" in notes and "new baseline" in notes, notes
            run(replica, QUERY, 5)
            wait_for(
                lambda: h.booked(sid, entry["queryid"]) == 12, 30, what="the replica's 5 calls booked", logs=faults.logs
            )
            assert server_entry(replica, "SELECT count(*) FROM lineage_items%")["calls"] == 5

            # 3. Another lineage: a cluster of its own (another system identifier) answers at the address.
            other = start_one(monitored_spec(MONITORED_MAJOR, name="fault-other", port=OTHER_PORT))
            run(other, "DROP TABLE IF EXISTS lineage_items; CREATE TABLE lineage_items (id int)")
            address.retarget(other.port)
            moved = datetime.now(UTC)
            wait_for(
                lambda: _after(h, sid, moved) is not None, 60, what="a snapshot of the other cluster", logs=faults.logs
            )
            assert _after(h, sid, moved).kind == "baseline"
            notes = h.server(sid)["status_notes"]
            assert "a different PostgreSQL cluster answers at this address" in notes, notes
            run(other, QUERY, 6)
            theirs = server_entry(other, "SELECT count(*) FROM lineage_items%")
            # A fresh cluster gives its first table the same OID, so the same queryid: booked on top, from zero.
            before = 12 if theirs["queryid"] == entry["queryid"] else 0
            wait_for(
                lambda: h.booked(sid, theirs["queryid"]) >= before + 6,
                30,
                what="the other cluster's calls",
                logs=faults.logs,
            )
            assert h.booked(sid, theirs["queryid"]) == before + theirs["calls"] == before + 6
            snaps = h.snapshots(sid)
            assert chained(snaps)
            assert [s.kind for s in snaps].count("baseline") == 3  # the first, the failover, the other lineage
    finally:
        for c in (replica, other):
            if c is not None:
                with contextlib.suppress(Exception):
                    c.destroy()
        primary.start()  # the other fault tests monitor it
