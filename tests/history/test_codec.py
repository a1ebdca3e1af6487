"""The history block codec round-trips exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from history import codec
from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES

NC, NG = len(COUNTER_NAMES), len(FACT_GAUGE_NAMES)


@st.composite
def blocks(draw, max_rows=40, top=2**62):
    ids = draw(st.lists(st.integers(1, 2**40), unique=True, max_size=max_rows))
    ids = np.array(sorted(ids), np.int64)
    n = len(ids)
    counters = draw(hnp.arrays(np.int64, (n, NC), elements=st.one_of(st.just(0), st.integers(0, top))))
    gauges = draw(hnp.arrays(np.float64, (n, NG), elements=st.one_of(st.just(np.nan), st.floats(0, 1e9))))
    return codec.Block(ids, counters, gauges)


@settings(max_examples=200, deadline=None)
@given(blocks())
def test_round_trip_is_exact(block):
    back = codec.decode(codec.encode(block))
    assert back.statement_id.tolist() == block.statement_id.tolist()
    assert np.array_equal(back.counters, block.counters)
    assert np.array_equal(back.gauges, block.gauges, equal_nan=True)


def test_refuses_negative_deltas_and_unsorted_ids():
    c = np.zeros((2, NC), np.int64)
    g = np.full((2, NG), np.nan)
    with pytest.raises(codec.CodecError):
        codec.encode(codec.Block(np.array([2, 1]), c, g))
    c[0, 0] = -1
    with pytest.raises(codec.CodecError):
        codec.encode(codec.Block(np.array([1, 2]), c, g))


def test_mostly_zero_columns_cost_almost_nothing():
    n = 500
    c = np.zeros((n, NC), np.int64)
    c[:, 0] = np.arange(n) % 50
    block = codec.Block(np.arange(1, n + 1, dtype=np.int64) * 3, c, np.full((n, NG), np.nan))
    assert len(codec.encode(block)) < 400


def test_a_block_written_before_a_counter_existed_still_reads(monkeypatch):
    """History addresses counters by layout version: an older layout lacking today's
    wal_buffers_full reads back with that counter at 0 and every other column in place."""
    older = tuple(c for c in codec.LAYOUTS[1] if c != "wal_buffers_full")
    monkeypatch.setitem(codec.LAYOUTS, 200, older)
    rng = np.random.default_rng(3)
    counters = rng.integers(0, 10**9, size=(5, NC))
    block = codec.Block(np.array([3, 9, 10, 40, 41]), counters, np.full((5, NG), np.nan))
    payload = codec.encode(block, version=200)
    back = codec.decode(payload)
    j = COUNTER_NAMES.index("wal_buffers_full")
    assert back.counters[:, j].tolist() == [0] * 5
    others = [i for i in range(NC) if i != j]
    assert np.array_equal(back.counters[:, others], counters[:, others])
    # The stored block really has one column fewer than today's layout.
    import struct
    import zlib

    version, _, n_counters, _ = struct.unpack_from("<BIHH", zlib.decompress(payload), 0)
    assert (version, n_counters) == (200, NC - 1)


def test_a_counter_dropped_since_is_ignored_and_unknown_layouts_fail_clearly(monkeypatch):
    newer = (*codec.LAYOUTS[1], "generic_plan_calls")
    monkeypatch.setitem(codec.LAYOUTS, 201, newer)
    block = codec.Block(np.array([1, 2]), np.arange(2 * NC).reshape(2, NC), np.full((2, NG), np.nan))
    payload = codec.encode(block, version=201)
    assert np.array_equal(codec.decode(payload).counters, block.counters)
    monkeypatch.delitem(codec.LAYOUTS, 201)
    with pytest.raises(codec.CodecError, match="unknown block layout v201"):
        codec.decode(payload)


@settings(max_examples=100, deadline=None)
@given(blocks(top=2**40))
def test_decode_sums_reads_the_same_figures_as_a_full_decode(block):
    from history.columns import TOTALS, totals_of

    ids, sums = codec.decode_sums(codec.encode(block), TOTALS)
    assert ids.tolist() == block.statement_id.tolist()
    assert np.array_equal(sums, totals_of(block.counters))
