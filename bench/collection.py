"""Benchmark 1: collection time per snapshot on a real monitored PostgreSQL, steady state.

For each level N (100, 1,000, 5,000 entries): pg_stat_statements_reset(), run the level's N
distinct statements once, register a new server and take its baseline (texts fetched then),
a few warm-up snapshots, then S timed snapshots. Before each timed snapshot ~10% of the N
statements run again, so every snapshot has changes to store. At the largest level a few more
snapshots follow with all N statements run before each (every entry changed: the worst case for
reading only the entries that changed). Each timed snapshot is paired with
the baseline measured right next to it (order alternating): a bare
``SELECT * FROM pg_stat_statements(false)`` fetched fully with psycopg (fetchall) on a kept
connection of the same monitoring role. Timed: ``collectors.services.server_collect`` end to end
(history lock and status, read, deltas, encoding, the write transaction), with
COLLECTOR_ACTIVITY_SAMPLES=0. At 5,000 entries, every 10th snapshot also starts history
maintenance in a background thread of the same process (own history connection): the hourly
rollup of the current hour for this server, roll_up(), partition checks from a cold cache
(ensure_ahead) and the creation and drop (drop_expired) of one expired daily partition of each
raw table, so DDL locks on the partitioned parents really happen while snapshots are written.
"""

from __future__ import annotations

import queue
import threading
import time
from datetime import timedelta

import psycopg
from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench import env, phases, workload
from bench.stats import median, pct, summary
from collectors.services import server_collect
from history import partitions, rollups
from inventory.connection import parse_dsn
from inventory.services import server_create


class Maintenance:
    """A background thread running history maintenance on request, recording when it ran."""

    def __init__(self, server_id: int):
        self.server_id = server_id
        self.q: queue.Queue = queue.Queue()
        self.runs: list[dict] = []
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._loop, name="bench-maintenance", daemon=True)
        self.thread.start()

    def request(self) -> None:
        self.q.put(True)

    def _loop(self) -> None:
        try:
            while True:
                item = self.q.get()
                try:
                    if item is None:
                        return
                    self._run_once()
                finally:
                    self.q.task_done()
        finally:
            connection.close()

    def _run_once(self) -> None:
        t0 = time.perf_counter()
        steps = {}
        try:
            now = timezone.now()
            hour = now.replace(minute=0, second=0, microsecond=0)
            s = time.perf_counter()
            rollups.rebuild_hours(self.server_id, hour, hour + timedelta(hours=1))
            steps["rebuild_hours (this hour)"] = (time.perf_counter() - s) * 1000
            s = time.perf_counter()
            rollups.roll_up(now)
            steps["roll_up"] = (time.perf_counter() - s) * 1000
            s = time.perf_counter()
            partitions.forget_cache()  # a fresh worker process: every partition is checked again
            partitions.ensure_ahead(now)
            steps["ensure_ahead (cold cache)"] = (time.perf_counter() - s) * 1000
            s = time.perf_counter()
            old = now - timedelta(days=settings.HISTORY["RAW_RETENTION_DAYS"] + 30)
            partitions.ensure("collectors_snapshot", old)
            partitions.ensure("collectors_wait_event", old)
            dropped = partitions.drop_expired(now)
            steps["create + drop_expired"] = (time.perf_counter() - s) * 1000
            steps["dropped"] = len(dropped)
        except Exception as exc:  # noqa: BLE001 - reported, must not kill the thread
            self.errors.append(f"{type(exc).__name__}: {exc}")
        self.runs.append({"start": t0, "end": time.perf_counter(), "steps": steps})

    def stop(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=120)


def _bare(conn: psycopg.Connection) -> tuple[float, int]:
    t0 = time.perf_counter()
    rows = conn.execute("SELECT * FROM pg_stat_statements(false)").fetchall()
    return (time.perf_counter() - t0) * 1000, len(rows)


def _paired(server_id: int, bare_conn: psycopg.Connection, bare_first: bool) -> tuple[float, float, object, float, int]:
    """One timed snapshot and the bare SELECT right next to it (the order alternates between calls,
    so neither always runs on a warmer server). Returns (snapshot start, ms, result, bare ms, bare rows)."""
    if bare_first:
        bare_ms, bare_rows = _bare(bare_conn)
    start = time.perf_counter()
    ms, result = _collect(server_id)
    if not bare_first:
        bare_ms, bare_rows = _bare(bare_conn)
    return start, ms, result, bare_ms, bare_rows


def _collect(server_id: int) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = server_collect(server_id=server_id)
    ms = (time.perf_counter() - t0) * 1000
    if not result.ok:
        raise RuntimeError(f"collection failed: {result.summary()}")
    return ms, result


def run(
    cluster,
    *,
    levels=(100, 1000, 5000),
    snapshots=None,
    warmup: int = 3,
    sampled: int = 5,
    maintenance_every: int = 10,
    breakdown: int = 20,
    all_changed: int = 10,
    log=print,
) -> dict:
    snapshots = snapshots or {100: 30, 1000: 30, 5000: 100}
    app_dsn = cluster.dsn(env.APP_DB)
    monitor_dsn = cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD)
    t0 = time.perf_counter()
    workload.create_tables(app_dsn, max(levels))
    log(f"  {max(levels) // len(workload.SHAPES)} tables created in {time.perf_counter() - t0:.1f}s")
    driver = workload.Driver(app_dsn)
    bare_conn = psycopg.connect(monitor_dsn, autocommit=True, prepare_threshold=None)
    out = {"levels": {}}
    try:
        for n in levels:
            out["levels"][n] = _level(
                cluster,
                driver,
                bare_conn,
                monitor_dsn,
                n,
                snapshots.get(n, 30),
                warmup,
                maintenance_every if n == max(levels) else 0,
                log,
            )
        top = max(levels)
        server_id = out["levels"][top]["server_id"]
        stmts = workload.statements(top)

        # Where the time goes (wrapped functions; a separate pass, not part of the figures above),
        # at the largest level, then at the smallest (after a reset: only its statements again).
        if breakdown:
            out["breakdown"] = _breakdown(driver, server_id, stmts, breakdown)

        # The worst case for reading only what changed: every entry changed since the last snapshot.
        if all_changed:
            times, bares, changed = [], [], []
            for i in range(all_changed):
                driver.run(stmts)
                _, ms, result, bare_ms, _ = _paired(server_id, bare_conn, bare_first=i % 2 == 0)
                bares.append(bare_ms)
                times.append(ms)
                changed.append(result.changed)
            out["all_changed"] = {
                "collect_ms": summary(times),
                "bare_ms": summary(bares),
                "changed": int(median(changed)),
            }
            log(
                f"  {top} entries, every one changed: median {median(times):.1f} ms "
                f"(bare SELECT {median(bares):.1f} ms) over {all_changed} snapshots"
            )

        # What the default pg_stat_activity sampling (10 samples over ~1 s) costs in wall time.
        if sampled:
            saved = settings.COLLECTOR["ACTIVITY_SAMPLES"]
            settings.COLLECTOR["ACTIVITY_SAMPLES"] = 10
            try:
                times, bares = [], []
                for _ in range(sampled):
                    driver.run_fraction(stmts, 0.10)
                    bares.append(_bare(bare_conn)[0])
                    times.append(_collect(server_id)[0])
            finally:
                settings.COLLECTOR["ACTIVITY_SAMPLES"] = saved
            out["sampled"] = {
                "samples": 10,
                "span_s": settings.COLLECTOR["ACTIVITY_SPAN_S"],
                "collect_ms": summary(times),
                "bare_ms": summary(bares),
            }
            log(
                f"  {top} entries with 10 pg_stat_activity samples: median {median(times):.0f} ms "
                f"over {sampled} snapshots"
            )
        if breakdown and min(levels) != top:
            low = min(levels)
            cluster.execute("SELECT pg_stat_statements_reset()", dbname=env.APP_DB)
            low_stmts = workload.statements(low)
            driver.run(low_stmts)
            low_id = out["levels"][low]["server_id"]
            for _ in range(3):  # new keys after the reset: texts known from the dimension
                driver.run_fraction(low_stmts, 0.10)
                _collect(low_id)
            out["breakdown_small"] = {"level": low, **_breakdown(driver, low_id, low_stmts, breakdown)}
    finally:
        driver.close()
        bare_conn.close()
    return out


def _breakdown(driver, server_id: int, stmts: list[str], n: int) -> dict:
    """Mean time per step over n snapshots, with server_collect's callees wrapped."""
    totals = []
    with phases.timed_phases() as acc:
        for _ in range(n):
            driver.run_fraction(stmts, 0.10)
            totals.append(_collect(server_id)[0])
    return {"snapshots": n, "rows": phases.per_snapshot(acc, totals)}


def _level(cluster, driver, bare_conn, monitor_dsn, n, n_snapshots, warmup, maintenance_every, log) -> dict:
    cluster.execute("SELECT pg_stat_statements_reset()", dbname=env.APP_DB)
    stmts = workload.statements(n)
    driver.run(stmts)
    server = server_create(name=f"bench-{n}", connection=parse_dsn(monitor_dsn), organization_name="bench")
    base_ms, base = _collect(server.pk)
    assert base.kind == "baseline", base.summary()
    for _ in range(warmup):
        driver.run_fraction(stmts, 0.10)
        _bare(bare_conn)
        _collect(server.pk)

    maint = Maintenance(server.pk) if maintenance_every else None
    rows = []
    try:
        for i in range(n_snapshots):
            driver.run_fraction(stmts, 0.10)
            if maint is not None and i % maintenance_every == 0:
                maint.request()
                time.sleep(0.002)  # let the thread start: the snapshot then runs alongside it
            start, ms, result, bare_ms, bare_rows = _paired(server.pk, bare_conn, bare_first=i % 2 == 0)
            rows.append(
                {
                    "ms": ms,
                    "start": start,
                    "end": start + ms / 1000,
                    "bare_ms": bare_ms,
                    "bare_rows": bare_rows,
                    "entries": result.entries,
                    "changed": result.changed,
                    "new": result.new_entries,
                }
            )
        if maint is not None:
            maint.q.join()
    finally:
        if maint is not None:
            maint.stop()

    runs = maint.runs if maint else []
    for r in rows:
        r["maintenance"] = any(m["start"] < r["end"] and m["end"] > r["start"] for m in runs)
    times = [r["ms"] for r in rows]
    bares = [r["bare_ms"] for r in rows]
    ratios = [r["ms"] / r["bare_ms"] for r in rows]
    with_m = [r["ms"] for r in rows if r["maintenance"]]
    without_m = [r["ms"] for r in rows if not r["maintenance"]]
    res = {
        "server_id": server.pk,
        "baseline_snapshot_ms": base_ms,
        "baseline_entries": base.entries,
        "entries": int(median([r["entries"] for r in rows])),
        "changed": int(median([r["changed"] for r in rows])),
        "new_per_snapshot_max": max(r["new"] for r in rows),
        "collect_ms": summary(times),
        "bare_ms": summary(bares),
        "bare_rows": int(median([r["bare_rows"] for r in rows])),
        "ratio_paired_median": median(ratios),
        "ratio_of_medians": median(times) / median(bares),
        "p99_over_median": pct(times, 99) / median(times),
        "with_maintenance_ms": summary(with_m),
        "without_maintenance_ms": summary(without_m),
        "maintenance_runs": len(runs),
        "maintenance_errors": maint.errors if maint else [],
        "maintenance_steps_ms": {
            k: median([m["steps"][k] for m in runs if k in m["steps"]]) for k in (runs[0]["steps"] if runs else {})
        },
        "maintenance_ms": summary([(m["end"] - m["start"]) * 1000 for m in runs]),
        "times": times,
    }
    log(
        f"  {n:>5} entries ({res['entries']} in pg_stat_statements, ~{res['changed']} changed/snapshot): "
        f"collect median {res['collect_ms']['median']:.1f} ms p99 {res['collect_ms']['p99']:.1f} ms; "
        f"bare SELECT median {res['bare_ms']['median']:.1f} ms; ratio {res['ratio_paired_median']:.2f}x"
        + (f"; {len(with_m)} snapshots overlapped maintenance ({len(runs)} runs)" if runs else "")
    )
    return res
