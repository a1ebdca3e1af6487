"""The read-tier benchmark's history of one server: N synthetic statements (bench/synthetic.py), D days
of 1-minute snapshots ending at a fixed time, under the default retention.

* The last `real_days` go through the real collection path, exactly as the footprint benchmark:
  ``server_collect`` with the monitored server's side replaced by the generator, and
  ``rollups.roll_up(now=...)`` just after each hour ends, and once 3 minutes before the end (the
  periodic task runs every 5 minutes, so the hour in progress is rolled up to a few minutes ago).
* The days before are written by the bulk path (bench/bulk.py): each minute's deltas from the same
  generator, blocks encoded as codec.encode does, snapshot rows (block + server totals columns) and
  wait rows COPYed in per hour, then, after each UTC day, ``rollups.roll_up(now=...)`` (the project's
  rollup: it builds the day's hours and the day from those raw rows) and
  ``partitions.drop_expired(now=...)`` (raw partitions past the 3-day retention are dropped).
* Between the two, the statement state and ServerState are set to what the last bulk minute left,
  so the first real snapshot books exactly one minute.

Along the way the old blob rollups of the baseline (bench/baseline.py) are built from the same blocks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import connection

from bench import baseline, bulk, synthetic
from collectors.services import server_collect
from collectors.settings import instance
from collectors.waits import waits
from history import codec, partitions, rollups, store
from history.models import ServerState
from history.tables import TABLES

MINUTE_US = 60_000_000


@dataclass
class LongHistory:
    server_id: int
    statements: int
    first_taken_at: datetime
    last_taken_at: datetime
    bulk: tuple[datetime, datetime] | None  # taken_at of the first and last snapshot the bulk path wrote
    real: tuple[datetime, datetime]  # ... and that server_collect wrote
    statement_ids: np.ndarray  # synthetic entry i -> statement id
    p_run: np.ndarray  # entry i's chance of running in a minute
    snapshots_bulk: int = 0
    snapshots_real: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def _statement_ids(server_id: int, keys: np.ndarray) -> np.ndarray:
    with connection.cursor() as cur:
        cur.execute(f"SELECT queryid, id FROM {TABLES.STATEMENT.name} WHERE server_id = %s", [server_id])
        by_queryid = dict(cur.fetchall())
    return np.array([by_queryid[q] for q in keys[:, 2].tolist()], np.int64)


def _add(seconds: dict, key: str, t0: float) -> float:
    now = time.perf_counter()
    seconds[key] = seconds.get(key, 0.0) + now - t0
    return now


class _BulkHour:
    """One UTC hour of bulk-written minutes, flushed as COPYs when the hour ends."""

    def __init__(self, ids: np.ndarray):
        self.ids = ids
        self.clear()

    def clear(self) -> None:
        self.taken_us: list[int] = []
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.wait_text: list[str] = []

    def add(self, taken_us: int, idx: np.ndarray, deltas: np.ndarray, fact: np.ndarray, wait_text: str) -> None:
        order = np.argsort(self.ids[idx], kind="stable")
        self.taken_us.append(taken_us)
        self.rows.append((self.ids[idx][order], deltas[order], fact[order]))
        self.wait_text.append(wait_text)

    def flush(self, template: str, server_id: int, seconds: dict, old_rollups: bool) -> None:
        if not self.rows:
            return
        t0 = time.perf_counter()
        sizes = [len(r[0]) for r in self.rows]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        ids = np.concatenate([r[0] for r in self.rows])
        counters = np.concatenate([r[1] for r in self.rows])
        gauges = np.concatenate([r[2] for r in self.rows])
        payloads = bulk.encode_many(ids, counters, gauges, starts)
        totals = bulk.block_totals(counters, starts)
        text = bulk.snapshot_lines(template, np.array(self.taken_us, np.int64), 60.0, np.array(sizes), payloads, totals)
        t0 = _add(seconds, "bulk: encode", t0)
        bulk.copy_snapshots(text, self.taken_us)
        bulk.copy_waits("".join(self.wait_text), self.taken_us)
        t0 = _add(seconds, "bulk: COPY", t0)
        if old_rollups:
            hour = datetime.fromtimestamp(self.taken_us[0] / 1e6, UTC).replace(minute=0, second=0)
            blocks = [codec.Block(*r) for r in self.rows]
            baseline.record_hour(server_id, hour, blocks, 60.0 * len(blocks))
            _add(seconds, "baseline: old hourly blobs", t0)
        self.clear()


def build(
    *, statements: int, days: int, real_days: int, last_taken_at: datetime, seed: int = 21, log=print
) -> LongHistory:
    """Write the history; the baseline's old rollup tables must exist (baseline.create_tables)."""
    seconds: dict[str, float] = {}
    first = last_taken_at - timedelta(days=days) + timedelta(minutes=1)
    handoff = last_taken_at - timedelta(days=real_days)  # the last snapshot of the bulk path
    synth = synthetic.SyntheticServer(statements, 0.10, seed=seed, start=first - timedelta(minutes=1))
    server = synthetic.register(f"bench-readtier-{statements}")
    t0 = time.perf_counter()
    with synthetic.reading_from(synth):
        synth.step()
        r = server_collect(server_id=server.pk)
        assert r.ok and r.kind == "baseline", r.summary()
    ids = _statement_ids(server.pk, synth.keys)
    t0 = _add(seconds, "baseline snapshot (server_collect)", t0)

    # -- bulk path -------------------------------------------------------------------------------
    n_bulk = int((handoff - first) / timedelta(minutes=1)) + 1 if handoff >= first else 0
    template = bulk.snapshot_template(
        bulk.Interval(server.pk, statements, stats_reset_at=instance.timestamp(int(synth.stats_since[0])))
    )
    hour_rows = _BulkHour(ids)
    started = time.perf_counter()
    for m in range(n_bulk):
        t0 = time.perf_counter()
        idx, deltas, fact = synth.advance_minute()
        taken_us = synth.taken_at_us
        wait_text = bulk.wait_lines(server.pk, taken_us, waits.rows_for_interval(synth.current_waits, None, 60.0))
        t0 = _add(seconds, "bulk: generate", t0)
        hour_rows.add(taken_us, idx, deltas, fact, wait_text)
        taken = synth.taken_at
        last = m == n_bulk - 1
        if taken.minute == 59 or last:
            # a whole hour only for the old blob rollups; the partial hour at the handoff is built from raw later
            hour_rows.flush(template, server.pk, seconds, old_rollups=taken.minute == 59)
        if (taken.hour, taken.minute) == (23, 59):
            t0 = time.perf_counter()
            now = taken + timedelta(seconds=90)
            rollups.roll_up(now=now)
            t0 = _add(seconds, "bulk: roll_up (once per day)", t0)
            partitions.drop_expired(now=now)
            _add(seconds, "bulk: drop_expired (once per day)", t0)
            log(f"    bulk path: {m + 1:,} of {n_bulk:,} snapshots written ({time.perf_counter() - started:.0f}s)")
    if n_bulk:
        # What the last bulk minute left, as server_collect would have stored it.
        t0 = time.perf_counter()
        store.write_statement_state(server.pk, synth.state(ids), np.empty(0, np.int64), synth.taken_at)
        ServerState.objects.filter(server_id=server.pk).update(taken_at=synth.taken_at)
        _add(seconds, "hand-off (statement state)", t0)

    # -- real path -------------------------------------------------------------------------------
    n_real = int((last_taken_at - synth.taken_at) / timedelta(minutes=1))
    real_first = synth.taken_at + timedelta(minutes=1)
    started = time.perf_counter()
    with synthetic.reading_from(synth):
        for m in range(n_real):
            synth.step()
            t0 = time.perf_counter()
            r = server_collect(server_id=server.pk)
            assert r.ok and r.kind == "delta", r.summary()
            t0 = _add(seconds, "real: server_collect", t0)
            taken = synth.taken_at
            if taken.minute == 59:  # the periodic rollup just after each hour ends
                rollups.roll_up(now=taken + timedelta(seconds=90))
                t0 = _add(seconds, "real: roll_up (hourly)", t0)
            if (taken.hour, taken.minute) == (23, 59):
                partitions.drop_expired(now=taken + timedelta(seconds=90))
                _add(seconds, "real: drop_expired (daily)", t0)
            if m % 1440 == 1439:
                log(f"    real path: {m + 1:,} of {n_real:,} snapshots ({time.perf_counter() - started:.0f}s)")
    # The periodic rollup runs every 5 minutes (console/schedule.py): its last run, a few minutes
    # before the end, left the hour in progress rolled up that far.
    t0 = time.perf_counter()
    rollups.roll_up(now=last_taken_at - timedelta(minutes=3))
    t0 = _add(seconds, "real: roll_up (the last 5-minute run)", t0)
    partitions.drop_expired(now=last_taken_at)
    _add(seconds, "real: drop_expired (daily)", t0)
    return LongHistory(
        server_id=server.pk,
        statements=statements,
        first_taken_at=first,
        last_taken_at=last_taken_at,
        bulk=(first, handoff) if n_bulk else None,
        real=(real_first, last_taken_at),
        statement_ids=ids,
        p_run=synth.p_run.copy(),
        snapshots_bulk=n_bulk,
        snapshots_real=n_real,
        seconds=seconds,
    )


def build_old_rollups(h: LongHistory, log=print) -> dict[str, float]:
    """The baseline's old blob rollups for what the bulk path did not cover: the hours from the
    hand-off on, from the raw snapshots still stored; then the old daily blobs from the hourly ones."""
    t0 = time.perf_counter()
    start = (h.real[0] - timedelta(minutes=1)).replace(minute=0, second=0, microsecond=0)
    end = h.last_taken_at.replace(minute=0, second=0, microsecond=0)
    hours = baseline.hours_from_raw(h.server_id, start, end)
    t1 = time.perf_counter()
    days = baseline.days_from_hours(h.server_id, h.first_taken_at.replace(hour=0, minute=0), end.replace(hour=0))
    t2 = time.perf_counter()
    log(f"    old blob rollups for the baseline: {hours} hours from raw ({t1 - t0:.1f}s), {days} days ({t2 - t1:.1f}s)")
    return {"baseline: old hourly blobs": t1 - t0, "baseline: old daily blobs": t2 - t1}
