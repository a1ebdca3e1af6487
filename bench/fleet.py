"""The read-tier benchmark's fleet: S servers of N synthetic statements each, D days of 1-minute
snapshots ending with the single server's history.

Each server's baseline snapshot goes through ``server_collect`` (statement dimension with texts,
statement state, ServerState: what the real collector leaves). The deltas that follow are all
written by the bulk path (bench/bulk.py): one generator for the whole fleet (bench/synthetic.py's
model over S x N entries, each server a slice of it), each server-minute's block encoded as
codec.encode does, snapshot rows (block + server totals columns) as COPY text, produced in a child
process while the single server's history is written, then COPYed. Then one
``rollups.roll_up(now=...)`` builds every server's hours and days from those raw rows, with the
project's code. The fleet has no wait-event rows (the single server has; at this model's six rows
per server-minute they would be 3.5 million rows the fleet figure does not read).
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from django.db import connection, connections

from bench import bulk, synthetic
from collectors.services import server_collect
from collectors.settings import instance
from collectors.statements import lineage, pgss
from collectors.statements.deltas import match_keys
from history import rollups
from history.entries import Entries
from history.models import ServerState
from history.tables import TABLES

FLUSH_MINUTES = 10  # minutes of all servers' blocks encoded and COPYed at once


@dataclass
class Fleet:
    server_ids: list[int]
    statements: int
    first_taken_at: datetime
    last_taken_at: datetime
    snapshots: int
    seconds: dict[str, float] = field(default_factory=dict)


class _Slice:
    """One server of the fleet generator, as bench.synthetic.reading_from reads a SyntheticServer."""

    def __init__(self, fleet: synthetic.SyntheticServer, k: int, n: int):
        self.fleet, self.k, self.rows = fleet, k, slice(k * n, (k + 1) * n)
        self.stats_since = fleet.stats_since[self.rows]
        self.current_waits = None

    def meta(self) -> instance.ServerMeta:
        return self.fleet.meta()

    def identity(self) -> lineage.Identity:
        return lineage.Identity(system_identifier=7_000_000_000_000_001_000 + self.k, timeline_id=1, in_recovery=False)

    def read_entries(self, prev: Entries, *, send_all: bool = False) -> pgss.PgssReading:
        f, r = self.fleet, self.rows
        cur = Entries(
            keys=f.keys[r].copy(),
            counters=f.counters[r].copy(),
            gauges=f.gauges[r].copy(),
            stats_since_us=f.stats_since[r].copy(),
            minmax_stats_since_us=f.minmax_since[r].copy(),
        )
        return pgss.PgssReading(
            entries=cur, prev_index=match_keys(prev.keys, cur.keys), hidden=0, total=len(cur), sent=len(cur)
        )

    def read_texts(self, keys: np.ndarray):
        return self.fleet.read_texts(keys)


def _ids(server_ids: list[int], keys: np.ndarray, n: int) -> np.ndarray:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT server_id, queryid, id FROM {TABLES.STATEMENT.name} WHERE server_id = ANY(%s)", [server_ids]
        )
        found = {(s, q): i for s, q, i in cur.fetchall()}
    return np.array([found[(server_ids[j // n], q)] for j, q in enumerate(keys[:, 2].tolist())], np.int64)


@dataclass
class Pending:
    """A fleet whose deltas are being generated in a child process (see start)."""

    fleet: Fleet
    process: object
    queue: object
    workdir: Path


def start(
    *,
    servers: int,
    statements: int,
    days: int,
    last_taken_at: datetime,
    workdir: Path,
    seed: int = 31,
    step_s: int = 60,
    prefix: str = "bench-fleet",
    log=print,
) -> Pending:
    """Register the servers and take their baselines here, then generate and encode every delta in a
    child process, as COPY files in `workdir` (no database access there): on two cores this overlaps
    the single server's history, which keeps one core busy. `finish` loads them. A snapshot every `step_s`
    seconds (the generator's minute of workload each time)."""
    seconds: dict[str, float] = {}
    step = timedelta(seconds=step_s)
    first = last_taken_at - timedelta(days=days) + step
    t0 = time.perf_counter()
    gen = synthetic.SyntheticServer(
        servers * statements, 0.10, seed=seed, start=first - step, step_s=step_s, waits_per_minute=0
    )
    t1 = time.perf_counter()
    seconds["generator (texts, model)"] = t1 - t0
    server_ids = []
    for k in range(servers):
        server = synthetic.register(f"{prefix}-{k:03d}")
        server_ids.append(server.pk)
        with synthetic.reading_from(_Slice(gen, k, statements)):
            r = server_collect(server_id=server.pk)
            assert r.ok and r.kind == "baseline", r.summary()
    ids = _ids(server_ids, gen.keys, statements)
    seconds["register + baseline snapshots (server_collect)"] = time.perf_counter() - t1
    log(
        f"    {servers} servers registered, baselines taken ({time.perf_counter() - t1:.0f}s); "
        "their deltas are generated in a child process meanwhile"
    )
    templates = [
        bulk.snapshot_template(
            bulk.Interval(
                sid, statements, interval_s=step_s, stats_reset_at=instance.timestamp(int(gen.stats_since[0]))
            )
        )
        for sid in server_ids
    ]
    fleet = Fleet(
        server_ids=server_ids,
        statements=statements,
        first_taken_at=first,
        last_taken_at=last_taken_at,
        snapshots=servers * days * 86_400 // step_s,
        seconds=seconds,
    )
    ctx = multiprocessing.get_context("fork")
    queue = ctx.SimpleQueue()
    connections.close_all()  # the child must not share this process's connection to the history store
    sys.stdout.flush()  # nor write this process's buffered output again when it exits
    sys.stderr.flush()
    steps = days * 86_400 // step_s
    process = ctx.Process(target=_generate, args=(gen, ids, statements, templates, steps, workdir, queue))
    process.start()
    return Pending(fleet, process, queue, workdir)


def _generate(gen, ids, n: int, templates: list[str], n_minutes: int, workdir: Path, queue) -> None:
    """The child: every minute's deltas of every server, encoded, as COPY text files of FLUSH_MINUTES each."""
    try:
        seconds: dict[str, float] = {}
        pending: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        chunk = 0
        for m in range(n_minutes):
            t0 = time.perf_counter()
            idx, deltas, fact = gen.advance_minute()
            pending.append((gen.taken_at_us, idx, deltas, fact))
            _add(seconds, "child: generate", t0)
            if len(pending) == FLUSH_MINUTES or m == n_minutes - 1:
                text = _encode(pending, ids, n, templates, gen.step_us / 1_000_000, seconds)
                t0 = time.perf_counter()
                (workdir / f"{chunk:05d}-{pending[0][0]}-{pending[-1][0]}.copy").write_bytes(text.encode())
                _add(seconds, "child: write files", t0)
                chunk += 1
                pending = []
        queue.put(("ok", seconds))
    except BaseException:
        queue.put(("error", traceback.format_exc()))


def finish(p: Pending, log=print) -> Fleet:
    """Wait for the child, COPY its files, then one rollups.roll_up for every server."""
    t0 = time.perf_counter()
    status, detail = p.queue.get()
    p.process.join()
    if status != "ok" or p.process.exitcode:
        raise RuntimeError(f"fleet generation failed (exit code {p.process.exitcode}):\n{detail}")
    seconds = p.fleet.seconds
    seconds.update(detail)
    t1 = time.perf_counter()
    seconds["waiting for the child"] = t1 - t0
    for path in sorted(p.workdir.glob("*.copy")):
        _, first_us, last_us = path.stem.split("-")
        bulk.copy_snapshots(path.read_bytes().decode(), [int(first_us), int(last_us)])
        path.unlink()
    t2 = time.perf_counter()
    seconds["bulk: COPY"] = t2 - t1
    log(f"    {p.fleet.snapshots:,} snapshots loaded ({t2 - t1:.0f}s)")
    result = rollups.roll_up(now=p.fleet.last_taken_at + timedelta(seconds=90))
    assert not result.failed, result.failed
    t3 = time.perf_counter()
    seconds["roll_up (all servers, once)"] = t3 - t2
    log(f"    roll_up: {result.hours:,} hours, {result.days} days built ({t3 - t2:.0f}s)")
    ServerState.objects.filter(server_id__in=p.fleet.server_ids).update(taken_at=p.fleet.last_taken_at)
    return p.fleet


def _add(seconds: dict, key: str, t0: float) -> float:
    now = time.perf_counter()
    seconds[key] = seconds.get(key, 0.0) + now - t0
    return now


def _encode(pending, ids: np.ndarray, n: int, templates: list[str], step_s: float, seconds: dict) -> str:
    """COPY text of some minutes of every server's blocks (rows ordered by minute, server, statement id)."""
    t0 = time.perf_counter()
    servers = len(templates)
    minute = np.concatenate([np.full(len(p[1]), i) for i, p in enumerate(pending)])
    idx = np.concatenate([p[1] for p in pending])
    deltas = np.concatenate([p[2] for p in pending])
    fact = np.concatenate([p[3] for p in pending])
    server = idx // n
    sid = ids[idx]
    order = np.lexsort((sid, server, minute))
    minute, server, sid, deltas, fact = minute[order], server[order], sid[order], deltas[order], fact[order]
    block = minute * servers + server  # every (minute, server), empty blocks included
    starts = np.searchsorted(block, np.arange(len(pending) * servers + 1))
    payloads = bulk.encode_many(sid, deltas, fact, starts)
    totals = bulk.block_totals(deltas, starts)
    changed = np.diff(starts)
    taken = np.array([p[0] for p in pending], np.int64)
    parts = []
    for k, template in enumerate(templates):
        b = np.arange(len(pending)) * servers + k
        parts.append(bulk.snapshot_lines(template, taken, step_s, changed[b], [payloads[i] for i in b], totals[b]))
    _add(seconds, "child: encode", t0)
    return "".join(parts)
