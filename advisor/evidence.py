"""Typed evidence the rules read: built from the selectors by advisor.gather for a server, by hand in the rules' tests.

None means "not known" (e.g. a GUC that does not exist on this version, a counter before 14, an unset CPU count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


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
