"""history.writer: a collection hands it one snapshot's typed rows, and the history store makes their partitions,
writes them in one transaction or not at all, and makes again a partition dropped behind this process's back.
Written at dates in 2011 that no other test writes, for a server id no other test has."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from history import partitions
from history.tables import TABLES
from history.wait_rows import IntervalWait
from history.writer import store_snapshot

pytestmark = pytest.mark.django_db(transaction=True)
SERVER_ID = 990_011
AT = datetime(2011, 6, 14, 10, 30, tzinfo=UTC)
ROWS = [
    IntervalWait("LWLock", "WALWrite", 42, 7, 3.5),
    IntervalWait(None, None, None, 2, 1.0),  # CPU: no wait event, no query id
]


def _stored() -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT server_id, taken_at, event_type, event, query_id, samples, session_s "
            f"FROM {TABLES.WAIT_EVENT.name} WHERE server_id = %s ORDER BY samples DESC",
            [SERVER_ID],
        )
        return cur.fetchall()


@pytest.fixture
def june_2011():
    yield
    with connection.cursor() as cur:
        cur.execute(f'DROP TABLE IF EXISTS "{partitions.partition_name(TABLES.WAIT_EVENT.name, AT)}"')
    partitions.forget_cache()


def test_typed_rows_are_written_as_their_tables_columns_in_a_partition_made_for_them(june_2011):
    store_snapshot(SERVER_ID, AT, [TABLES.WAIT_EVENT], lambda writer: writer.append(TABLES.WAIT_EVENT, ROWS))
    assert _stored() == [(SERVER_ID, AT, "LWLock", "WALWrite", 42, 7, 3.5), (SERVER_ID, AT, None, None, None, 2, 1.0)]


def test_a_snapshot_whose_write_fails_leaves_nothing(june_2011):
    def write(writer):
        writer.append(TABLES.WAIT_EVENT, ROWS)
        raise RuntimeError("a reading's persist failed after the first rows")

    with pytest.raises(RuntimeError):
        store_snapshot(SERVER_ID, AT, [TABLES.WAIT_EVENT], write)
    assert _stored() == []


def test_a_partition_dropped_behind_the_processs_back_is_made_again_and_the_snapshot_written_once(june_2011):
    partitions.ensure(TABLES.WAIT_EVENT.name, AT)  # committed: this process knows it
    with connection.cursor() as cur:
        cur.execute(f'DROP TABLE "{partitions.partition_name(TABLES.WAIT_EVENT.name, AT)}"')  # by hand, meanwhile
    tries = []

    def write(writer):
        tries.append(1)
        writer.append(TABLES.WAIT_EVENT, ROWS)

    store_snapshot(SERVER_ID, AT, [TABLES.WAIT_EVENT], write)
    assert len(tries) == 2 and len(_stored()) == 2  # the first try rolled back whole


def test_an_empty_snapshot_writes_no_row():
    store_snapshot(SERVER_ID, AT, [], lambda writer: writer.append(TABLES.WAIT_EVENT, []))
    assert _stored() == []
