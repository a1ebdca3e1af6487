"""The history store is never asked while a monitored server's connection is open: what the readings compare with
is read before it opens (collectors.services._load_previous), what depends on what was read after it is given back
(a reading's settle). On a real server, with the history store's connection refused for the read's whole time."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from collectors import services
from collectors.unit import LOAD_AHEAD, Failure, Reading, Sql
from history.models import ServerState, Statement, TextStatus
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def history_refused_while_reading(monkeypatch):
    """While the readings read (services._read, on the monitored connection), any use of the history store's
    connection (the ORM's cursors and the raw ones alike go through ensure_connection) fails the collection."""
    real_read = services._read
    asked: list[str] = []

    def refuse():
        asked.append("history store asked during the read")
        raise AssertionError("the history store was asked while the monitored connection was open")

    def guarded(*args, **kwargs):
        with monkeypatch.context() as inside:
            inside.setattr(connection, "ensure_connection", refuse)
            return real_read(*args, **kwargs)

    monkeypatch.setattr(services, "_read", guarded)
    return asked


def _remove(c, queryid: int) -> None:
    run(c, "SELECT pg_stat_statements_reset(0, 0, %s)", params=(queryid,))


def test_keys_back_after_an_eviction_keep_their_statement_and_text_and_none_is_asked_while_reading(
    pg_clusters, settings, history_refused_while_reading
):
    c = pg_clusters[15]
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}  # the schema reading at every snapshot
    run(c, "DROP TABLE IF EXISTS back_again; CREATE TABLE back_again (id int)")
    kept, lost = "SELECT count(*) FROM back_again", "SELECT max(id) FROM back_again"
    server = register(c)
    collect(server)
    run(c, kept)
    run(c, lost)
    collect(server)
    q_kept, q_lost = server_entry(c, f"{kept}%")["queryid"], server_entry(c, f"{lost}%")["queryid"]
    first = {s.queryid: s for s in Statement.objects.filter(server=server, queryid__in=[q_kept, q_lost])}
    assert {s.text_status for s in first.values()} == {TextStatus.STORED}

    # Both evicted (removed from pg_stat_statements) and gone from the previous state; one had lost its text.
    _remove(c, q_kept)
    _remove(c, q_lost)
    assert collect(server).gone_entries >= 2
    Statement.objects.filter(pk=first[q_lost].pk).update(query=None, text_status=TextStatus.EVICTED)

    # Back: not in the previous state, so their texts are read as a new key's; settled once the connection is
    # given back, they are the same statements, the one without a text gets it, the other keeps its own.
    run(c, kept, 3)
    run(c, lost, 2)
    back = collect(server)
    assert back.new_entries >= 2 and not history_refused_while_reading
    now = {s.queryid: s for s in Statement.objects.filter(server=server, queryid__in=[q_kept, q_lost])}
    assert {q: s.pk for q, s in now.items()} == {q: s.pk for q, s in first.items()}  # no second row for a key
    assert (now[q_kept].query, now[q_kept].text_status) == (kept, TextStatus.STORED)
    assert (now[q_lost].query, now[q_lost].text_status) == (lost, TextStatus.STORED)
    assert now[q_kept].gone_at is None and now[q_lost].gone_at is None
    readings = ServerState.objects.get(server=server).readings
    # the schema reading read too (its state loaded before the connection opened)
    assert readings["schema"]["ok"] is True
    assert readings["schema"]["at_us"] == round(back.taken_at.timestamp() * 1_000_000)


def _reading(**declared) -> Reading:
    """A reading of the tests' own: a SELECT 1 after the statements reading, whatever else it declares."""
    fields = {
        "sql": Sql(((130000, "SELECT 1"),)),
        "tables": (),
        "delta_rules": "none",
        "compute": lambda snap, got: got,
        "after": ("statements",),
    }
    return Reading(**(fields | declared))


def test_the_guard_sees_the_history_store_asked_during_a_read(pg_clusters, history_refused_while_reading, with_reading):
    """The fixture above is not blind: a reading that asks the history store in its read fails the snapshot."""

    def asks_history(snap):
        with connection.cursor() as cur:
            cur.execute("SELECT 1")

    with_reading(_reading(name="asks", what="the history store, wrongly", failure=Failure.SNAPSHOT, read=asks_history))
    server = register(pg_clusters[15])
    result = services.server_collect(server_id=server.pk)
    assert not result.ok and history_refused_while_reading


def _own_state_reading(loaded: list[int], read: list[object]) -> Reading:
    def load(server_id: int) -> str:
        loaded.append(server_id)
        return f"state of {server_id}"

    def read_it(snap):
        read.append(snap.previous.of(example))
        return None

    example = _reading(
        name="example",
        what="something with a state of its own",
        failure=Failure.OWN,
        read=read_it,
        cadence="EXAMPLE_INTERVAL_S",
        previous=load,
    )
    return example


def test_a_readings_own_previous_state_is_loaded_only_for_the_snapshots_that_read_it(
    pg_clusters, settings, with_reading, history_refused_while_reading
):
    loaded, read = [], []
    with_reading(_own_state_reading(loaded, read))
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 3600}
    server = register(pg_clusters[15])
    for _ in range(3):
        collect(server)
    assert loaded == [server.pk] and read == [f"state of {server.pk}"]  # the first snapshot's alone
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 0}
    collect(server)
    assert loaded == [server.pk] * 2 and len(read) == 2 and not history_refused_while_reading


def test_whether_a_reading_may_be_due_is_reckoned_on_the_servers_clock_whatever_its_skew(settings):
    """Before the connection opens, the server's time is reckoned as the last snapshot's plus what the console's
    clock counted since: a reading is loaded from LOAD_AHEAD before it is due by the server's clock, and not
    earlier, with the server's clock an hour ahead of the console's or an hour behind."""
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 600}
    reading = _own_state_reading([], [])
    console_then = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    for skew in (timedelta(hours=1), timedelta(0), -timedelta(hours=1)):
        server_then = console_then + skew
        at_us = round(server_then.timestamp() * 1_000_000)
        state = ServerState(server_id=7, taken_at=server_then, readings={"example": {"at_us": at_us, "ok": True}})
        due_at = next(
            minute
            for minute in range(1, 30)
            if reading.due(state, at_us + minute * 60_000_000)  # the server's own clock
        )
        for minute in range(1, 30):
            console_now = console_then + timedelta(minutes=minute)
            loads = reading.may_be_due(state, console_then, console_now)
            assert loads == (timedelta(minutes=minute) + LOAD_AHEAD >= timedelta(minutes=due_at)), (skew, minute)
    assert reading.may_be_due(None, None, console_then)  # a first snapshot reads everything
