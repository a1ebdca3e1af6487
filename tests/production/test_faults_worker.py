"""Faults of the collecting processes, on real processes: a worker killed with SIGKILL in the middle of a
snapshot (while it reads the monitored server, and while its transaction in the history store is open), and
two beats running at once."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.conftest import APP_DB, MONITOR_PASSWORD, MONITOR_USER
from tests.processes import beat_argv, wait_for, worker_argv
from tests.production.fault_world import INTERVAL_S, chained, claims, collect_tasks, gaps_s
from tests.tcp_proxy import TcpProxy
from tests.world import run, server_entry

pytestmark = pytest.mark.slow


def _dsn(port: int) -> str:
    return f"postgresql://{MONITOR_USER}:{MONITOR_PASSWORD}@127.0.0.1:{port}/{APP_DB}"


def _lock_waiter(history, server_id: int) -> int | None:
    """The history store's backend of a collection waiting for the server's state row, if there is one."""
    rows = history.sql(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE %s",
        ["%collectors_serverstate%"],
    )
    return rows[0][0] if rows else None


def test_a_worker_killed_in_the_middle_of_a_snapshot_loses_nothing_and_counts_nothing_twice(faults, tmp_path):
    w, h = faults.world, faults.world.history
    c = w.primary
    query = "SELECT count(*) FROM killed_items"
    run(c, "DROP TABLE IF EXISTS killed_items; CREATE TABLE killed_items (id int)")
    with TcpProxy(c.port) as proxy:
        sid = w.register("killed-worker", _dsn(proxy.port) + "?sslmode=disable")  # the proxy reads the protocol
        worker = faults.procs.start("worker", worker_argv(concurrency=2))
        faults.procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: len(h.snapshots(sid)) >= 2, 60, what="a baseline and a delta", logs=faults.logs)
        run(c, query, 5)

        # 1. Killed while it reads: the monitored server stops answering at the counters' query.
        proxy.go_silent_on(b"pg_stat_statements(false)")
        wait_for(proxy.silenced.is_set, 30, what="a snapshot reading the counters", logs=faults.logs)
        stored = h.snapshots(sid)
        worker.kill()
        proxy.forward_again()
        # Its history session ends with it, and the server's collection lock with it.
        wait_for(
            lambda: not h.sql("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = %s", [sid]),
            30,
            what="the killed worker's lock released",
        )
        run(c, query, 6)

        # 2. Killed while it writes: the server's state row is held, so the snapshot's transaction waits with
        # its snapshot row inserted (not committed) until the worker is dead.
        with psycopg.connect(h.dsn) as holder:
            holder.execute("SELECT 1 FROM collectors_serverstate WHERE server_id = %s FOR UPDATE", [sid])
            writer = faults.procs.start("worker", worker_argv(name="writer", concurrency=2))
            wait_for(
                lambda: _lock_waiter(h, sid) is not None,
                60,
                what="a snapshot waiting to write its state",
                logs=faults.logs,
            )
            backend = _lock_waiter(h, sid)
            writer.kill()
            holder.rollback()
        wait_for(
            lambda: not h.sql("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend]),
            30,
            what="the killed writer's session ended",
        )
        assert [s.taken_at for s in h.snapshots(sid)] == [s.taken_at for s in stored], "a killed snapshot stored"

        # 3. A new worker: the next snapshot spans both killed intervals, from the last stored state.
        started = time.monotonic()
        faults.procs.start("worker", worker_argv(name="after", concurrency=2))
        wait_for(lambda: len(h.snapshots(sid)) > len(stored), 60, what="a snapshot after the kills", logs=faults.logs)
        recovered_s = time.monotonic() - started
    snaps = h.snapshots(sid)
    first_after = snaps[len(stored)]
    assert first_after.kind == "delta" and first_after.prev_taken_at == stored[-1].taken_at
    assert chained(snaps)
    # Exact: what pg_stat_statements counted, booked once.
    entry = server_entry(c, "SELECT count(*) FROM killed_items%")
    assert h.booked(sid, entry["queryid"]) == entry["calls"] == 11
    assert recovered_s < 2 * INTERVAL_S + 5, recovered_s


def test_two_beats_at_once_collect_each_server_once_per_interval(faults, tmp_path):
    w, h = faults.world, faults.world.history
    servers = list(w.register_many({f"two-beats-{i}": _dsn(w.primary.port) for i in range(2)}).values())
    faults.procs.start("worker", worker_argv(concurrency=4))
    beats = [faults.procs.start(f"beat-{i}", beat_argv(tmp_path / f"beat-{i}")) for i in range(2)]
    wait_for(
        lambda: all(len(h.snapshots(s)) >= 2 for s in servers), 60, what="both servers collected", logs=faults.logs
    )
    since = h.snapshots(servers[0])[-1].taken_at
    # Ten intervals of both beats, as many snapshots after `since` as the first server should get in them.
    wait_for(
        lambda: len([s for s in h.snapshots(servers[0]) if s.taken_at > since]) >= 10,
        30 * INTERVAL_S,
        what="ten intervals collected",
        logs=faults.logs,
    )
    window_s = (h.snapshots(servers[0])[-1].taken_at - since).total_seconds()
    for beat in beats:  # both really ticked all along
        assert beat.alive() and beat.text().count("Sending due task dispatch-collections") >= window_s / 0.5 / 2
    # Twice the dispatches, each server claimed once per interval: every claim one task, none delivered twice.
    log = faults.procs.started[0].text()
    tasks = collect_tasks(log)
    assert len(tasks) == len(set(tasks)) == claims(log)
    for sid in servers:
        snaps = [s for s in h.snapshots(sid) if s.taken_at >= since]
        gaps = gaps_s(snaps)
        # No more snapshots than intervals, and none missed.
        assert len(snaps) <= window_s / INTERVAL_S + 2, gaps
        assert max(gaps) < 2 * INTERVAL_S, gaps
        assert chained(h.snapshots(sid))
