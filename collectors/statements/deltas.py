"""The delta engine: cumulative pg_stat_statements readings in, exact per-interval deltas out.

Pure numpy, no I/O, so the rules in DESIGN.md can be tested exhaustively:
- key present before and now, no counter smaller, same stats_since, no full reset: delta = now - before;
- key new, a counter went backwards, stats_since changed (17+) or a full reset happened:
  the entry restarted inside the interval, delta = now;
- key gone: evicted or reset; nothing to record, and it leaves the state.
"""

from dataclasses import dataclass

import numpy as np

from history.public import FACT_GAUGE_NAMES, GAUGE_NAMES, Entries

_FACT_GAUGE_IDX = [GAUGE_NAMES.index(g) for g in FACT_GAUGE_NAMES]


@dataclass
class DeltaResult:
    prev_index: np.ndarray  # (n_cur,) index into prev, -1 for new keys
    restarted: np.ndarray  # (n_cur,) bool: counted from zero in this interval
    deltas: np.ndarray  # (n_cur, N_COUNTERS) int64, never negative
    changed: np.ndarray  # (n_cur,) bool: some counter moved -> a fact row
    fact_gauges: np.ndarray  # (n_cur, len(FACT_GAUGE_NAMES)) float64, NaN where unchanged
    state_dirty: np.ndarray  # (n_cur,) bool: the stored state must be rewritten
    gone: np.ndarray  # indexes into prev of keys no longer present

    @property
    def new(self) -> np.ndarray:
        return self.prev_index < 0


def key_view(keys: np.ndarray) -> np.ndarray:
    """One opaque, sortable value per (userid, dbid, queryid, toplevel) row."""
    return np.ascontiguousarray(keys, dtype=np.int64).view("V32").ravel()


def match_keys(prev_keys: np.ndarray, cur_keys: np.ndarray) -> np.ndarray:
    """For each current key, its row in prev, or -1."""
    if len(prev_keys) == 0:
        return np.full(len(cur_keys), -1, np.int64)
    pv = key_view(prev_keys)
    order = np.argsort(pv, kind="stable")
    sorted_pv = pv[order]
    cv = key_view(cur_keys)
    pos = np.searchsorted(sorted_pv, cv)
    pos_clipped = np.minimum(pos, len(sorted_pv) - 1)
    found = sorted_pv[pos_clipped] == cv
    return np.where(found, order[pos_clipped], -1).astype(np.int64)


def concat(a: Entries, b: Entries) -> Entries:
    """Rows of a then rows of b (statement ids are not carried: they are assigned per snapshot)."""
    return Entries(
        keys=np.concatenate([a.keys, b.keys]),
        counters=np.concatenate([a.counters, b.counters]),
        gauges=np.concatenate([a.gauges, b.gauges]),
        stats_since_us=np.concatenate([a.stats_since_us, b.stats_since_us]),
        minmax_stats_since_us=np.concatenate([a.minmax_stats_since_us, b.minmax_stats_since_us]),
    )


def merge_changed(
    prev: Entries, changed: Entries, changed_prev_index: np.ndarray, gone: np.ndarray
) -> tuple[Entries, np.ndarray]:
    """The full current entries, from the previous ones and what the monitored server sent back:
    the entries that are new or changed (changed_prev_index: their row in prev, -1 for new) and
    the rows of prev that are gone. Every other row of prev is present and unchanged.

    Returns (current entries, for each current row its row in prev or -1), ready for compute()."""
    keep = np.ones(len(prev), bool)
    keep[gone] = False
    keep[changed_prev_index[changed_prev_index >= 0]] = False
    kept = np.flatnonzero(keep)
    return concat(prev.take(kept), changed), np.concatenate([kept, changed_prev_index]).astype(np.int64)


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise inequality where NaN equals NaN."""
    return ~((a == b) | (np.isnan(a) & np.isnan(b)))


def restarted_rows(prev: Entries, cur: Entries, prev_index: np.ndarray) -> np.ndarray:
    """Which current entries count from zero again (compute's `restarted`, without a full reset): keys not in
    `prev`, counters that went back (evicted and re-created), stats_since moved (reset alone, 17+)."""
    matched = prev_index >= 0
    if not len(prev):
        return ~matched | (cur.stats_since_us != 0)
    safe = np.where(matched, prev_index, 0)
    backwards = (cur.counters < prev.counters[safe]).any(axis=1)
    return ~matched | backwards | (prev.stats_since_us[safe] != cur.stats_since_us)


def compute(
    prev: Entries,
    cur: Entries,
    *,
    full_reset: bool,
    prev_index: np.ndarray | None = None,
    restarted: np.ndarray | None = None,
) -> DeltaResult:
    """Deltas of `cur` against `prev`. `prev_index` (match_keys) and `restarted` (restarted_rows) may come
    from the caller that already has them: a collection needs both before its deltas, to choose texts."""
    n = len(cur)
    if prev_index is None:
        prev_index = match_keys(prev.keys, cur.keys)
    matched = prev_index >= 0
    safe = np.where(matched, prev_index, 0)
    if len(prev):
        prev_counters = prev.counters[safe]
        prev_gauges = prev.gauges[safe]
        prev_minmax_since = prev.minmax_stats_since_us[safe]
    else:
        prev_counters = np.zeros_like(cur.counters)
        prev_gauges = np.full_like(cur.gauges, np.nan)
        prev_minmax_since = np.zeros(n, np.int64)

    deltas = cur.counters - prev_counters  # one pass; rows that restarted are replaced below
    moved = deltas.any(axis=1)
    restarted = restarted_rows(prev, cur, prev_index) if restarted is None else restarted.copy()
    if full_reset:
        restarted[:] = True
    deltas[restarted] = cur.counters[restarted]
    changed = moved.copy()
    changed[restarted] = cur.counters[restarted].any(axis=1)

    gauge_moved = _differs(cur.gauges, prev_gauges)
    fact_gauges = cur.gauges[:, _FACT_GAUGE_IDX].copy()
    keep = restarted[:, None] | gauge_moved[:, _FACT_GAUGE_IDX]
    fact_gauges[~keep] = np.nan

    state_dirty = restarted | moved | gauge_moved.any(axis=1) | (prev_minmax_since != cur.minmax_stats_since_us)
    seen = np.zeros(len(prev), bool)
    seen[prev_index[matched]] = True
    gone = np.flatnonzero(~seen)
    return DeltaResult(prev_index, restarted, deltas, changed, fact_gauges, state_dirty, gone)
