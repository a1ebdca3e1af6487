"""history.entries: the statements' state as the history store keeps it and reads it back, row for row."""

import numpy as np
import pytest

from history.entries import N_COUNTERS, N_GAUGES, Entries
from history.store import load_statement_state, write_statement_state

SERVER_ID = 990_012


def _entries(n: int) -> Entries:
    rng = np.random.default_rng(5)
    return Entries(
        keys=np.column_stack([np.full(n, 10), np.full(n, 20), rng.integers(-(2**62), 2**62, n), np.ones(n)]).astype(
            np.int64
        ),
        counters=rng.integers(0, 2**40, (n, N_COUNTERS)).astype(np.int64),
        gauges=rng.random((n, N_GAUGES)),
        stats_since_us=rng.integers(0, 2**50, n).astype(np.int64),
        minmax_stats_since_us=rng.integers(0, 2**50, n).astype(np.int64),
        statement_id=np.arange(1, n + 1, dtype=np.int64),
    )


def test_taken_rows_keep_every_column_aligned():
    entries = _entries(5)
    taken = entries.take(np.array([3, 1]))
    assert len(taken) == 2
    assert taken.keys.tolist() == entries.keys[[3, 1]].tolist()
    assert taken.counters.tolist() == entries.counters[[3, 1]].tolist()
    assert taken.statement_id.tolist() == [4, 2]
    assert Entries(**{**vars(entries), "statement_id": None}).take(np.array([0])).statement_id is None


def test_the_empty_state_has_the_canonical_widths():
    empty = Entries.empty()
    assert len(empty) == 0
    assert (
        empty.keys.shape == (0, 4) and empty.counters.shape == (0, N_COUNTERS) and empty.gauges.shape == (0, N_GAUGES)
    )


@pytest.mark.django_db
def test_the_state_written_is_the_state_read_back():
    entries = _entries(50)
    write_statement_state(SERVER_ID, entries, np.empty(0, np.int64), taken_at=None)
    back = load_statement_state(SERVER_ID)
    order = np.argsort(back.statement_id)
    assert back.statement_id[order].tolist() == entries.statement_id.tolist()
    for name in ("keys", "counters", "gauges", "stats_since_us", "minmax_stats_since_us"):
        assert np.array_equal(getattr(back, name)[order], getattr(entries, name)), name
