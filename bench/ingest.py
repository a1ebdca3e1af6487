"""Benchmark 3: ingest throughput of the delta writer, steady state at 5,000 entries.

A synthetic 5,000-entry server (bench.synthetic; exactly 10% of the entries, chosen uniformly,
change each minute) goes through the real writer path of server_collect: load of the previous
state, deltas.compute, codec.encode, the snapshot row, the state rows of the changed entries,
the status rows, one transaction. Rows = statement entries processed (5,000 per snapshot); stored
rows = the changed entries among them (500 per snapshot here), each a row of the snapshot's block
and a state row: both rates are reported.
The collector thread is pinned to one CPU (os.sched_setaffinity) so the figure is one core's;
the history PostgreSQL runs wherever the scheduler puts it. Throughput is reported in wall
time and in the collector process's CPU time.

Baseline measured in the same run, interleaved with the snapshots: a bare binary COPY of the
same 5,000 state rows (51 int8/float8 columns) into an unindexed scratch table — what moving
this snapshot's rows into PostgreSQL costs at the least, on this machine, right now.
A second pass has every entry change every minute (the worst case, informative only), and a
third wraps the writer's functions to show where the time goes.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import datetime

import numpy as np
from django.db import connection

from bench import phases, synthetic
from bench.stats import median, summary
from collectors.services import server_collect
from history import store


@contextlib.contextmanager
def one_cpu():
    try:
        before = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        yield None
        return
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def _state_rows(entries) -> bytes:
    numbered = entries.take(np.arange(len(entries)))
    numbered.statement_id = np.arange(len(entries), dtype=np.int64)
    return store.state_copy_data(1, numbered)


def _bare_copy(data: bytes) -> float:
    names = ", ".join(name for name, _ in store.STATE_COLUMNS)
    with store.raw_cursor() as cur:
        cur.execute("TRUNCATE bench_copy_floor")
        t0 = time.perf_counter()
        with cur.copy(f"COPY bench_copy_floor ({names}) FROM STDIN (FORMAT binary)") as copy:
            copy.write(data)
        return (time.perf_counter() - t0) * 1000


def _pass(synth, server, n: int, *, floor: bool) -> dict:
    wall, cpu, copy_ms = [], [], []
    for i in range(n):
        synth.step()
        if floor and i % 2:
            copy_ms.append(_bare_copy(_state_rows(synth.current)))
        c0, t0 = time.process_time(), time.perf_counter()
        r = server_collect(server_id=server.pk)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        assert r.ok and r.kind == "delta", r.summary()
        if floor and not i % 2:
            copy_ms.append(_bare_copy(_state_rows(synth.current)))
    entries = synth.n
    stored = int(round(synth.n * synth.change_fraction))  # uniform: exactly this many change each snapshot
    return {
        "snapshots": n,
        "entries": entries,
        "changed": int(round(synth.n * synth.change_fraction)),
        "wall_ms": summary(wall),
        "cpu_ms": summary(cpu),
        "rows_per_s": entries * n / (sum(wall) / 1000),
        # what is written: the changed entries' deltas (one row each in the block) and state rows
        "stored_rows_per_s": stored * n / (sum(wall) / 1000),
        "rows_per_s_median": entries / (median(wall) / 1000),
        "rows_per_cpu_s": entries * n / (sum(cpu) / 1000),
        "copy_floor_ms": summary(copy_ms) if copy_ms else None,
        "copy_floor_rows_per_s": entries / (median(copy_ms) / 1000) if copy_ms else None,
        "ratio_to_copy_floor": median(wall) / median(copy_ms) if copy_ms else None,
    }


def run(
    *, day: datetime, snapshots: int = 200, warmup: int = 20, all_changed: int = 30, breakdown: int = 40, log=print
) -> dict:
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_copy_floor")
        cur.execute("CREATE TABLE bench_copy_floor (LIKE collectors_statement_state)")
    out = {}
    with one_cpu() as cpu:
        out["pinned_cpu"] = cpu
        # 10% of entries change per snapshot: the target's steady state.
        synth = synthetic.SyntheticServer(5000, 0.10, seed=11, uniform=True, start=day)
        server = synthetic.register("bench-ingest")
        with synthetic.reading_from(synth):
            synth.step()
            assert server_collect(server_id=server.pk).kind == "baseline"
            _pass(synth, server, warmup, floor=False)
            out["steady"] = s = _pass(synth, server, snapshots, floor=True)
            log(
                f"  10% changed: {s['rows_per_s']:,.0f} entries/s wall, {s['stored_rows_per_s']:,.0f} stored (changed) "
                f"rows/s ({s['wall_ms']['median']:.1f} ms median per "
                f"5,000-entry snapshot), {s['rows_per_cpu_s']:,.0f} rows per CPU-second; bare COPY of the same "
                f"rows {s['copy_floor_ms']['median']:.1f} ms ({s['ratio_to_copy_floor']:.2f}x)"
            )
            if breakdown:
                totals = []
                with phases.timed_phases() as acc:
                    for _ in range(breakdown):
                        synth.step()
                        t0 = time.perf_counter()
                        server_collect(server_id=server.pk)
                        totals.append((time.perf_counter() - t0) * 1000)
                out["breakdown"] = {"snapshots": breakdown, "rows": phases.per_snapshot(acc, totals)}
        if all_changed:
            synth2 = synthetic.SyntheticServer(5000, 1.0, seed=12, uniform=True, start=day)
            server2 = synthetic.register("bench-ingest-all-changed")
            with synthetic.reading_from(synth2):
                synth2.step()
                server_collect(server_id=server2.pk)
                _pass(synth2, server2, 5, floor=False)
                out["all_changed"] = a = _pass(synth2, server2, all_changed, floor=False)
            log(
                f"  100% changed: {a['rows_per_s']:,.0f} entries/s wall = {a['stored_rows_per_s']:,.0f} stored rows/s "
                f"({a['wall_ms']['median']:.1f} ms median per snapshot)"
            )
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_copy_floor")
    return out
