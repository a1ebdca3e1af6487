"""Audit export builds that die or hang, on real workers: one killed half-way is built again whole, one that
outlives the resend delay (its worker frozen) is built again by another worker while it still runs, and one
that runs away on compose's tasks worker is stopped by its time limit with the reason on its row. Never two
writers of one file, never a corrupt zip or one that does not match its row."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.processes import beat_argv, processes, wait_for, worker_argv
from tests.production.fault_world import FaultWorld
from tests.production.test_production_mode import compose, local

from .test_faults_worker import _dsn

pytestmark = pytest.mark.slow

STALE = "now() - interval '31 minutes'"  # exports.services.STALE_RUNNING_AFTER is 30 minutes


def _send(world: FaultWorld, task: str, *args) -> None:
    """A task message to the fault world's broker, as the console's web process sends one."""
    from console.celery import app

    with app.connection_for_write(world.redis.url) as conn:
        app.send_task(task, args=args, connection=conn)


def _export(world: FaultWorld, sid: int, start: datetime) -> int:
    """A queued export of the server's history since `start` (the row the console's request writes)."""
    org = world.history.sql("SELECT organization_id FROM console_server WHERE id = %s", [sid])[0][0]
    return world.history.sql(
        "INSERT INTO reports_auditexport (organization_id, server_ids, window_start, window_end, formats, status, "
        "progress, step, error, created_at, file_name, sha256, claim) VALUES (%s, %s, %s, now(), %s, 'queued', 0, "
        "'queued', '', now(), '', '', '') RETURNING id",
        [org, f"[{sid}]", start, '["pdf", "json"]'],
    )[0][0]


def _row(world: FaultWorld, export_id: int) -> dict:
    cols = ("status", "progress", "claim", "file_name", "sha256", "size_bytes", "error")
    row = world.history.sql(f"SELECT {', '.join(cols)} FROM reports_auditexport WHERE id = %s", [export_id])[0]
    return dict(zip(cols, row, strict=True))


def _half_way(world: FaultWorld, export_id: int) -> bool:
    row = _row(world, export_id)
    return row["status"] == "running" and 1 < row["progress"] < 95


def _build_half_way(faults, export_id: int, name: str):
    """A worker of its own building the export, caught half-way through (its PDF takes a second or two)."""
    worker = faults.procs.start(name, worker_argv(name=name, concurrency=1))
    _send(faults.world, "exports.audit_export_build", export_id)
    wait_for(lambda: _half_way(faults.world, export_id), 60, what="the build half-way", logs=faults.logs, every_s=0.02)
    return worker


def _check_bundle(world: FaultWorld, export_id: int) -> tuple[dict, Path]:
    """The built export: its file matches its row, the zip is whole and every member matches SHA256SUMS; the
    export's folder holds its own build's folder and nothing else."""
    row = _row(world, export_id)
    assert (row["status"], row["progress"], row["error"]) == ("done", 100, ""), row
    root = world.folder / "exports"
    path = root / row["file_name"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == row["sha256"] and len(data) == row["size_bytes"]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
        members = {name: z.read(name) for name in z.namelist()}
    sums = dict(line.split("  ")[::-1] for line in members.pop("SHA256SUMS").decode().splitlines())
    assert sums == {name: hashlib.sha256(body).hexdigest() for name, body in members.items()}
    assert {"audit.pdf", "audit.json"} <= set(members)
    assert path.parent.name == row["claim"]
    assert [p.name for p in path.parent.parent.iterdir()] == [row["claim"]]
    return row, path


@pytest.fixture(scope="module")
def history(fault_world, tmp_path_factory) -> tuple[int, datetime]:
    """A server with some history to export, collected by beat and a worker once for the module's tests (each
    exports it anew): (its id, when the history began)."""
    w = fault_world
    start = datetime.now(UTC) - timedelta(minutes=1)
    w.redis.flush()
    sid = w.register("exported", _dsn(w.primary.port))
    folder = tmp_path_factory.mktemp("export-history")
    with processes(folder, w.env()) as procs:
        procs.start("collector", worker_argv(name="collector", concurrency=2))
        procs.start("beat", beat_argv(folder / "beat-schedule"))
        wait_for(lambda: len(w.history.snapshots(sid)) >= 3, 60, what="some history to export", logs=procs.logs)
    # Stopped: the builds below must run on the workers the tests start for them (one queue serves all tasks).
    w.history.sql("UPDATE console_server SET enabled = false WHERE id = %s", [sid])
    return sid, start


def test_an_export_build_killed_half_way_is_built_again_whole(faults, history):
    w = faults.world
    sid, start = history
    export_id = _export(w, sid, start)
    builder = _build_half_way(faults, export_id, "builder")
    builder.kill()
    killed = _row(w, export_id)
    assert killed["status"] == "running" and killed["file_name"] == ""
    # Half an hour later, beat's tidy finds it abandoned and sends it to a worker again.
    w.history.sql(f"UPDATE reports_auditexport SET started_at = {STALE} WHERE id = %s", [export_id])
    faults.procs.start("builder", worker_argv(name="again", concurrency=1))
    _send(w, "exports.tidy_audit_exports")
    wait_for(lambda: _row(w, export_id)["status"] == "done", 120, what="the export built again", logs=faults.logs)
    row, _ = _check_bundle(w, export_id)
    assert row["claim"] != killed["claim"]
    assert f"audit export {export_id} not built yet: sent to a worker again" in "".join(
        p.text() for p in faults.procs.started
    )


def test_a_build_that_outlives_the_resend_delay_never_writes_what_its_successor_wrote(faults, history):
    w = faults.world
    sid, start = history
    export_id = _export(w, sid, start)
    hung = _build_half_way(faults, export_id, "hung")
    os.kill(hung.pid, signal.SIGSTOP)  # a worker that hangs, as a thread pool ignores time limits
    try:
        first = _row(w, export_id)
        w.history.sql(f"UPDATE reports_auditexport SET started_at = {STALE} WHERE id = %s", [export_id])
        faults.procs.start("successor", worker_argv(name="successor", concurrency=1))
        _send(w, "exports.tidy_audit_exports")
        wait_for(lambda: _row(w, export_id)["status"] == "done", 120, what="the successor's build", logs=faults.logs)
        built, path = _check_bundle(w, export_id)
        data = path.read_bytes()
    finally:
        os.kill(hung.pid, signal.SIGCONT)
    # The first build goes on, finds its claim taken, writes nothing to the row and deletes its own folder.
    wait_for(
        lambda: "was claimed again by another one; its file is discarded" in hung.text(),
        120,
        what="the hung build finishing",
        logs=faults.logs,
    )
    assert first["claim"] != built["claim"]
    row, after = _check_bundle(w, export_id)
    assert row == built and after.read_bytes() == data
    generated = w.history.sql(
        "SELECT count(*) FROM reports_auditlogentry WHERE export_id = %s AND action = 'export_generated'", [export_id]
    )[0][0]
    assert generated == 1


def test_a_runaway_build_is_stopped_by_its_time_limit_on_the_tasks_worker(faults, history, tmp_path):
    """The history store holds the build's first read (a lock the test keeps): the build would wait for ever.
    Compose's tasks worker (processes: time limits hold) stops it at EXPORT_TIME_LIMIT_S, fails the export with
    the reason, cancels its query, and builds the next export."""
    w = faults.world
    sid, start = history
    runaway, next_one = _export(w, sid, start), _export(w, sid, start)
    tasks = local(compose()["tasks"]["command"], port=0, folder=tmp_path)
    assert "prefork" in tasks
    with psycopg.connect(w.history.dsn) as holder:
        holder.execute("LOCK TABLE collectors_snapshot IN ACCESS EXCLUSIVE MODE")  # held until the block ends
        faults.procs.start("tasks", tasks, EXPORT_TIME_LIMIT_S="4")
        _send(w, "exports.audit_export_build", runaway)
        wait_for(lambda: _row(w, runaway)["status"] == "running", 60, what="the build claimed", logs=faults.logs)
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        wait_for(lambda: w.history.sql(waiting)[0][0] >= 1, 30, what="the build waiting on the lock", logs=faults.logs)
        took = wait_for(
            lambda: _row(w, runaway)["status"] == "failed", 30, what="the runaway build stopped", logs=faults.logs
        )
        row = _row(w, runaway)
        # Its query was cancelled, not left waiting behind the lock.
        wait_for(lambda: w.history.sql(waiting)[0][0] == 0, 10, what="the build's query cancelled", logs=faults.logs)
    assert took < 20, took
    assert row["error"] == (
        "The build ran past its time limit (EXPORT_TIME_LIMIT_S = 4 s) and was stopped: export a shorter window or "
        "fewer servers, or raise the limit."
    ), (row, faults.logs())
    assert row["file_name"] == "" and not list((w.folder / "exports").glob(f"*/{runaway}/*/*"))
    logged = w.history.sql(
        "SELECT detail FROM reports_auditlogentry WHERE export_id = %s AND action = 'export_failed'", [runaway]
    )
    assert logged == [(row["error"],)]
    # The same worker goes on: the next export is built whole.
    _send(w, "exports.audit_export_build", next_one)
    wait_for(lambda: _row(w, next_one)["status"] == "done", 120, what="the next export built", logs=faults.logs)
    _check_bundle(w, next_one)
