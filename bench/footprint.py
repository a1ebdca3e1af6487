"""Benchmark 2: history footprint of one 5,000-entry server over one day of 1-minute snapshots.

1,440 synthetic snapshots (bench.synthetic: what is synthetic is said there) go through the real
writer path of server_collect, with timestamps one minute apart over one UTC day, after a
baseline at 23:59 the day before. At every hour boundary the real periodic rollup runs
(``rollups.roll_up(now=...)``: the hour just completed, and after midnight the day). Then every
history table is VACUUMed (as autovacuum would have) and measured with pg_total_relation_size
(heap + TOAST + indexes + FSM/VM):

* raw: the day's partitions of collectors_snapshot and collectors_wait_event;
* read tier: the partitions holding that day's server totals per hour and per day
  (collectors_server_hourly/daily), the statement-major prefix sums at the day's 24 hour
  boundaries and at its day boundary (collectors_statement_hourly/daily), and the wait-event
  rollups (collectors_wait_event_hourly/daily);
* fixed per server (not per day): the statement dimension (texts) and the statement state.

The history tables are emptied (TRUNCATE) first, so every byte measured is this server's.

Baseline measured in the same run: the same deltas stored naively, one row per changed statement
per minute (server_id, statement_id, taken_at, 37 int8 counters, 4 float8 gauges, primary key)
— what a row-per-statement history (PoWA-like, uncompressed) costs. One hour of it is written
and measured, times 24.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import numpy as np
from django.db import connection

from bench import synthetic
from bench.stats import summary
from collectors.services import server_collect
from history import binary_copy, partitions, rollups, tables
from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES, GAUGE_NAMES
from history.tables import TABLES

HISTORY_TABLES = tuple(t.name for t in tables.PER_SERVER)
# The timeline is compressed (a day in minutes), so autovacuum, which wakes up every minute of real
# time, cannot keep the statement state's churn in check as it would over a real day: its threshold
# (50 + 20% of 5,000 live rows = 1,050 dead rows, i.e. ~2 minutes of deleted state rows) is crossed
# every two or three snapshots. The run VACUUMs the state every VACUUM_EVERY synthetic minutes instead.
VACUUM_EVERY = 3
NAIVE_COLUMNS = (
    ("server_id", "i8"),
    ("statement_id", "i8"),
    ("taken_at_us", "i8"),
    *((c, "i8") for c in COUNTER_NAMES),
    *((g, "f8") for g in FACT_GAUGE_NAMES),
)


def _truncate() -> None:
    with connection.cursor() as cur:
        cur.execute("TRUNCATE " + ", ".join(HISTORY_TABLES))


def _size(name: str) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT coalesce(pg_total_relation_size(to_regclass(%s)), 0)", [name])
        return int(cur.fetchone()[0])


def _vacuum(tables=HISTORY_TABLES) -> None:
    """VACUUM (outside a transaction: Django's connection is in autocommit mode here)."""
    connection.ensure_connection()
    for t in tables:
        connection.connection.execute(f"VACUUM {t}")


def _naive_baseline(rows: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> dict:
    """Write (taken_at_us, statement index, deltas, fact gauges) rows naively; measure."""
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_naive_facts")
        cols = ", ".join(f"{name} {'int8' if kind == 'i8' else 'float8'} NOT NULL" for name, kind in NAIVE_COLUMNS)
        cur.execute(f"CREATE TABLE bench_naive_facts ({cols}, PRIMARY KEY (server_id, taken_at_us, statement_id))")
    n = sum(len(r[1]) for r in rows)
    arr = np.empty(n, dtype=binary_copy.native_dtype(NAIVE_COLUMNS))
    pos = 0
    for taken_us, idx, deltas, gauges in rows:
        k = len(idx)
        sl = slice(pos, pos + k)
        arr["server_id"][sl] = 1
        arr["statement_id"][sl] = idx
        arr["taken_at_us"][sl] = taken_us
        for j, c in enumerate(COUNTER_NAMES):
            arr[c][sl] = deltas[:, j]
        for j, g in enumerate(FACT_GAUGE_NAMES):
            arr[g][sl] = np.nan_to_num(gauges[:, j])
        pos += k
    from history import store

    with store.raw_cursor() as cur:
        names = ", ".join(name for name, _ in NAIVE_COLUMNS)
        with cur.copy(f"COPY bench_naive_facts ({names}) FROM STDIN (FORMAT binary)") as copy:
            copy.write(binary_copy.build(arr, NAIVE_COLUMNS))
    _vacuum(("bench_naive_facts",))
    size = _size("bench_naive_facts")
    with connection.cursor() as cur:
        cur.execute("DROP TABLE bench_naive_facts")
    return {"rows_hour": n, "bytes_hour": size}


def run(*, day: datetime, uniform: bool = False, seed: int = 7, entries: int = 5000, log=print) -> dict:
    """`entries`: the server's size (5,000 in the report; other sizes for a one-off figure)."""
    _truncate()
    partitions.forget_cache()
    synth = synthetic.SyntheticServer(entries, 0.10, seed=seed, uniform=uniform, start=day - timedelta(minutes=1))
    server = synthetic.register(f"bench-footprint-{'uniform' if uniform else 'skewed'}-{seed}")
    write_ms, rollup_ms, changed = [], [], []
    naive_rows = []
    t_start = time.perf_counter()
    gauge_idx = [GAUGE_NAMES.index(g) for g in FACT_GAUGE_NAMES]
    with synthetic.reading_from(synth):
        synth.step()  # baseline reading at day - 1 minute
        r = server_collect(server_id=server.pk)
        assert r.ok and r.kind == "baseline", r.summary()
        for minute in range(1440):
            synth.step()
            t0 = time.perf_counter()
            r = server_collect(server_id=server.pk)
            write_ms.append((time.perf_counter() - t0) * 1000)
            assert r.ok and r.kind == "delta", r.summary()
            changed.append(r.changed)
            if minute % VACUUM_EVERY == VACUUM_EVERY - 1:
                _vacuum(("collectors_statement_state",))
            if minute < 60:
                # what the naive layout would store: the same changed rows, all columns
                naive_rows.append(
                    (
                        synth.taken_at_us,
                        synth.last_changed.copy(),
                        synth.last_deltas.copy(),
                        synth.gauges[synth.last_changed][:, gauge_idx],
                    )
                )
            taken = synth.taken_at
            if taken.minute == 59:  # the periodic rollup just after each hour ends
                t0 = time.perf_counter()
                rollups.roll_up(now=taken + timedelta(seconds=90))
                rollup_ms.append((time.perf_counter() - t0) * 1000)
            if minute % 240 == 239:
                log(f"  {minute + 1} of 1440 snapshots written ({time.perf_counter() - t_start:.0f}s)")
    elapsed = time.perf_counter() - t_start

    _vacuum()
    d = day
    raw = {
        "snapshots": _size(partitions.partition_name("collectors_snapshot", d)),
        "waits": _size(partitions.partition_name("collectors_wait_event", d)),
    }
    # The read tier, each table's partition that holds this day (the tables were emptied first, so a
    # month or year partition holds this day's rows only).
    roll = {
        "server hourly": _size(partitions.partition_name(TABLES.SERVER_HOURLY.name, d)),
        "statement hourly": _size(partitions.partition_name(TABLES.STATEMENT_HOURLY.name, d + timedelta(hours=1))),
        "hourly waits": _size(partitions.partition_name(TABLES.WAIT_EVENT_HOURLY.name, d)),
        "server daily": _size(partitions.partition_name(TABLES.SERVER_DAILY.name, d)),
        "statement daily": _size(partitions.partition_name(TABLES.STATEMENT_DAILY.name, d + timedelta(days=1))),
        "daily waits": _size(partitions.partition_name(TABLES.WAIT_EVENT_DAILY.name, d)),
    }
    # The last hour boundary of the day (until = midnight) lies in the next day's partition.
    roll["statement hourly"] += _size(partitions.partition_name(TABLES.STATEMENT_HOURLY.name, d + timedelta(days=1)))
    fixed = {
        "statement dimension": _size("collectors_statement"),
        "statement state": _size("collectors_statement_state"),
        "server state": _size("collectors_serverstate"),
    }
    baseline_partition = _size(partitions.partition_name("collectors_snapshot", d - timedelta(minutes=1)))
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*), sum(length(statements)), sum(changed) FROM collectors_snapshot "
            "WHERE server_id = %s AND kind = 'delta' AND taken_at >= %s AND taken_at < %s",
            [server.pk, d, d + timedelta(days=1)],
        )
        n_snap, payload_bytes, stored_rows = cur.fetchone()
        cur.execute(f"SELECT count(*) FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = %s", [server.pk])
        n_hourly = cur.fetchone()[0]
        cur.execute(
            f"SELECT count(*), count(DISTINCT until) FROM {TABLES.STATEMENT_HOURLY.name} WHERE server_id = %s",
            [server.pk],
        )
        hourly_rows, hourly_boundaries = cur.fetchone()
        cur.execute(
            "SELECT count(*), sum(octet_length(query)) FROM collectors_statement WHERE server_id = %s", [server.pk]
        )
        n_stmt, text_bytes = cur.fetchone()
        cur.execute("SELECT count(*) FROM collectors_wait_event WHERE server_id = %s", [server.pk])
        wait_rows = cur.fetchone()[0]
        cur.execute(f"SELECT count(*) FROM {TABLES.SERVER_DAILY.name} WHERE server_id = %s", [server.pk])
        n_daily = cur.fetchone()[0]
        cur.execute(f"SELECT count(*) FROM {TABLES.STATEMENT_DAILY.name} WHERE server_id = %s", [server.pk])
        daily_rows = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM collectors_wait_event_hourly WHERE server_id = %s", [server.pk])
        hourly_wait_rows = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM collectors_wait_event_daily WHERE server_id = %s", [server.pk])
        daily_wait_rows = cur.fetchone()[0]
    naive = _naive_baseline(naive_rows)
    per_day = sum(raw.values()) + sum(roll.values())
    total_first_day = per_day + sum(fixed.values())
    res = {
        "model": "uniform" if uniform else "skewed",
        "day": d.date().isoformat(),
        "raw": raw,
        "rollups": roll,
        "fixed": fixed,
        "baseline_partition_bytes": baseline_partition,
        "per_day_bytes": per_day,
        "total_first_day_bytes": total_first_day,
        "snapshots": n_snap,
        "stored_rows": int(stored_rows or 0),
        "changed_per_snapshot": summary(changed),
        "payload_bytes": int(payload_bytes or 0),
        "payload_per_row": (payload_bytes or 0) / max(stored_rows or 1, 1),
        "hourly_buckets": n_hourly,
        "statement_hourly_rows": hourly_rows,
        "statement_hourly_boundaries": hourly_boundaries,
        "daily_buckets": n_daily,
        "statement_daily_rows": daily_rows,
        "hourly_wait_rows": hourly_wait_rows,
        "daily_wait_rows": daily_wait_rows,
        "statements": n_stmt,
        "text_bytes": int(text_bytes or 0),
        "wait_rows": wait_rows,
        "naive_bytes_day": naive["bytes_hour"] * 24,
        "naive_rows_day": naive["rows_hour"] * 24,
        "elapsed_s": elapsed,
        "write_ms": summary(write_ms),
        "rollup_ms": summary(rollup_ms),
        "server_id": server.pk,
    }
    mb = 1024 * 1024
    log(
        f"  per server-day: raw {sum(raw.values()) / mb:.1f} MiB + read tier and wait rollups "
        f"{sum(roll.values()) / mb:.2f} MiB = {per_day / mb:.1f} MiB; fixed per server "
        f"{sum(fixed.values()) / mb:.1f} MiB; naive row-per-statement layout {res['naive_bytes_day'] / mb:.0f} MiB/day "
        f"({res['naive_bytes_day'] / per_day:.0f}x); written in {elapsed:.0f}s"
    )
    log(
        "  read tier and wait rollups, MiB per day: "
        + ", ".join(f"{k} {v / mb:.2f}" for k, v in roll.items())
        + f"; statement prefix-sum rows: {hourly_rows:,} at {hourly_boundaries} hour boundaries, {daily_rows:,} "
        "at the day boundary"
    )
    return res
