"""How each installed pg_stat_statements version maps onto the history's canonical figures (history.columns).

Columns are discovered from the catalog of the installed extension (1.8 on PostgreSQL 13 up to 1.12 on 18; 1.7's
API also works), never inferred from the server major: a server upgraded without ALTER EXTENSION ... UPDATE keeps
the old columns. See shared/reference/pg_stat_statements.md.
"""

from dataclasses import dataclass

from history.public import COUNTER_NAMES, GAUGE_NAMES, KEY_NAMES

# Each counter's source columns, newest name first, and whether it is a time in ms (read as integer µs at the
# source, so that deltas telescope exactly).
# (canonical name, source column names in preference order, is a time in ms)
COUNTERS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("calls", ("calls",), False),
    ("plans", ("plans",), False),
    ("total_exec_us", ("total_exec_time", "total_time"), True),
    ("total_plan_us", ("total_plan_time",), True),
    ("rows", ("rows",), False),
    ("shared_blks_hit", ("shared_blks_hit",), False),
    ("shared_blks_read", ("shared_blks_read",), False),
    ("shared_blks_dirtied", ("shared_blks_dirtied",), False),
    ("shared_blks_written", ("shared_blks_written",), False),
    ("local_blks_hit", ("local_blks_hit",), False),
    ("local_blks_read", ("local_blks_read",), False),
    ("local_blks_dirtied", ("local_blks_dirtied",), False),
    ("local_blks_written", ("local_blks_written",), False),
    ("temp_blks_read", ("temp_blks_read",), False),
    ("temp_blks_written", ("temp_blks_written",), False),
    ("shared_blk_read_us", ("shared_blk_read_time", "blk_read_time"), True),
    ("shared_blk_write_us", ("shared_blk_write_time", "blk_write_time"), True),
    ("local_blk_read_us", ("local_blk_read_time",), True),
    ("local_blk_write_us", ("local_blk_write_time",), True),
    ("temp_blk_read_us", ("temp_blk_read_time",), True),
    ("temp_blk_write_us", ("temp_blk_write_time",), True),
    ("wal_records", ("wal_records",), False),
    ("wal_fpi", ("wal_fpi",), False),
    ("wal_bytes", ("wal_bytes",), False),
    ("wal_buffers_full", ("wal_buffers_full",), False),
    ("jit_functions", ("jit_functions",), False),
    ("jit_generation_us", ("jit_generation_time",), True),
    ("jit_inlining_count", ("jit_inlining_count",), False),
    ("jit_inlining_us", ("jit_inlining_time",), True),
    ("jit_optimization_count", ("jit_optimization_count",), False),
    ("jit_optimization_us", ("jit_optimization_time",), True),
    ("jit_emission_count", ("jit_emission_count",), False),
    ("jit_emission_us", ("jit_emission_time",), True),
    ("jit_deform_count", ("jit_deform_count",), False),
    ("jit_deform_us", ("jit_deform_time",), True),
    ("parallel_workers_to_launch", ("parallel_workers_to_launch",), False),
    ("parallel_workers_launched", ("parallel_workers_launched",), False),
)
# Each gauge's source columns (ms, float8), newest name first; NaN where the installed version lacks it.
GAUGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("min_plan_ms", ("min_plan_time",)),
    ("max_plan_ms", ("max_plan_time",)),
    ("stddev_plan_ms", ("stddev_plan_time",)),
    ("min_exec_ms", ("min_exec_time", "min_time")),
    ("max_exec_ms", ("max_exec_time", "max_time")),
    ("stddev_exec_ms", ("stddev_exec_time", "stddev_time")),
)
# What is read of one statement from a monitored server (int8 or float8 each).
ROW_COLUMNS: tuple[tuple[str, str], ...] = (
    *((k, "i8") for k in KEY_NAMES),
    ("stats_since_us", "i8"),
    ("minmax_stats_since_us", "i8"),
    *((c, "i8") for c in COUNTER_NAMES),
    *((g, "f8") for g in GAUGE_NAMES),
)


@dataclass(frozen=True)
class ColumnMap:
    """What the installed extension offers, and the expression over its columns for each of ROW_COLUMNS."""

    extension_version: str
    source_columns: frozenset[str]
    exprs: tuple[tuple[str, str], ...]  # (ROW_COLUMNS name, SQL expression), in ROW_COLUMNS order

    def expr(self, name: str) -> str:
        return dict(self.exprs)[name]

    @property
    def has_toplevel(self) -> bool:
        return "toplevel" in self.source_columns

    @property
    def has_planning(self) -> bool:
        return "total_plan_time" in self.source_columns

    @property
    def has_stats_since(self) -> bool:
        return "stats_since" in self.source_columns


def _first(present: frozenset[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in present), None)


def _epoch_us(column: str) -> str:
    return f"coalesce((extract(epoch FROM {column}) * 1000000)::int8, 0)"


def build_column_map(extension_version: str, source_columns: list[str]) -> ColumnMap:
    present = frozenset(source_columns)
    missing = {"userid", "dbid", "queryid", "calls", "rows"} - present
    if missing:
        raise ValueError(f"pg_stat_statements {extension_version} lacks expected columns: {sorted(missing)}")
    parts = [
        ("userid", "userid::int8"),
        ("dbid", "dbid::int8"),
        ("queryid", "queryid"),  # NULL for entries the role may not see: those are counted, not sent
        ("toplevel", "toplevel::int::int8" if "toplevel" in present else "1::int8"),
        ("stats_since_us", _epoch_us("stats_since") if "stats_since" in present else "0::int8"),
        ("minmax_stats_since_us", _epoch_us("minmax_stats_since") if "minmax_stats_since" in present else "0::int8"),
    ]
    for name, candidates, is_ms in COUNTERS:
        src = _first(present, candidates)
        if src is None:
            expr = "0::int8"
        elif is_ms:
            expr = f"(coalesce({src}, 0) * 1000)::int8"
        else:
            expr = f"coalesce({src}, 0)::int8"
        parts.append((name, expr))
    for name, candidates in GAUGES:
        src = _first(present, candidates)
        parts.append((name, f"coalesce({src}, 'NaN')::float8" if src else "'NaN'::float8"))
    assert [name for name, _ in parts] == [name for name, _ in ROW_COLUMNS]
    return ColumnMap(extension_version, present, tuple(parts))
