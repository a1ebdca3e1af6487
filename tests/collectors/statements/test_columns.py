"""collectors.statements.columns: for an installed extension's own columns, the SQL that reads each of the history's
canonical figures (the newest source name first, times in ms to integer µs, what is missing as 0 or NaN). The
expressions are evaluated by PostgreSQL here, on a table shaped like an extension's view."""

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from collectors.statements.columns import COUNTERS, GAUGES, ROW_COLUMNS, build_column_map
from history.columns import COUNTER_NAMES, GAUGE_NAMES

STATS_SINCE = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
# A view with both 1.7's and 1.8's name of the execution time, NULLs, and wal_bytes as numeric (as in the extension).
SOURCE = {
    "userid": ("oid", 10),
    "dbid": ("oid", 16384),
    "queryid": ("int8", -42),
    "toplevel": ("bool", False),
    "calls": ("int8", 7),
    "rows": ("int8", 21),
    "total_exec_time": ("float8", 12.3456),
    "total_time": ("float8", 99.0),
    "shared_blks_hit": ("int8", None),
    "wal_bytes": ("numeric", 123456789012),
    "min_exec_time": ("float8", 0.25),
    "max_time": ("float8", None),
    "stats_since": ("timestamptz", STATS_SINCE),
}


@pytest.mark.django_db
def test_the_expressions_read_an_extensions_row_into_the_canonical_columns():
    cmap = build_column_map("1.11", list(SOURCE))
    assert [name for name, _ in cmap.exprs] == [name for name, _ in ROW_COLUMNS]
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE pgss (" + ", ".join(f"{c} {t}" for c, (t, _) in SOURCE.items()) + ")")
        cur.execute(f"INSERT INTO pgss VALUES ({', '.join(['%s'] * len(SOURCE))})", [v for _, v in SOURCE.values()])
        cur.execute(f"SELECT {', '.join(expr for _, expr in cmap.exprs)} FROM pgss")
        got = dict(zip([name for name, _ in ROW_COLUMNS], cur.fetchone(), strict=True))
    expected = {
        "userid": 10,
        "dbid": 16384,
        "queryid": -42,
        "toplevel": 0,
        "calls": 7,
        "rows": 21,
        "total_exec_us": round(12.3456 * 1000),  # the newer name wins over total_time
        "shared_blks_hit": 0,  # NULL
        "wal_bytes": 123456789012,
        "stats_since_us": (STATS_SINCE - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1),
        "min_exec_ms": 0.25,
    }
    assert {name: got[name] for name in expected} == expected
    rest = {name: value for name, value in got.items() if name not in expected}
    assert {value for name, value in rest.items() if name not in GAUGE_NAMES} == {0}
    assert all(math.isnan(value) for name, value in rest.items() if name in GAUGE_NAMES)  # max_time NULL included


def test_an_older_extension_maps_its_own_names_and_says_what_it_lacks():
    old = build_column_map("1.7", ["userid", "dbid", "queryid", "calls", "rows", "total_time", "blk_read_time"])
    assert old.expr("total_exec_us") == "(coalesce(total_time, 0) * 1000)::int8"
    assert old.expr("shared_blk_read_us") == "(coalesce(blk_read_time, 0) * 1000)::int8"
    assert old.expr("toplevel") == "1::int8" and old.expr("max_exec_ms") == "'NaN'::float8"
    assert not (old.has_toplevel or old.has_planning or old.has_stats_since)
    new = build_column_map("1.11", [*SOURCE, "total_plan_time"])
    assert new.has_toplevel and new.has_planning and new.has_stats_since


def test_an_extension_without_the_key_columns_is_refused_by_name():
    with pytest.raises(ValueError, match=r"pg_stat_statements 0.9 lacks expected columns: \['calls', 'queryid'\]"):
        build_column_map("0.9", ["userid", "dbid", "rows", "total_time"])


def test_every_figure_the_history_stores_has_its_sources_in_its_order_and_times_read_by_their_unit():
    assert tuple(name for name, _, _ in COUNTERS) == COUNTER_NAMES
    assert tuple(name for name, _ in GAUGES) == GAUGE_NAMES
    assert all(name.endswith("_us") == is_ms for name, _, is_ms in COUNTERS)
    assert len({name for name, _ in ROW_COLUMNS}) == len(ROW_COLUMNS)
