"""Faults of the services the console runs on, while beat and a worker collect: Redis restarted, the history
store restarted, and the history store out of disk space."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from devenv.account import run_as
from history import partitions
from history.tables import TABLES
from tests.processes import beat_argv, wait_for, wait_for_more, worker_argv
from tests.production.fault_world import INTERVAL_S, chained, claims, collect_tasks
from tests.world import run, server_entry

from .test_faults_worker import _dsn, _lock_waiter

pytestmark = pytest.mark.slow


def _start(faults, tmp_path, name: str, *, interval_s: int = INTERVAL_S) -> int:
    sid = faults.world.register(name, _dsn(faults.world.primary.port), interval_s=interval_s)
    faults.procs.start("worker", worker_argv(concurrency=2))
    faults.procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
    wait_for(lambda: len(faults.world.history.snapshots(sid)) >= 2, 60, what="a baseline and a delta", logs=faults.logs)
    return sid


def test_redis_restarted_while_beat_and_the_worker_run(faults, tmp_path):
    w, h = faults.world, faults.world.history
    # The product's shortest interval: the worker's reconnection waits 2 s, then 4, 6... up to 30 s (kombu's
    # backoff, not configurable in Celery), which a 5-s interval just covers for a restart of a few seconds.
    interval_s = 5
    sid = _start(faults, tmp_path, "redis-restart", interval_s=interval_s)
    w.redis.stop()
    stopped = datetime.now(UTC)
    time.sleep(3)  # the outage
    restarting = datetime.now(UTC)  # collections may resume before start() returns: the outage ends here
    w.redis.start()
    back = datetime.now(UTC)
    wait_for(
        lambda: h.snapshots(sid)[-1].taken_at > back, 60, what="a snapshot after Redis came back", logs=faults.logs
    )
    recovered_s = (h.snapshots(sid)[-1].taken_at - back).total_seconds()
    assert recovered_s <= 2 * interval_s, f"collections resumed {recovered_s:.1f} s after Redis was back"
    # Neither beat nor the worker had to be restarted, and they keep collecting at the interval.
    assert all(p.alive() for p in faults.procs.started)
    stored = lambda: len(h.snapshots(sid))  # noqa: E731
    wait_for_more(stored, 3, 6 * interval_s, what="snapshots at the interval", logs=faults.logs)
    end = datetime.now(UTC)
    snaps = h.snapshots(sid)
    # No interval collected twice: no task delivered twice (a message restored after the restart), every claim
    # of the dispatcher one task, and no more snapshots since Redis came back than intervals.
    log = faults.procs.started[0].text()
    tasks = collect_tasks(log)
    assert len(tasks) == len(set(tasks)) == claims(log)
    assert len([s for s in snaps if s.taken_at > back]) <= (end - back).total_seconds() / interval_s + 1
    # The outage is a gap, and every delta continues the one before.
    assert not [s for s in snaps if stopped < s.taken_at < restarting]
    assert chained(snaps)


def test_the_history_store_restarted_during_collections(faults, tmp_path):
    w, h = faults.world, faults.world.history
    c = w.primary
    run(c, "DROP TABLE IF EXISTS restart_items; CREATE TABLE restart_items (id int)")
    sid = _start(faults, tmp_path, "history-restart")
    run(c, "SELECT count(*) FROM restart_items", 3)
    # Stopped in the middle of a collection: one waits to write its state (the row is held) when it goes.
    holder = psycopg.connect(h.dsn)
    holder.execute("SELECT 1 FROM collectors_serverstate WHERE server_id = %s FOR UPDATE", [sid])
    wait_for(lambda: _lock_waiter(h, sid) is not None, 30, what="a collection writing", logs=faults.logs)
    # Gone at once (SIGQUIT to every backend): a fast shutdown ends the holder's session first, and the collection
    # it held back could still commit before its own ended (seen once in ten runs), leaving none in flight.
    h.cluster.stop(mode="immediate")
    stopped = datetime.now(UTC)
    with contextlib.suppress(psycopg.Error):
        holder.close()
    run(c, "SELECT count(*) FROM restart_items", 4)  # while nothing can be stored
    wait_for(
        lambda: "history store unavailable, retrying collection" in faults.procs.started[0].text(),
        30,
        what="a collection retrying",
        logs=faults.logs,
    )
    time.sleep(2 * INTERVAL_S)  # the outage: two intervals, which the snapshot after it spans
    restarting = datetime.now(UTC)  # a retry may store before start() returns: the outage ends here
    h.cluster.start()
    back = datetime.now(UTC)
    wait_for(
        lambda: h.snapshots(sid)[-1].taken_at > back,
        60,
        what="a snapshot after the history store came back",
        logs=faults.logs,
    )
    snaps = h.snapshots(sid)
    recovered_s = (snaps[-1].taken_at - back).total_seconds()
    assert recovered_s <= 2 * INTERVAL_S + 2, recovered_s  # the retry's backoff: 1, 2, 4 s...
    # The outage is a gap: no snapshot inside it, and the first one after spans it from the last one stored.
    assert not [s for s in snaps if stopped < s.taken_at < restarting]
    after = next(s for s in snaps if s.taken_at > restarting)
    assert after.kind == "delta" and after.prev_taken_at < stopped and after.interval_s > 2 * INTERVAL_S
    assert chained(snaps)
    entry = server_entry(c, "SELECT count(*) FROM restart_items%")
    assert h.booked(sid, entry["queryid"]) == entry["calls"] == 7  # nothing partial, nothing lost
    assert h.server(sid)["consecutive_failures"] == 0


SPACE_MB = 8


@contextlib.contextmanager
def _small_disk(h):
    """A tablespace on a tmpfs of SPACE_MB, holding the history's tables that every snapshot writes (today's
    raw snapshots and the statements' state): the history store's disk, as far as a snapshot can tell."""
    # Under /tmp, not pytest's folder: the cluster's account must reach it.
    folder = Path(tempfile.mkdtemp(prefix="pgconsole-small-disk-"))
    owner = run_as()
    options = f"size={SPACE_MB}m,mode=0700,uid={owner.pw_uid},gid={owner.pw_gid}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        folder.rmdir()
        pytest.skip(f"a small disk needs mount (root): {done.stderr.strip()}")
    today = partitions.partition_name(TABLES.SNAPSHOT.name, datetime.now(UTC))
    moved = [today, TABLES.STATEMENT_STATE.name]
    try:
        h.sql(f"CREATE TABLESPACE small LOCATION '{folder}'")
        for table in moved:
            h.sql(f"ALTER TABLE {table} SET TABLESPACE small")
        yield folder
    finally:
        for table in moved:
            with contextlib.suppress(Exception):
                h.sql(f"ALTER TABLE {table} SET TABLESPACE pg_default")
        with contextlib.suppress(Exception):
            h.sql("DROP TABLESPACE small")
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        folder.rmdir()


def _fill(folder) -> None:
    with open(folder / "filler", "wb") as f:
        chunk = b"\0" * (1 << 20)
        with contextlib.suppress(OSError):
            while True:
                f.write(chunk)
                f.flush()


def test_the_history_store_out_of_disk_space(faults, tmp_path):
    w, h = faults.world, faults.world.history
    c = w.primary
    run(c, "DROP TABLE IF EXISTS full_items; CREATE TABLE full_items (id int)")
    sid = _start(faults, tmp_path, "history-full")  # today's partition exists from here on
    with _small_disk(h) as folder:
        run(c, "SELECT count(*) FROM full_items", 2)
        stored = len(h.snapshots(sid))
        _fill(folder)
        # New statements (distinct shapes, so distinct entries): their state rows need new pages, which there is
        # no space for. Far more rows than a page holds: a worker's kept session goes on filling the page it
        # last wrote to, so a few rows could still fit where the disk is already full.
        for i in range(1, 301):
            run(c, "SELECT " + ", ".join(["id"] * i) + " FROM full_items")
        run(c, "SELECT count(*) FROM full_items", 3)
        wait_for(
            lambda: h.server(sid)["last_error_class"] == "history_full",
            60,
            what="a collection failing for lack of space",
            logs=faults.logs,
        )
        status = h.server(sid)
        assert "out of disk space" in status["last_error_message"]
        assert "resume by themselves once space is freed" in status["last_error_message"]
        assert "No space left on device" in status["last_error_message"]
        failed_at = datetime.now(UTC)
        failures = lambda: h.server(sid)["consecutive_failures"]  # noqa: E731
        wait_for_more(failures, 2, 6 * INTERVAL_S, what="collections failing for lack of space", logs=faults.logs)
        # Nothing half-written while full: no snapshot since the failures began, the worker still up.
        full = [s for s in h.snapshots(sid) if s.taken_at > failed_at]
        assert not full and faults.procs.started[0].alive()
        assert h.server(sid)["consecutive_failures"] >= 2
        (folder / "filler").unlink()
        freed = datetime.now(UTC)
        wait_for(
            lambda: h.snapshots(sid)[-1].taken_at > freed, 60, what="a snapshot once space was freed", logs=faults.logs
        )
        snaps = h.snapshots(sid)
        recovered_s = (snaps[-1].taken_at - freed).total_seconds()
        assert recovered_s <= 2 * INTERVAL_S, recovered_s
        assert len(snaps) > stored and chained(snaps)
        entry = server_entry(c, "SELECT count(*) FROM full_items%")
        assert h.booked(sid, entry["queryid"]) == entry["calls"] == 5
        assert h.server(sid)["last_error_class"] == ""
