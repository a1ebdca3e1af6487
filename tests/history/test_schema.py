"""history/schema.py: the delta rules of tables and indexes (by hand, no server), and one reading stored and loaded
back: only what changed is written, the deltas as one row of arrays, the relations gone marked."""

import functools
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from collectors.redact import redact
from collectors.schema.catalog import Database, DatabaseRead, IndexRead, TableRead
from history import partitions, schema
from history.models import SchemaIndex, SchemaTable
from inventory.connection import parse_dsn
from inventory.services import server_create

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=10)


def _rows(*args, **kwargs):
    """history.schema.rows_for_database with the collectors' redaction, as the schema reading calls it."""
    return schema.rows_for_database(*args, **{"redact": redact, **kwargs})


def _table(relid=10, *, counters=(1, 100, 2, 20, 5, 3, 1, 0), live=100):
    return TableRead(relid, "public", f"t{relid}", "r", False, counters, live, 0, None, None, 8192)


def _index(relid=20, *, scans=4, last_scan_at=None, definition="CREATE INDEX i ON public.t10 USING btree (a)"):
    described = definition is not None
    return IndexRead(
        relid=relid,
        table_relid=10,
        schema_name="public",
        name=f"i{relid}",
        table_name="t10",
        counters=(scans, scans * 2, scans),
        last_scan_at=last_scan_at,
        described=described,
        definition=definition,
        method="btree",
        key_attnums=[2],
        key_columns=["a"] if described else None,
        include_count=0,
        opclasses=[1978],
        predicate_md5="" if described else None,
        expressions_md5="" if described else None,
        is_unique=False,
        is_primary=False,
        constraint="",
        is_valid=True,
        size_bytes=16384,
    )


def _read(tables=(), indexes=(), *, total=None):
    tables, indexes = list(tables), list(indexes)
    return DatabaseRead(Database("app", True, True, None), tables, indexes, total or len(tables), len(indexes))


def _state(rows: schema.DatabaseRows) -> schema.DatabaseState:
    """What save_database would leave, as load_state gives it (ids made up)."""
    state = schema.DatabaseState()
    for n, (relid, row) in enumerate(rows.tables.items()):
        state.tables[relid] = {"id": n + 1, **row}
    for n, (relid, row) in enumerate(rows.indexes.items()):
        state.indexes[relid] = {"id": n + 101, **row}
    return state


def test_a_databases_first_reading_stores_its_relations_and_no_delta():
    rows = _rows(_read([_table()], [_index()]), None, taken_at=T0, interval_s=None, new_counted=False)
    assert set(rows.tables) == {10} and set(rows.indexes) == {20}
    assert rows.table_deltas == [] and rows.index_deltas == []
    assert rows.indexes[20]["stats_since"] == T0 and rows.indexes[20]["scans_at_since"] == 4
    assert rows.indexes[20]["last_scan_at"] is None  # scanned at some time before: unknown before 16


def test_now_minus_before_and_an_unchanged_relation_not_written_again():
    first = _rows(_read([_table()], [_index()]), None, taken_at=T0, interval_s=None, new_counted=False)
    moved = _table(counters=(3, 300, 2, 20, 9, 3, 1, 2))
    rows = _rows(_read([moved], [_index()]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True)
    assert rows.table_deltas == [(10, (2, 200, 0, 0, 4, 0, 0, 2))]
    assert rows.index_deltas == [] and rows.indexes == {} and rows.ids == {("i", 20): 101}
    assert rows.tables[10]["stats_since"] == T0 and rows.tables[10]["first_seen_at"] == T0


def test_a_counter_gone_back_counts_from_zero_and_watches_again_from_then():
    first = _rows(_read([], [_index(scans=50)]), None, taken_at=T0, interval_s=None, new_counted=False)
    rows = _rows(_read([], [_index(scans=3)]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True)
    assert rows.index_deltas == [(20, (3, 6, 3))]
    assert rows.indexes[20]["stats_since"] == T1 and rows.indexes[20]["scans_at_since"] == 3
    reset_at = T1 - timedelta(minutes=4)
    rows = _rows(
        _read([], [_index(scans=60)]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True, reset_at=reset_at
    )
    assert rows.index_deltas == [(20, (60, 120, 60))]  # all since the database's reset, none from before it
    assert rows.indexes[20]["stats_since"] == reset_at and rows.indexes[20]["scans_at_since"] == 0


def test_a_new_relation_counts_from_zero_only_after_a_whole_reading():
    first = _rows(_read([_table()]), None, taken_at=T0, interval_s=None, new_counted=False)
    new = _table(relid=11, counters=(0, 0, 0, 0, 7, 0, 0, 0))
    counted = _rows(_read([_table(), new]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True)
    assert counted.table_deltas == [(11, (0, 0, 0, 0, 7, 0, 0, 0))]
    # After a capped reading, a relation first seen may have been there, unseen, with counts from before.
    unknown = _rows(_read([_table(), new]), _state(first), taken_at=T1, interval_s=600.0, new_counted=False)
    assert unknown.table_deltas == [] and 11 in unknown.tables


def test_a_scan_seen_sets_when_and_the_servers_own_time_wins_where_it_says():
    first = _rows(_read([], [_index()]), None, taken_at=T0, interval_s=None, new_counted=False)
    rows = _rows(_read([], [_index(scans=5)]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True)
    assert rows.indexes[20]["last_scan_at"] == T1
    said = T1 - timedelta(minutes=3)
    rows = _rows(
        _read([], [_index(scans=5, last_scan_at=said)]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True
    )
    assert rows.indexes[20]["last_scan_at"] == said


def test_an_index_known_and_not_described_again_keeps_its_stored_description():
    first = _rows(_read([], [_index()]), None, taken_at=T0, interval_s=None, new_counted=False)
    rows = _rows(
        _read([], [_index(scans=9, definition=None)]), _state(first), taken_at=T1, interval_s=600.0, new_counted=True
    )
    assert rows.indexes[20]["definition"] == "CREATE INDEX i ON public.t10 USING btree (a)"
    assert rows.indexes[20]["key_columns"] == ["a"] and rows.indexes[20]["idx_scan"] == 9


def test_an_index_definition_is_redacted_as_texts_are():
    hidden = "CREATE INDEX i ON public.t10 USING btree (a) WHERE (b <> 'secret-literal'::text)"
    rows = _rows(
        _read([], [_index(definition=hidden)]),
        None,
        taken_at=T0,
        interval_s=None,
        new_counted=False,
        redact=functools.partial(redact, strict=True),
    )
    assert "secret-literal" not in rows.indexes[20]["definition"] and "CREATE INDEX i" in rows.indexes[20]["definition"]


@pytest.mark.django_db(transaction=True)
def test_a_reading_stored_and_loaded_back_with_its_deltas_and_what_went():
    server = server_create(name="schema-store", connection=parse_dsn("postgresql://mon:pw@db1.example:5432/app"))
    partitions.ensure("collectors_schema_delta", T1)
    first = _rows(
        _read([_table(), _table(relid=11)], [_index()]), None, taken_at=T0, interval_s=None, new_counted=False
    )
    schema.save_database(server.pk, T0, first)
    state = schema.load_state(server.pk)["app"]
    assert set(state.tables) == {10, 11} and state.indexes[20]["definition"].startswith("CREATE INDEX")
    moved = _table(counters=(2, 100, 2, 20, 5, 3, 1, 0))
    second = _rows(_read([moved], [_index(scans=6)]), state, taken_at=T1, interval_s=600.0, new_counted=True)
    schema.save_database(server.pk, T1, second)
    ids = dict(SchemaTable.objects.filter(server_id=server.pk).values_list("relid", "id"))
    index_id = SchemaIndex.objects.get(server_id=server.pk, relid=20).pk
    with connection.cursor() as cur:
        cur.execute(
            "SELECT interval_s, table_ids, seq_scan, index_ids, index_scan FROM collectors_schema_delta "
            "WHERE server_id = %s",
            [server.pk],
        )
        assert cur.fetchall() == [(600.0, [ids[10]], [1], [index_id], [2])]
    assert SchemaTable.objects.get(server_id=server.pk, relid=11).gone_at == T1  # not in a whole reading
    assert SchemaTable.objects.get(server_id=server.pk, relid=10).seq_scan == 2
