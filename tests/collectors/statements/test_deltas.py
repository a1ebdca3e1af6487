"""Property tests of the delta engine over random histories of a simulated pg_stat_statements:
executions, new entries, evictions, resets of one entry, full resets and gaps between snapshots."""

from dataclasses import dataclass, field

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from collectors.statements.deltas import compute, match_keys, merge_changed, restarted_rows
from history.columns import COUNTER_NAMES
from history.entries import N_COUNTERS, N_GAUGES, Entries

# Few keys, so that the same key is executed, reset, evicted and re-created often.
KEYS = [(10, 5, -(2**62), 0), (10, 5, -(2**62), 1), (2**32 - 1, 5, 8, 1)]


@dataclass
class Incarnation:
    serial: int
    counters: np.ndarray
    since_us: int


@dataclass
class Sim:
    """A pg_stat_statements whose every change we know: the ground truth."""

    has_stats_since: bool
    live: dict = field(default_factory=dict)  # key -> Incarnation
    serial: int = 0
    clock_us: int = 1_000_000
    full_reset_pending: bool = False

    def execute(self, key, amounts):
        inc = self.live.get(key)
        if inc is None:
            self.serial += 1
            inc = self.live[key] = Incarnation(self.serial, np.zeros(N_COUNTERS, np.int64), self.clock_us)
        inc.counters += amounts

    def apply(self, op) -> bool:
        """Apply one operation of `ops`; True when it is a snapshot (then read self.snapshot())."""
        kind = op[0]
        self.clock_us += 1
        if kind == "exec":
            self.execute(op[1], _amounts(op[2]))
        elif kind in ("evict", "reset_one"):
            self.live.pop(op[1], None)
        elif kind == "reset_all":
            self.live.clear()
            self.full_reset_pending = True
        else:
            self.clock_us += op[1]  # the gap before this snapshot
            return True
        return False

    def snapshot(self) -> Entries:
        keys = sorted(self.live)
        n = len(keys)
        entries = Entries(
            keys=np.array(keys, np.int64).reshape(n, 4),
            counters=np.array([self.live[k].counters for k in keys], np.int64).reshape(n, N_COUNTERS),
            gauges=np.full((n, N_GAUGES), 1.5),
            stats_since_us=np.array([self.live[k].since_us if self.has_stats_since else 0 for k in keys], np.int64),
            minmax_stats_since_us=np.zeros(n, np.int64),
        )
        serials = {k: self.live[k].serial for k in keys}
        return entries, serials


ops = st.lists(
    st.one_of(
        st.tuples(st.just("exec"), st.sampled_from(KEYS), st.lists(st.integers(0, 10**6), min_size=3, max_size=3)),
        st.tuples(st.sampled_from(["evict", "reset_one"]), st.sampled_from(KEYS)),
        st.tuples(st.just("reset_all")),
        st.tuples(st.just("snapshot"), st.integers(1, 10**9)),
    ),
    max_size=80,
)


def _amounts(values):
    a = np.zeros(N_COUNTERS, np.int64)
    a[0] = 1 + values[0] % 3  # calls
    a[2] = values[1]  # exec µs
    a[4] = values[2] % 10**6  # rows
    return a


K = KEYS[0]


@settings(max_examples=500, deadline=None)
@given(has_stats_since=st.booleans(), operations=ops)
# The cases each rule exists for, always run whatever the random draw finds:
# stats_since moved (17+), with counters equal to before
@example(True, [("exec", K, [0, 0, 0]), ("snapshot", 1), ("evict", K), ("exec", K, [0, 0, 0])])
# full reset (stats_reset moved, 14+), re-created with more calls than before
@example(False, [("exec", K, [0, 0, 0]), ("snapshot", 1), ("reset_all",), ("exec", K, [2, 0, 0])])
# only a column other than calls went backwards
@example(False, [("exec", K, [0, 10**6, 0]), ("snapshot", 1), ("reset_one", K), ("exec", K, [0, 5, 0])])
# an undetectable re-creation (before 17), then an ordinary interval on the same key
@example(
    False,
    [("exec", K, [0, 0, 0])] * 9
    + [
        ("exec", KEYS[1], [0, 0, 0]),
        ("snapshot", 1),
        ("evict", KEYS[1]),
        ("exec", KEYS[1], [0, 0, 0]),
        ("snapshot", 1),
        ("exec", KEYS[1], [0, 0, 0]),
    ],
)
# gone before the snapshot, back after it: a new key
@example(False, [("exec", K, [2, 9, 9]), ("snapshot", 1), ("evict", K), ("snapshot", 5), ("exec", K, [0, 0, 0])])
def test_deltas_are_exact_and_never_negative(has_stats_since, operations):
    sim = Sim(has_stats_since)
    prev, prev_serials = None, {}
    since_birth: dict[tuple, np.ndarray] = {}  # sum of stored deltas per incarnation serial
    observed: dict[int, np.ndarray] = {}  # last observed cumulative per incarnation serial
    first_seen_at_baseline: dict[int, np.ndarray] = {}
    ambiguous: set[int] = set()
    for op in [*operations, ("snapshot", 1)]:
        if not sim.apply(op):
            continue
        cur, serials = sim.snapshot()
        if prev is None:
            for k, s in serials.items():
                first_seen_at_baseline[s] = sim.live[k].counters.copy()
                observed[s] = sim.live[k].counters.copy()
        else:
            d = compute(prev, cur, full_reset=sim.full_reset_pending)
            assert (d.deltas >= 0).all()
            # A collection hands in the matches and restarts it computed first (to choose texts): the same result,
            # and its array is left as it was (a full reset marks every row restarted in compute's copy).
            prev_index = match_keys(prev.keys, cur.keys)
            restarted = restarted_rows(prev, cur, prev_index)
            before = restarted.copy()
            given = compute(prev, cur, full_reset=sim.full_reset_pending, prev_index=prev_index, restarted=restarted)
            for name in ("prev_index", "restarted", "deltas", "changed", "state_dirty", "gone"):
                assert np.array_equal(getattr(given, name), getattr(d, name)), name
            assert np.array_equal(given.fact_gauges, d.fact_gauges, equal_nan=True)
            assert np.array_equal(restarted, before)
            for i, key in enumerate(map(tuple, cur.keys.tolist())):
                s = serials[key]
                old = prev_serials.get(key)
                if (
                    old is not None
                    and old != s
                    and not sim.has_stats_since
                    and not sim.full_reset_pending
                    and (cur.counters[i] >= prev.counters[d.prev_index[i]]).all()
                ):
                    # Before 17, an entry evicted or reset and re-created inside one interval with
                    # no counter smaller than before cannot be told from the old one (documented).
                    ambiguous.update((s, old))
                    observed[s] = sim.live[key].counters.copy()  # the engine's next "before"
                    continue
                truth = sim.live[key].counters - (observed[s] if s in observed else 0)
                assert (d.deltas[i] == truth).all(), (key, d.deltas[i], truth)
                assert d.restarted[i] == (prev_serials.get(key) != s)
                since_birth[s] = since_birth.get(s, 0) + d.deltas[i]
                observed[s] = sim.live[key].counters.copy()
            gone_keys = {tuple(k) for k in prev.keys[d.gone].tolist()}
            assert gone_keys == set(prev_serials) - set(serials)
        prev, prev_serials = cur, serials
        sim.full_reset_pending = False
    # Sums match: what was stored for an incarnation is all it did after the baseline saw it.
    for s, total in since_birth.items():
        if s in ambiguous:
            continue
        assert (total == observed[s] - first_seen_at_baseline.get(s, 0)).all()


_COMPARED = [COUNTER_NAMES.index(c) for c in ("calls", "plans", "total_exec_us")]


def _server_sends(prev: Entries, cur: Entries):
    """A numpy model of what pgss.read_entries' query sends back (tests/collectors/test_changed_only.py
    checks the query itself against full readings on real servers)."""
    idx = match_keys(prev.keys, cur.keys)
    matched = idx >= 0
    p = np.where(matched, idx, 0)
    differs = ~matched
    if len(prev):
        differs |= (cur.counters[:, _COMPARED] != prev.counters[p][:, _COMPARED]).any(axis=1)
        differs |= cur.stats_since_us != prev.stats_since_us[p]
        differs |= cur.minmax_stats_since_us != prev.minmax_stats_since_us[p]
    seen = np.zeros(len(prev), bool)
    seen[idx[matched]] = True
    return cur.take(np.flatnonzero(differs)), idx[differs], np.flatnonzero(~seen)


@settings(max_examples=300, deadline=None)
@given(has_stats_since=st.booleans(), operations=ops)
# re-created before 17 with the same calls and execution time but fewer rows: the documented blind spot
@example(False, [("exec", K, [0, 0, 5]), ("snapshot", 1), ("evict", K), ("exec", K, [0, 0, 0])])
# the same on 17+: stats_since moved, so the entry is sent
@example(True, [("exec", K, [0, 0, 5]), ("snapshot", 1), ("evict", K), ("exec", K, [0, 0, 0])])
# gone, and a full reset
@example(
    False,
    [
        ("exec", K, [1, 2, 3]),
        ("exec", KEYS[1], [0, 0, 0]),
        ("snapshot", 1),
        ("evict", K),
        ("snapshot", 1),
        ("reset_all",),
        ("exec", KEYS[1], [0, 0, 0]),
    ],
)
def test_changed_entries_merged_with_the_state_give_the_same_deltas(has_stats_since, operations):
    """Reading only new and changed entries and merging them with the state gives the deltas a full
    reading gives, except for an entry re-created before 17 with calls, plans and execution time
    all equal to the old one's (documented in pgss._prev_columns)."""
    sim = Sim(has_stats_since)
    prev, prev_serials = Entries.empty(), {}
    for op in [*operations, ("snapshot", 1)]:
        if not sim.apply(op):
            continue
        cur, serials = sim.snapshot()
        full = compute(prev, cur, full_reset=sim.full_reset_pending)
        # After a full reset the collector sends an empty state: the server sends everything.
        sent_to = Entries.empty() if sim.full_reset_pending else prev
        merged, prev_index = merge_changed(sent_to, *_server_sends(sent_to, cur))
        if sim.full_reset_pending:
            prev_index = match_keys(prev.keys, merged.keys)
        part = compute(prev, merged, full_reset=sim.full_reset_pending, prev_index=prev_index)
        assert len(merged) == len(cur)
        assert {tuple(k) for k in prev.keys[part.gone].tolist()} == {tuple(k) for k in prev.keys[full.gone].tolist()}
        row = {tuple(k): i for i, k in enumerate(merged.keys.tolist())}
        for i, key in enumerate(map(tuple, cur.keys.tolist())):
            j = row[key]
            same = (
                (part.deltas[j] == full.deltas[i]).all()
                and part.changed[j] == full.changed[i]
                and part.restarted[j] == full.restarted[i]
                and (merged.counters[j] == cur.counters[i]).all()
            )
            if not same:
                k = full.prev_index[i]
                blind_spot = (
                    not has_stats_since
                    and k >= 0
                    and prev_serials.get(key) != serials[key]
                    and (cur.counters[i, _COMPARED] == prev.counters[k, _COMPARED]).all()
                )
                assert blind_spot, (key, part.deltas[j], full.deltas[i])
        prev, prev_serials = cur, serials  # the full reading goes on: each step is compared alone
        sim.full_reset_pending = False


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(0, 1)
        ),
        unique=True,
        max_size=50,
    ),
    st.data(),
)
def test_match_keys_finds_exactly_the_same_keys(prev_keys, data):
    cur_keys = data.draw(st.lists(st.sampled_from(prev_keys), unique=True) if prev_keys else st.just([]))
    extra = (7, 7, 7, 1)
    cur = np.array([*cur_keys, extra] if extra not in prev_keys else cur_keys, np.int64).reshape(-1, 4)
    prev = np.array(prev_keys, np.int64).reshape(-1, 4)
    idx = match_keys(prev, cur)
    for i, k in enumerate(cur.tolist()):
        if tuple(k) in prev_keys:
            assert prev[idx[i]].tolist() == k
        else:
            assert idx[i] == -1


def test_min_max_are_kept_only_when_they_change():
    keys = np.array([[1, 1, 1, 1], [1, 1, 2, 1]], np.int64)
    counters = np.zeros((2, N_COUNTERS), np.int64)
    gauges = np.full((2, N_GAUGES), 2.0)
    prev = Entries(keys, counters.copy(), gauges.copy(), np.zeros(2, np.int64), np.zeros(2, np.int64), np.array([1, 2]))
    counters[:, 0] = 5
    gauges[1, 4] = 9.0  # max_exec_ms of the second entry moved
    cur = Entries(keys, counters, gauges, np.zeros(2, np.int64), np.zeros(2, np.int64))
    d = compute(prev, cur, full_reset=False)
    assert np.isnan(d.fact_gauges[0]).all()
    assert d.fact_gauges[1].tolist()[3] == 9.0 and np.isnan(d.fact_gauges[1][:3]).all()
