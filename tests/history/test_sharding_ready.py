"""The history store is ready to be sharded by server (Citus, with server_id as the distribution column;
docs/operations.md "Scaling out"): read from the migrated schema itself, every history table has server_id, every
primary key and unique index holds it, and no foreign key joins two servers' rows (the only one goes to the server's
own row in the inventory, a reference table there). Citus itself is not installable here: this checks what
it requires of the schema."""

import pytest
from django.db import connection

from history import tables
from history.models import FailedCollection

pytestmark = pytest.mark.django_db

HISTORY = [t.name for t in tables.PER_SERVER] + [FailedCollection._meta.db_table]


def _rows(query: str, params: list) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall()


def test_every_history_table_has_server_id():
    found = _rows(
        "SELECT table_name FROM information_schema.columns WHERE column_name = 'server_id' AND table_name = ANY(%s)",
        [HISTORY],
    )
    assert sorted(name for (name,) in found) == sorted(HISTORY)


def test_every_primary_key_and_unique_index_holds_server_id():
    unique = _rows(
        "SELECT r.relname, i.indexrelid::regclass::text, array_agg(a.attname::text) FROM pg_index i "
        "JOIN pg_class r ON r.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indisunique AND r.relname = ANY(%s) GROUP BY 1, 2",
        [HISTORY],
    )
    assert {name for name, _, _ in unique} >= {"collectors_statement", "collectors_snapshot"}  # the check sees keys
    assert [(table, index) for table, index, columns in unique if "server_id" not in columns] == []


def test_no_foreign_key_joins_two_servers_rows():
    keys = _rows(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, pg_get_constraintdef(c.oid) "
        "FROM pg_constraint c WHERE c.contype = 'f' AND c.conrelid::regclass::text = ANY(%s)",
        [HISTORY],
    )
    assert keys, "the server's own row is referenced"
    for table, referenced, definition in keys:
        assert (referenced, definition.split(" DEFERRABLE")[0]) == (
            "console_server",
            "FOREIGN KEY (server_id) REFERENCES console_server(id)",
        ), table
