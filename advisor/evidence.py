"""Typed evidence the rules read: built from the selectors by advisor.gather for a server, by hand in the rules' tests.

None means "not known" (e.g. a GUC that does not exist on this version, a counter before 14, an unset CPU count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from readtier import IndexFact  # the read tier's record of an index, as the rules read it


@dataclass(frozen=True)
class Settings:
    """pg_stat_statements settings as of now (pg_settings)."""

    max: int = 5000
    track: str = "top"
    track_utility: bool = True
    track_planning: bool | None = False  # None before 13 (the GUC does not exist)
    save: bool = True
    sample_rate: float | None = None  # None where the GUC does not exist (every community release 13-18)


@dataclass(frozen=True)
class StatementFact:
    """One statement's totals over the evaluation window."""

    queryid: int
    query: str
    calls: int = 0
    total_exec_ms: float = 0.0
    total_plan_ms: float = 0.0
    statement_id: int | None = None  # the console's statement id, when known

    @property
    def plan_share(self) -> float:
        total = self.total_exec_ms + self.total_plan_ms
        return self.total_plan_ms / total if total > 0 else 0.0


@dataclass(frozen=True)
class HelpedStatement:
    """A statement whose last plan scans a table an index would serve: its cost with and without the index."""

    statement_id: int
    query: str
    time_per_day_ms: float  # execution and planning over the last day
    cost_before: float
    cost_after: float

    @property
    def saved_per_day_ms(self) -> float:
        """Its time a day, cut as its plan's cost would be (the planner's cost as a proxy for time)."""
        if self.cost_before <= 0:
            return 0.0
        return self.time_per_day_ms * max(0.0, 1.0 - self.cost_after / self.cost_before)


@dataclass(frozen=True)
class MissingIndexFact:
    """One index some statements' plans ask for: every statement it helps, how it was costed."""

    database: str
    schema_name: str
    table_name: str
    columns: tuple[str, ...]
    method: str  # cost-verified (hypopg) | estimated (pg_stats)
    size_bytes: int | None
    reltuples: float
    selectivity: float | None
    statements: tuple[HelpedStatement, ...]
    table_writes_per_day: float | None = None  # its table's inserts and non-HOT updates a day
    table_indexes: int | None = None  # the table's indexes now
    # A partitioned table's: its tree, [schema, table, parent schema, parent table, relkind] parents first (the
    # root's parent None); its partitions the plans read are `partitions_read` of them.
    partition_tree: tuple[tuple, ...] = ()
    partitions_read: int = 0

    @property
    def saved_per_day_ms(self) -> float:
        return sum(s.saved_per_day_ms for s in self.statements)


@dataclass(frozen=True)
class StatementEffect:
    """A statement whose current plan reads an index made lately: its mean time before the index and since."""

    statement_id: int
    query: str
    mean_before_ms: float | None  # over the week before the index was first seen (None: it did not run then)
    mean_after_ms: float | None
    calls_after: int


@dataclass(frozen=True)
class MadeIndexFact:
    """An index first seen by the schema reading after its database's first reading: made lately."""

    index: IndexFact
    made_at: datetime  # the reading that first found it (it was made since the one before)
    statements: tuple[StatementEffect, ...]  # those whose current plan reads it


@dataclass(frozen=True)
class Evidence:
    """Everything the rules may look at for one server."""

    server: str
    version: int  # major version, e.g. 15
    settings: Settings = field(default_factory=Settings)
    cpu_count: int | None = None
    sees_all_statements: bool = True  # monitoring role has pg_read_all_stats (or is superuser)
    monitoring_role: str = "pgconsole"
    # dealloc/s over windows (14+): keys "1h" (advisor.gather.windows), "24h", "7d"; None before 14.
    dealloc_per_s: dict[str, float] | None = None
    # The series below: (start, value) or (start, value, end) of each point (advisor.advice.EvidenceSeries.of)
    dealloc_series: tuple[tuple, ...] = ()
    # Series for the recommendations' charts (over the last day; None: no data at that point).
    entries_series: tuple[tuple, ...] = ()  # entries (peak per point)
    hottest_series: tuple[tuple, ...] = ()  # calls/s of the hottest queryid
    lwlock_series: tuple[tuple, ...] = ()  # active sessions in LWLock:pg_stat_statements
    spindelay_series: tuple[tuple, ...] = ()  # active sessions in Timeout:SpinDelay
    distinct_keys_1d: int | None = None
    distinct_keys_7d: int | None = None
    entries_peak: int | None = None
    keys_disappeared_1d: int | None = None  # 13: keys gone between snapshots while near max
    mean_query_len: float | None = None
    stats_resets: tuple[datetime, ...] = ()
    hottest_queryid: int | None = None
    hottest_calls_per_s: float | None = None
    # Shares of sampled active time, 0..1; None when not sampled (SpinDelay needs 16+).
    lwlock_pgss_share: float | None = None
    spindelay_share: float | None = None
    spindelay_on_hot_statements: bool = False
    server_db_time_ms: float = 0.0
    statements: tuple[StatementFact, ...] = ()
    # The schema reading's last look at the server's indexes (None: never read), and its place in replication.
    schema_read_at: datetime | None = None
    indexes: tuple[IndexFact, ...] = ()
    in_recovery: bool = False
    standbys: int | None = None
    missing_indexes: tuple[MissingIndexFact, ...] = ()
    made_indexes: tuple[MadeIndexFact, ...] = ()
