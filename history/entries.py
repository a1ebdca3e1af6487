"""The statements' state as the history store keeps it (collectors_statement_state) and the statements reading
reads it: pg_stat_statements entries in canonical form, one row per key. What the reading hands the writer, and
the previous state it compares with (collectors/statements/deltas.py holds the rules)."""

from dataclasses import dataclass

import numpy as np

from history.columns import COUNTER_NAMES, GAUGE_NAMES

N_COUNTERS = len(COUNTER_NAMES)
N_GAUGES = len(GAUGE_NAMES)


@dataclass
class Entries:
    """A set of pg_stat_statements entries in canonical form (one row per key)."""

    keys: np.ndarray  # (n, 4) int64: userid, dbid, queryid, toplevel
    counters: np.ndarray  # (n, N_COUNTERS) int64, cumulative
    gauges: np.ndarray  # (n, N_GAUGES) float64, observed
    stats_since_us: np.ndarray  # (n,) int64, 0 where the version has none
    minmax_stats_since_us: np.ndarray  # (n,) int64
    statement_id: np.ndarray | None = None  # (n,) int64 once known

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def take(self, index: np.ndarray) -> "Entries":
        return Entries(
            keys=self.keys[index],
            counters=self.counters[index],
            gauges=self.gauges[index],
            stats_since_us=self.stats_since_us[index],
            minmax_stats_since_us=self.minmax_stats_since_us[index],
            statement_id=None if self.statement_id is None else self.statement_id[index],
        )

    @classmethod
    def empty(cls) -> "Entries":
        return cls(
            keys=np.empty((0, 4), np.int64),
            counters=np.empty((0, N_COUNTERS), np.int64),
            gauges=np.empty((0, N_GAUGES), np.float64),
            stats_since_us=np.empty(0, np.int64),
            minmax_stats_since_us=np.empty(0, np.int64),
            statement_id=np.empty(0, np.int64),
        )
