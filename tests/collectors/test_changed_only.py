"""Only new and changed entries travel from the monitored server: on every version, what the
server sends back against the previous state, merged with that state, is exactly a full reading."""

import numpy as np
import psycopg
import pytest

from collectors.settings import instance
from collectors.statements import pgss
from history import binary_array
from history.entries import Entries
from tests.world import MONITOR_PASSWORD, MONITOR_USER, run, server_entry

MAJORS = (13, 14, 15, 16, 17, 18)


def _by_key(entries: Entries, exclude_userid: int) -> dict[tuple, tuple]:
    out = {}
    for i, key in enumerate(entries.keys.tolist()):
        if key[0] == exclude_userid:
            continue  # the monitoring role's own reads change between two readings
        out[tuple(key)] = (
            entries.counters[i].tolist(),
            entries.gauges[i].round(9).tolist(),
            int(entries.stats_since_us[i]),
            int(entries.minmax_stats_since_us[i]),
        )
    return out


@pytest.mark.parametrize("major", MAJORS)
def test_changed_entries_merged_with_the_state_equal_a_full_reading(pg_clusters, major):
    c = pg_clusters[major]
    table = f"co_items_{major}"
    run(c, f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int)")
    count = f"SELECT count(*) FROM {table}"
    insert = f"INSERT INTO {table} SELECT generate_series(1, 3)"
    if major >= 14:  # the same statement top-level and nested: one queryid, two keys (toplevel)
        nested = f"SET pg_stat_statements.track = 'all'; DO $$ BEGIN PERFORM count(*) FROM {table}; END $$"
    else:
        nested = None
    run(c, count, 3)
    run(c, insert, 2)
    run(c, f"SELECT max(id) FROM {table}")
    if nested:
        run(c, nested)

    with psycopg.connect(c.dsn("app", MONITOR_USER, MONITOR_PASSWORD), autocommit=True) as conn:
        monitor_oid = conn.execute("SELECT oid::int8 FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        meta = instance.read_meta(conn)
        cmap = pgss.column_map(conn, -major, meta)
        before = pgss.read_entries(conn, meta, cmap, Entries.empty())
        assert before.sent == len(before.entries) and (before.prev_index == -1).all()

        # Changes: more calls, a new statement, one entry reset (gone), and on 17+ a min/max reset.
        run(c, count, 2)
        run(c, f"SELECT min(id) FROM {table}")
        gone_qid = server_entry(c, f"SELECT max(id) FROM {table}%")["queryid"]
        run(c, "SELECT pg_stat_statements_reset(0, 0, %s)", params=(gone_qid,))
        insert_qid = server_entry(c, f"INSERT INTO {table}%")["queryid"]
        if major >= 17:
            run(c, "SELECT pg_stat_statements_reset(0, 0, %s, true)", params=(insert_qid,))

        after = pgss.read_entries(conn, meta, cmap, before.entries)
        full = pgss.read_entries(conn, meta, cmap, Entries.empty())

    got, want = _by_key(after.entries, monitor_oid), _by_key(full.entries, monitor_oid)
    assert got == want
    assert gone_qid not in after.entries.keys[:, 2]
    assert after.total == len(after.entries) + after.hidden

    # Exactly the new and changed entries were sent; every other one came from the state.
    prev = _by_key(before.entries, -1)
    expected_sent = {
        tuple(k)
        for i, k in enumerate(after.entries.keys.tolist())
        if tuple(k) not in prev or prev[tuple(k)] != _by_key(after.entries.take([i]), -1)[tuple(k)]
    }
    assert after.sent == len(expected_sent) < len(after.entries)
    changed_keys = {k for k in expected_sent if k[0] != monitor_oid}
    count_qid = c.execute(
        "SELECT DISTINCT queryid FROM pg_stat_statements WHERE query = %s", params=[count], dbname="app"
    )[0][0]
    assert {k[2] for k in changed_keys} >= {count_qid}
    assert (insert_qid in {k[2] for k in changed_keys}) is (major >= 17)  # only min/max moved
    if nested:
        assert sum(1 for k in after.entries.keys.tolist() if k[2] == count_qid) == 2

    # prev_index points at the same key in the state, or -1 for keys the state did not have.
    for i, key in enumerate(after.entries.keys.tolist()):
        j = after.prev_index[i]
        if tuple(key) in prev:
            assert before.entries.keys[j].tolist() == key
        else:
            assert j == -1


def test_binary_arrays_round_trip_through_postgresql(pg_clusters):
    values = {
        "int8": np.array([-(2**63), -1, 0, 1, 2**63 - 1], np.int64),
        "oid": np.array([0, 1, 10, 2**32 - 1], np.uint32),
        "bool": np.array([True, False, True]),
        "float8": np.array([-1.5, 0.0, np.inf, 1e-300]),
        "timestamptz": np.array([0, 1, -(10**15), 10**15], np.int64),  # µs around 2000-01-01
    }
    types = {"int8": "int8[]", "oid": "oid[]", "bool": "bool[]", "float8": "float8[]", "timestamptz": "timestamptz[]"}
    with psycopg.connect(pg_clusters[16].dsn("app"), autocommit=True) as conn, conn.cursor() as cur:
        binary_array.register(cur.adapters)
        for kind, vals in values.items():
            for sample in (vals, vals[:0]):
                cur.execute(
                    f"SELECT %s::{types[kind]}, cardinality(%s::{types[kind]})",
                    [binary_array.param(sample, kind)] * 2,
                    binary=True,
                )
                back = binary_array.parse(cur.pgresult.get_value(0, 0), kind)
                assert back.tolist() == sample.astype(back.dtype).tolist()
                assert int.from_bytes(cur.pgresult.get_value(0, 1), "big") == len(sample)
        assert binary_array.parse(None, "timestamptz").size == 0
        cur.execute("SELECT ARRAY['2000-01-01 00:00:01+00'::timestamptz]", binary=True)
        assert binary_array.parse(cur.pgresult.get_value(0, 0), "timestamptz").tolist() == [1_000_000]
        cur.execute("SELECT ARRAY[1, NULL]::int8[]", binary=True)
        with pytest.raises(binary_array.ArrayFormatError):
            binary_array.parse(cur.pgresult.get_value(0, 0), "int8")
        cur.execute("SELECT ARRAY[1]::int4[]", binary=True)
        with pytest.raises(binary_array.ArrayFormatError):
            binary_array.parse(cur.pgresult.get_value(0, 0), "int8")
