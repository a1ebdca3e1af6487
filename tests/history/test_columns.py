"""history.columns: the figures the history stores, and the read tier's totals summed from the counters (read bit
by bit)."""

import numpy as np

from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES, GAUGE_NAMES, TOTALS, totals_of


def test_each_total_sums_exactly_its_counters():
    # Counter j holds 2**j: the bits of a total name the counters it summed, each once.
    counters = np.array([[1 << j for j in range(len(COUNTER_NAMES))]] * 2, np.int64)
    counters[1] *= 3  # and it is a sum per row
    totals = totals_of(counters)
    assert totals.shape == (2, len(TOTALS)) and (totals[1] == 3 * totals[0]).all()
    for (name, sources), total in zip(TOTALS, totals[0], strict=True):
        summed = {COUNTER_NAMES[j] for j in range(len(COUNTER_NAMES)) if int(total) >> j & 1}
        assert summed == set(sources), name
    assert totals_of(np.zeros((0, len(COUNTER_NAMES)), np.int64)).shape == (0, len(TOTALS))


def test_gauges_are_named_by_their_unit_and_the_facts_are_gauges():
    assert all(name.endswith("_ms") for name in GAUGE_NAMES) and set(FACT_GAUGE_NAMES) <= set(GAUGE_NAMES)
    assert len(set(COUNTER_NAMES)) == len(COUNTER_NAMES)
