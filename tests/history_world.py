"""A synthetic history written through the real collection path (server_collect with a synthetic
reading: bench/synthetic.py) and rolled up by the real periodic rollup, and ground truth read back
from its raw snapshots."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
from django.db import connection

from bench import synthetic
from collectors.services import server_collect
from collectors.texts import texts
from history import codec, rollups
from history.columns import TOTAL_NAMES, totals_of

STORM = 40  # how many times as often statements run in a storm


class HardTexts(synthetic.SyntheticServer):
    """A synthetic server whose three costliest statements (by `cost`) have the texts a page must show with
    care: `hostile` (markup, to be escaped), none (evicted) and one the monitoring role may not see. The
    statements' indices, costliest first, are returned for the subclass's own picks."""

    def hard_texts(self, cost: np.ndarray, hostile: str) -> np.ndarray:
        hot = np.argsort(-cost)
        keys = [tuple(k) for k in self.keys.tolist()]
        self.hostile_key, self.evicted_key, self.hidden_key = keys[hot[0]], keys[hot[1]], keys[hot[2]]
        self.texts[self.hostile_key] = hostile
        self.texts[self.evicted_key] = None
        return hot

    def read_texts(self, keys: np.ndarray) -> texts.Texts:
        found = super().read_texts(keys)
        if self.hidden_key in found.by_key:
            found.by_key[self.hidden_key] = texts.TextRead(present=True, visible=False, text=None)
        return found


def build(
    name: str,
    *,
    n: int,
    start: datetime,
    end: datetime,
    step: timedelta,
    outage: tuple[datetime, datetime] | None = None,
    seed: int = 11,
    last_rollup_at: datetime | None = None,
    storm_from: datetime | None = None,
):
    """A server with `n` statements, a snapshot every `step` in [start, end) except during the outage,
    rolled up every hour as the periodic task does, and a last time at `last_rollup_at` (default: a day
    after the end; a time inside the last hour leaves it rolled up only that far). From `storm_from` on,
    every statement runs STORM times as often (the snapshots taken after it carry it)."""
    server = synthetic.register(name)
    synth = synthetic.SyntheticServer(
        n=n, change_fraction=0.3, start=start, step_s=int(step.total_seconds()), seed=seed
    )
    last_rollup, stormy = start, False
    with synthetic.reading_from(synth):
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + step < end:
            if storm_from is not None and not stormy and synth.taken_at + step >= storm_from:
                synth.rate, stormy = synth.rate * STORM, True  # the minute before the next snapshot storms
            synth.step()
            if outage and outage[0] <= synth.taken_at < outage[1]:
                continue  # the server was unreachable: its counters run on, nothing is stored
            assert server_collect(server_id=server.pk).ok
            if synth.taken_at - last_rollup >= timedelta(hours=1) and (
                last_rollup_at is None or synth.taken_at <= last_rollup_at
            ):
                rollups.roll_up(now=synth.taken_at)
                last_rollup = synth.taken_at
            if last_rollup_at is not None and last_rollup < last_rollup_at <= synth.taken_at + step:
                rollups.roll_up(now=last_rollup_at)
                last_rollup = last_rollup_at
    if last_rollup_at is None:
        rollups.roll_up(now=end + timedelta(days=1))
    return server


def raw_rows(server_id: int, start: datetime, end: datetime) -> list[tuple]:
    """(taken_at, interval_s, {statement id: figures}) of every delta snapshot in [start, end)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT taken_at, interval_s, statements FROM collectors_snapshot WHERE server_id = %s "
            "AND kind = 'delta' AND taken_at >= %s AND taken_at < %s ORDER BY taken_at",
            [server_id, start, end],
        )
        out = []
        for taken, interval_s, payload in cur.fetchall():
            block = codec.decode(bytes(payload))
            out.append(
                (taken, interval_s, dict(zip(block.statement_id.tolist(), totals_of(block.counters), strict=True)))
            )
        return out


def raw_sums(server_id: int, start: datetime, end: datetime) -> tuple[dict[int, np.ndarray], int]:
    """Ground truth: each statement's figures over the snapshots taken in [start, end), from the raw blocks."""
    rows = raw_rows(server_id, start, end)
    sums: dict[int, np.ndarray] = {}
    for _, _, figures in rows:
        for sid, values in figures.items():
            sums[sid] = sums.get(sid, np.zeros(len(TOTAL_NAMES), np.int64)) + values
    return {k: v for k, v in sums.items() if v.any()}, len(rows)


def figures(row) -> np.ndarray:
    """A selector's StatementTotals as the TOTAL_NAMES figures (integers, as stored)."""
    return np.array(
        [
            row.calls,
            row.plans or 0,
            round(row.exec_ms * 1000),
            round((row.plan_ms or 0) * 1000),
            row.rows,
            row.shared_blks_hit,
            row.shared_blks_read,
            row.temp_blks,
            round(row.io_ms * 1000),
            row.wal_bytes,
        ],
        np.int64,
    )
