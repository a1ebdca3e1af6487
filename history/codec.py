"""Compact encoding of one interval's statement deltas (or a rollup bucket) into a bytea.

A history row holds the deltas of every statement that changed in one interval, column by
column: statement ids as sorted gaps, each counter column packed at the narrowest byte width
that holds its largest value (0 bytes when the column is all zero, which most are), the
observed min/max times only where they changed. zlib finishes the job. This is what keeps a
busy 5,000-entry server near 10 MB of raw history a day instead of hundreds.

Stored history outlives the column set: a block's header carries its layout version, and
LAYOUTS names the counters of each version, so a block written before a counter existed reads
back with that counter at 0 (what an extension without the column reports), and a counter that
was dropped since is ignored. A new counter means a new layout version here, never a rewrite.
"""

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES

# Layout version -> the counter columns of a block of that version, in stored order. Version 1 is
# frozen: it is what every block written so far uses. Add a version, never edit one.
LAYOUTS: dict[int, tuple[str, ...]] = {
    1: (
        "calls",
        "plans",
        "total_exec_us",
        "total_plan_us",
        "rows",
        "shared_blks_hit",
        "shared_blks_read",
        "shared_blks_dirtied",
        "shared_blks_written",
        "local_blks_hit",
        "local_blks_read",
        "local_blks_dirtied",
        "local_blks_written",
        "temp_blks_read",
        "temp_blks_written",
        "shared_blk_read_us",
        "shared_blk_write_us",
        "local_blk_read_us",
        "local_blk_write_us",
        "temp_blk_read_us",
        "temp_blk_write_us",
        "wal_records",
        "wal_fpi",
        "wal_bytes",
        "wal_buffers_full",
        "jit_functions",
        "jit_generation_us",
        "jit_inlining_count",
        "jit_inlining_us",
        "jit_optimization_count",
        "jit_optimization_us",
        "jit_emission_count",
        "jit_emission_us",
        "jit_deform_count",
        "jit_deform_us",
        "parallel_workers_to_launch",
        "parallel_workers_launched",
    ),
}
FORMAT_VERSION = max(LAYOUTS)
_HEADER = struct.Struct("<BIHH")  # version, rows, counter columns, gauge columns
_WIDTHS = ((0, None), (1, "<u1"), (2, "<u2"), (4, "<u4"), (8, "<i8"))


class CodecError(Exception):
    pass


@dataclass
class Block:
    """Deltas of many statements: the unit stored per interval and per rollup bucket."""

    statement_id: np.ndarray  # (n,) int64, strictly increasing
    counters: np.ndarray  # (n, len(COUNTER_NAMES)) int64, non-negative
    gauges: np.ndarray  # (n, len(FACT_GAUGE_NAMES)) float64, NaN = not observed / unchanged

    def __len__(self) -> int:
        return int(self.statement_id.shape[0])

    @classmethod
    def empty(cls) -> "Block":
        return cls(
            np.empty(0, np.int64),
            np.empty((0, len(COUNTER_NAMES)), np.int64),
            np.empty((0, len(FACT_GAUGE_NAMES)), np.float64),
        )


def _pack_column(values: np.ndarray, out: list[bytes]) -> None:
    top = int(values.max()) if values.size else 0
    if values.size and int(values.min()) < 0:
        raise CodecError("negative value in a delta column")
    for code, (width, dtype) in enumerate(_WIDTHS):
        if width == 0 and top == 0:
            out.append(bytes([code]))
            return
        if width and (width == 8 or top < (1 << (8 * width))):
            out.append(bytes([code]))
            out.append(values.astype(dtype).tobytes())
            return


def encode(block: Block, *, version: int = FORMAT_VERSION) -> bytes:
    """The stored form of a block (always the current layout; `version` exists for tests of old blocks)."""
    layout = LAYOUTS[version]
    if version != FORMAT_VERSION:
        block = Block(block.statement_id, _reorder(block.counters, COUNTER_NAMES, layout), block.gauges)
    n = len(block)
    ids = block.statement_id
    if n and (np.diff(ids) <= 0).any():
        raise CodecError("statement ids must be strictly increasing")
    parts = [_HEADER.pack(version, n, block.counters.shape[1], block.gauges.shape[1])]
    if n:
        gaps = np.empty(n, np.int64)
        gaps[0] = ids[0]
        gaps[1:] = np.diff(ids)
        _pack_column(gaps, parts)
        counters = np.ascontiguousarray(block.counters.T)
        for col in counters:
            _pack_column(col, parts)
        present = ~np.isnan(block.gauges)
        for j in range(block.gauges.shape[1]):
            mask = present[:, j]
            parts.append(np.packbits(mask).tobytes())
            parts.append(block.gauges[mask, j].astype("<f8").tobytes())
    return zlib.compress(b"".join(parts), 6)


def _unpack_column(buf: memoryview, pos: int, n: int) -> tuple[np.ndarray, int]:
    width, dtype = _WIDTHS[buf[pos]]
    pos += 1
    if width == 0:
        return np.zeros(n, np.int64), pos
    end = pos + width * n
    return np.frombuffer(buf[pos:end], dtype=dtype).astype(np.int64), end


def _reorder(counters: np.ndarray, have: tuple[str, ...], want: tuple[str, ...]) -> np.ndarray:
    """Counter columns named `have` rearranged as `want`; a column `have` lacks is 0."""
    out = np.zeros((counters.shape[0], len(want)), np.int64)
    where = {name: j for j, name in enumerate(have)}
    for j, name in enumerate(want):
        if name in where:
            out[:, j] = counters[:, where[name]]
    return out


def decode(payload: bytes) -> Block:
    """A block in today's column layout, whatever layout version it was written with."""
    raw = memoryview(zlib.decompress(payload))
    version, n, n_counters, n_gauges = _HEADER.unpack_from(raw, 0)
    layout = LAYOUTS.get(version)
    if layout is None or n_counters != len(layout) or n_gauges != len(FACT_GAUGE_NAMES):
        raise CodecError(f"unknown block layout v{version} ({n_counters}/{n_gauges} columns)")
    if n == 0:
        return Block.empty()
    pos = _HEADER.size
    gaps, pos = _unpack_column(raw, pos, n)
    ids = np.cumsum(gaps)
    counters = np.empty((n, n_counters), np.int64)
    for j in range(n_counters):
        counters[:, j], pos = _unpack_column(raw, pos, n)
    gauges = np.full((n, n_gauges), np.nan)
    mask_len = (n + 7) // 8
    for j in range(n_gauges):
        mask = np.unpackbits(np.frombuffer(raw[pos : pos + mask_len], np.uint8), count=n).astype(bool)
        pos += mask_len
        k = int(mask.sum())
        gauges[mask, j] = np.frombuffer(raw[pos : pos + 8 * k], "<f8")
        pos += 8 * k
    if layout != COUNTER_NAMES:
        counters = _reorder(counters, layout, COUNTER_NAMES)
    return Block(ids, counters, gauges)


def decode_sums(payload: bytes, sums: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(statement ids, (n, len(sums)) int64): each output column the sum of the named counters, read
    straight from the stored columns; the others (and the gauges) are skipped, not unpacked. The read
    tier's edges decode many blocks for a few figures: this is their fast path."""
    raw = memoryview(zlib.decompress(payload))
    version, n, n_counters, n_gauges = _HEADER.unpack_from(raw, 0)
    layout = LAYOUTS.get(version)
    if layout is None or n_counters != len(layout) or n_gauges != len(FACT_GAUGE_NAMES):
        raise CodecError(f"unknown block layout v{version} ({n_counters}/{n_gauges} columns)")
    out = np.zeros((n, len(sums)), np.int64)
    if n == 0:
        return np.empty(0, np.int64), out
    targets: dict[str, list[int]] = {}
    for j, (_, sources) in enumerate(sums):
        for name in sources:
            targets.setdefault(name, []).append(j)
    pos = _HEADER.size
    gaps, pos = _unpack_column(raw, pos, n)
    for name in layout:
        width, dtype = _WIDTHS[raw[pos]]
        pos += 1
        if width and name in targets:
            values = np.frombuffer(raw[pos : pos + width * n], dtype=dtype)
            for j in targets[name]:
                out[:, j] += values
        pos += width * n
    return np.cumsum(gaps), out
