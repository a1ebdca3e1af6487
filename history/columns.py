"""The canonical pg_stat_statements figures as the history stores them: the counters (int8 deltas, times in integer
microseconds so that deltas telescope exactly), the gauges (observed values, ms), the statement's key, and the
read tier's totals. How an installed extension's own columns map onto them is the collectors' knowledge
(collectors/statements/columns.py).
"""

import numpy as np

# Cumulative counters, stored as int8 deltas, in this order in every block of the history; times in integer
# microseconds (the sum of stored deltas equals the change of the rounded cumulative value).
COUNTER_NAMES: tuple[str, ...] = (
    "calls",
    "plans",
    "total_exec_us",
    "total_plan_us",
    "rows",
    "shared_blks_hit",
    "shared_blks_read",
    "shared_blks_dirtied",
    "shared_blks_written",
    "local_blks_hit",
    "local_blks_read",
    "local_blks_dirtied",
    "local_blks_written",
    "temp_blks_read",
    "temp_blks_written",
    "shared_blk_read_us",
    "shared_blk_write_us",
    "local_blk_read_us",
    "local_blk_write_us",
    "temp_blk_read_us",
    "temp_blk_write_us",
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_buffers_full",
    "jit_functions",
    "jit_generation_us",
    "jit_inlining_count",
    "jit_inlining_us",
    "jit_optimization_count",
    "jit_optimization_us",
    "jit_emission_count",
    "jit_emission_us",
    "jit_deform_count",
    "jit_deform_us",
    "parallel_workers_to_launch",
    "parallel_workers_launched",
)

# Observed values, not deltas (ms, float8). NaN where the installed version lacks the column.
GAUGE_NAMES: tuple[str, ...] = (
    "min_plan_ms",
    "max_plan_ms",
    "stddev_plan_ms",
    "min_exec_ms",
    "max_exec_ms",
    "stddev_exec_ms",
)
# The gauges kept in history facts (only when they changed): min and max, per DESIGN.md.
FACT_GAUGE_NAMES: tuple[str, ...] = ("min_plan_ms", "max_plan_ms", "min_exec_ms", "max_exec_ms")

# The figures the read tier keeps per snapshot and server, and per statement in the statement-major
# tier: (name, the canonical counters it sums). Every order, filter and chart of the console reads
# these; the full counter set stays in the raw blocks.
TOTALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("calls", ("calls",)),
    ("plans", ("plans",)),
    ("exec_us", ("total_exec_us",)),
    ("plan_us", ("total_plan_us",)),
    ("rows", ("rows",)),
    ("shared_blks_hit", ("shared_blks_hit",)),
    ("shared_blks_read", ("shared_blks_read",)),
    ("temp_blks", ("temp_blks_read", "temp_blks_written")),
    (
        "io_us",
        (
            "shared_blk_read_us",
            "shared_blk_write_us",
            "local_blk_read_us",
            "local_blk_write_us",
            "temp_blk_read_us",
            "temp_blk_write_us",
        ),
    ),
    ("wal_bytes", ("wal_bytes",)),
)
TOTAL_NAMES: tuple[str, ...] = tuple(name for name, _ in TOTALS)


def totals_of(counters: np.ndarray) -> np.ndarray:
    """(n, len(COUNTER_NAMES)) canonical counters -> (n, len(TOTALS)) read-tier figures."""
    out = np.zeros((counters.shape[0], len(TOTALS)), np.int64)
    for j, (_, sources) in enumerate(TOTALS):
        for name in sources:
            out[:, j] += counters[:, COUNTER_NAMES.index(name)]
    return out


KEY_NAMES: tuple[str, ...] = ("userid", "dbid", "queryid", "toplevel")
