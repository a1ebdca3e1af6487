"""A fast writer of synthetic history, for the days of the read-tier benchmark that do not go through
server_collect: many snapshots' statement blocks encoded at once with numpy, rows written by COPY.

``encode_many`` produces exactly the bytes of ``codec.encode`` (checked on a sample of every batch:
a change of the block layout stops the run instead of writing blocks the reader cannot read); it
only removes the per-block Python overhead that makes codec.encode cost ~0.3 ms for a 50-row block.
Rows carry what ``store.insert_snapshot`` writes: the snapshot row's fields, the encoded block and
the server totals of the interval (``columns.totals_of`` summed over the block).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from collectors.waits import waits
from history import codec, partitions, store
from history.columns import TOTAL_NAMES, totals_of
from history.snapshot_facts import SNAPSHOT_FACTS, SnapshotFacts
from history.tables import TABLES

_WIDTHS = ((1, "<u1", 1), (2, "<u2", 2), (4, "<u4", 3), (8, "<i8", 4))  # width, dtype, code (codec._WIDTHS)
_HEADER = np.dtype([("version", "u1"), ("rows", "<u4"), ("counters", "<u2"), ("gauges", "<u2")])
CHECKED_PER_BATCH = 3
LARGE_BLOCK_ROWS = 200  # mean rows per block above which each block is encoded by codec.encode itself


def encode_many(ids: np.ndarray, counters: np.ndarray, gauges: np.ndarray, starts: np.ndarray) -> list[bytes]:
    """codec.encode of many blocks: block b is rows starts[b]:starts[b + 1] (ids strictly increasing in it)."""
    starts = np.asarray(starts, np.int64)
    n_blocks = len(starts) - 1
    if len(ids) > LARGE_BLOCK_ROWS * max(n_blocks, 1):  # codec.encode's per-column numpy wins on large blocks
        return [
            codec.encode(codec.Block(ids[a:b], counters[a:b], gauges[a:b]))
            for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True)
        ]
    n = np.diff(starts)
    block_of = np.repeat(np.arange(n_blocks), n)
    within = np.arange(len(ids)) - starts[block_of]
    gaps = np.empty(len(ids), np.int64)
    gaps[1:] = ids[1:] - ids[:-1]
    gaps[within == 0] = ids[within == 0]
    cols = np.column_stack([gaps, counters])
    if len(cols) and cols.min() < 0:
        raise codec.CodecError("negative value in a delta column")
    full = n > 0
    top = np.zeros((n_blocks, cols.shape[1]), np.int64)
    present = ~np.isnan(gauges)
    n_present = np.zeros((n_blocks, gauges.shape[1]), np.int64)
    if full.any():
        top[full] = np.maximum.reduceat(cols, starts[:-1][full], axis=0)
        n_present[full] = np.add.reduceat(present.astype(np.int64), starts[:-1][full], axis=0)
    width = np.zeros_like(top)
    code = np.zeros_like(top)
    done = top == 0  # an all-zero column is its code byte alone
    for w, _, c in _WIDTHS:  # the narrowest width that holds the column's largest value
        fits = ~done & (top < (1 << (8 * w)) if w < 8 else ~done)
        width[fits], code[fits] = w, c
        done |= fits
    mask_len = (n + 7) // 8
    col_len = np.where(full[:, None], 1 + n[:, None] * width, 0)
    gauge_len = np.where(full[:, None], mask_len[:, None] + 8 * n_present, 0)
    block_len = _HEADER.itemsize + col_len.sum(axis=1) + gauge_len.sum(axis=1)
    block_off = np.concatenate([[0], np.cumsum(block_len)])
    col_off = block_off[:-1, None] + _HEADER.itemsize + np.cumsum(col_len, axis=1) - col_len
    gauges_at = block_off[:-1, None] + _HEADER.itemsize + col_len.sum(axis=1)[:, None]
    gauge_off = gauges_at + np.cumsum(gauge_len, axis=1) - gauge_len

    out = np.zeros(int(block_off[-1]), np.uint8)
    header = np.zeros(n_blocks, _HEADER)
    header["version"], header["rows"] = codec.FORMAT_VERSION, n
    header["counters"], header["gauges"] = counters.shape[1], gauges.shape[1]
    out[block_off[:-1, None] + np.arange(_HEADER.itemsize)] = header.view(np.uint8).reshape(n_blocks, -1)
    out[col_off[full]] = code[full]
    live = np.flatnonzero(top.any(axis=0))  # most counters are zero throughout (no JIT, no planning...)
    row_width = width[:, live][block_of]
    for w, dtype, _ in _WIDTHS:
        r, k = np.nonzero(row_width == w)
        k = live[k]
        if len(r):
            pos = col_off[block_of[r], k] + 1 + within[r] * w
            out[pos[:, None] + np.arange(w)] = cols[r, k].astype(dtype).view(np.uint8).reshape(-1, w)
    for j in range(gauges.shape[1]):  # a bit mask of the rows present, then their values
        r = np.flatnonzero(present[:, j])
        if not len(r):
            continue
        b = block_of[r]
        np.add.at(out, gauge_off[b, j] + within[r] // 8, (1 << (7 - within[r] % 8)).astype(np.uint8))
        pos = gauge_off[b, j] + mask_len[b] + _rank_in_group(b) * 8
        out[pos[:, None] + np.arange(8)] = gauges[r, j].astype("<f8").view(np.uint8).reshape(-1, 8)
    view = memoryview(out)
    payloads = [zlib.compress(view[block_off[b] : block_off[b + 1]], 6) for b in range(n_blocks)]
    _check(payloads, ids, counters, gauges, starts)
    return payloads


def _rank_in_group(groups: np.ndarray) -> np.ndarray:
    """For a sorted array of group numbers: each element's position within its group."""
    first = np.r_[True, groups[1:] != groups[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(groups)), 0))
    return np.arange(len(groups)) - start


def _check(payloads: list[bytes], ids, counters, gauges, starts) -> None:
    picks = np.linspace(0, len(payloads) - 1, min(CHECKED_PER_BATCH, len(payloads))).astype(int)
    for b in np.unique(picks):
        s, e = starts[b], starts[b + 1]
        if payloads[b] != codec.encode(codec.Block(ids[s:e], counters[s:e], gauges[s:e])):
            raise RuntimeError("bench/bulk.py: encode_many no longer matches codec.encode (block layout changed?)")


# -- COPY ---------------------------------------------------------------------------------------

_VARIABLE = ("taken_at", "prev_taken_at", "changed", "statements", *TOTAL_NAMES)


def _text(value) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _iso(us: np.ndarray) -> list[str]:
    return [datetime.fromtimestamp(u / 1_000_000, UTC).isoformat() for u in us.tolist()]


@dataclass
class Interval:
    """What one server's delta snapshots have in common (the rest comes per snapshot)."""

    server_id: int
    entries: int
    interval_s: float = 60.0
    stats_reset_at: datetime | None = None


def snapshot_template(iv: Interval) -> str:
    """A COPY text line of collectors_snapshot with {placeholders} for the per-snapshot fields."""
    facts = SnapshotFacts(
        taken_at=None,
        prev_taken_at=None,
        interval_s=iv.interval_s,
        kind="delta",
        server_version_num=170010,
        extension_version="1.11",
        entries=iv.entries,
        entries_hidden=0,
        entries_max=10000,
        changed=0,
        new_entries=0,
        gone_entries=0,
        dealloc=0,
        dealloc_delta=0,
        stats_reset_at=iv.stats_reset_at,
        full_reset=False,
        track="top",
        track_utility=True,
        track_planning=False,
        save=True,
        sample_rate=None,
        waits_source="pg_stat_activity",
        waits_samples=10,
    )
    values = {"server_id": iv.server_id, **{name: getattr(facts, name) for name in SNAPSHOT_FACTS}}
    parts = []
    for name in store.SNAPSHOT_FIELDS:
        if name in _VARIABLE:
            parts.append("{" + name + "}")
        else:
            parts.append(_text(values[name]).replace("{", "{{").replace("}", "}}"))
    return "\t".join(parts) + "\n"


def snapshot_lines(
    template: str,
    taken_at_us: np.ndarray,
    interval_s: float,
    changed: np.ndarray,
    payloads: Sequence[bytes],
    totals: np.ndarray,
) -> str:
    """COPY text lines of delta snapshots (totals: (k, len(TOTAL_NAMES)) server totals per snapshot)."""
    taken = _iso(taken_at_us)
    prev = _iso(taken_at_us - int(interval_s * 1_000_000))
    lines = []
    for i, payload in enumerate(payloads):
        t = totals[i].tolist()
        lines.append(
            template.format(
                taken_at=taken[i],
                prev_taken_at=prev[i],
                changed=int(changed[i]),
                statements="\\\\x" + payload.hex(),
                **dict(zip(TOTAL_NAMES, t, strict=True)),
            )
        )
    return "".join(lines)


def ensure_partitions(table: str, taken_at_us) -> None:
    """The daily partitions these snapshot times fall in (server_collect creates them the same way)."""
    for day in sorted({int(u) // 86_400_000_000 for u in np.atleast_1d(taken_at_us)}):
        partitions.ensure(table, datetime.fromtimestamp(day * 86_400, UTC))


def copy_snapshots(text: str, taken_at_us) -> None:
    ensure_partitions(TABLES.SNAPSHOT.name, taken_at_us)
    cols = ", ".join(store.SNAPSHOT_FIELDS)
    with store.raw_cursor() as cur, cur.copy(f"COPY {TABLES.SNAPSHOT.name} ({cols}) FROM STDIN") as copy:
        copy.write(text.encode())


def wait_lines(server_id: int, taken_at_us: int, rows: list[waits.IntervalWait]) -> str:
    taken = datetime.fromtimestamp(taken_at_us / 1_000_000, UTC).isoformat()
    return "".join(
        f"{server_id}\t{taken}\t{_text(r.event_type)}\t{_text(r.event)}\t{_text(r.query_id)}\t{r.samples}\t"
        f"{r.session_s!r}\n"
        for r in rows
    )


def copy_waits(text: str, taken_at_us) -> None:
    if not text:
        return
    ensure_partitions(TABLES.WAIT_EVENT.name, taken_at_us)
    cols = "server_id, taken_at, event_type, event, query_id, samples, session_s"
    with store.raw_cursor() as cur, cur.copy(f"COPY {TABLES.WAIT_EVENT.name} ({cols}) FROM STDIN") as copy:
        copy.write(text.encode())


def block_totals(counters: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Server totals per block (the insert_snapshot columns): totals_of summed over each block's rows."""
    n_blocks = len(starts) - 1
    out = np.zeros((n_blocks, len(TOTAL_NAMES)), np.int64)
    full = np.diff(starts) > 0
    if full.any():
        out[full] = np.add.reduceat(totals_of(counters), np.asarray(starts)[:-1][full], axis=0)
    return out
