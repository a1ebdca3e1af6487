"""bench/baseline.py: the pre-tier read path the read tier's benchmark compares with merges blocks like a sum
(its merge is also the ground truth of the legacy rollups' conversion, tests/history/test_backfill.py)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.baseline import merge
from history.columns import FACT_GAUGE_NAMES
from tests.history.test_codec import NC, blocks


@settings(max_examples=100, deadline=None)
@given(st.lists(blocks(max_rows=15, top=2**50), max_size=5))
def test_merge_sums_counters_and_keeps_extremes(parts):
    merged = merge(parts)
    for sid, row in zip(merged.statement_id.tolist(), merged.counters, strict=True):
        expected = sum((b.counters[b.statement_id == sid].sum(axis=0) for b in parts), np.zeros(NC, np.int64))
        assert (row == expected).all()
    total = sum(int(b.counters.sum()) for b in parts) if parts else 0
    assert int(merged.counters.sum()) == total
    j = FACT_GAUGE_NAMES.index("max_exec_ms")
    for sid, value in zip(merged.statement_id.tolist(), merged.gauges[:, j], strict=True):
        seen = [v for b in parts for v in b.gauges[b.statement_id == sid, j] if not np.isnan(v)]
        assert (np.isnan(value) and not seen) or value == max(seen)
