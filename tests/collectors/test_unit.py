"""Readings as units (collectors/unit.py): the registered ones, declared whole; a new one is collected with the others
by declaring it alone; its own failure, its time budget and its cadence, through real collections of a real
server."""

import graphlib
from dataclasses import dataclass

import psycopg
import pytest
from django.db import connection

from collectors import unit
from collectors.errors import CollectionError, from_query_error
from collectors.services import server_collect
from collectors.texts import texts
from collectors.unit import Budget, Failure, Reading, Sql, registered
from collectors.waits import waits
from history.models import ServerState
from history.tables import HistoryTable
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = "test_unit_example_reading"


def test_the_registered_readings_each_declared_whole_and_after_what_they_use():
    readings = registered()
    names = [r.name for r in readings]
    assert names[:2] == ["settings", "statements"]
    assert set(names) == {"settings", "statements", "texts", "waits", "schema", "vacuum"}
    for i, reading in enumerate(readings):
        assert set(reading.after) <= set(names[:i]), reading.name  # what it uses was read before it
        assert reading.sql.at(130000) is not None and reading.sql.at(180000) is not None, reading.name
        assert reading.tables and all(isinstance(t, HistoryTable) for t in reading.tables), reading.name
        assert reading.delta_rules and reading.what and reading.failure in Failure, reading.name
    # The snapshot itself cannot be stored without these two; a failure of the others is theirs alone.
    assert {r.name for r in readings if r.failure is Failure.SNAPSHOT} == {"settings", "statements"}


def test_a_readings_sql_is_the_one_of_the_servers_version():
    activity = {v: waits.SQL.at(v)["pg_stat_activity"] for v in (130000, 130012, 140000, 180004)}
    assert "NULL::int8" in activity[130000] and activity[130000] == activity[130012]
    assert "query_id" in activity[140000] and activity[140000] == activity[180004]
    with pytest.raises(LookupError):
        Sql(((130000, "SELECT 1"),)).at(120000)


@pytest.fixture
def example_table():
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {TABLE} (server_id int, taken_at timestamptz, xact_commit int8, read_only text, "
            "timeout text)"
        )
    yield
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE {TABLE}")


@dataclass
class Commits:
    """A row of the example's table after its server_id and taken_at, as the writer takes it."""

    xact_commit: int
    read_only: str
    timeout: str


def _example(**declared) -> Reading:
    """The reading docs/architecture.md walks through, kept small: the database's committed transactions, handed to
    the history store's writer as typed rows."""

    def read(snap):
        row = snap.conn.execute(
            "SELECT xact_commit, current_setting('transaction_read_only'), current_setting('statement_timeout') "
            "FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
        return Commits(*row)

    def persist(snap, row, writer):
        writer.append(HistoryTable(TABLE), [row])

    fields = {
        "name": "example",
        "what": "committed transactions",
        "sql": Sql(((130000, "SELECT xact_commit FROM pg_stat_database"),)),
        "tables": (HistoryTable(TABLE),),
        "delta_rules": "none: kept as read",
        "failure": Failure.OWN,
        "read": read,
        "compute": lambda snap, row: row,
        "persist": persist,
        "after": ("statements",),
    }
    return Reading(**(fields | declared))


def _stored(server) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT taken_at, xact_commit, read_only, timeout FROM {TABLE} WHERE server_id = %s ORDER BY 1",
            [server.pk],
        )
        return cur.fetchall()


def _waits_sources(server) -> list[str | None]:
    with connection.cursor() as cur:
        cur.execute("SELECT waits_source FROM collectors_snapshot WHERE server_id = %s ORDER BY taken_at", [server.pk])
        return [r[0] for r in cur.fetchall()]


def test_a_new_reading_declared_alone_is_collected_with_the_others(pg_clusters, with_reading, example_table):
    c = pg_clusters[16]
    server = register(c)
    with_reading(_example())
    collect(server)
    run(c, "SELECT 1", 5)
    second = collect(server)
    stored = _stored(server)
    assert len(stored) == 2 and stored[1][0] == second.taken_at  # each snapshot's, read at its time
    assert stored[1][1] >= stored[0][1] + 5
    readings = ServerState.objects.get(server=server).readings
    assert readings["example"]["ok"] is True and set(readings) == {r.name for r in registered()} | {"example"}
    assert second.kind == "delta" and _waits_sources(server)[-1] == "pg_stat_activity"  # the others as before


def test_a_reading_finds_what_those_it_comes_after_read_and_made(pg_clusters, with_reading, example_table):
    """found() and made(): a reading takes what another read and computed in the same snapshot by that reading's
    declaration, typed as its read and compute return it; what was not computed in it is None."""
    from collectors.statements.reading import READING as STATEMENTS
    from collectors.waits.reading import READING as WAITS

    seen = []

    def compute(snap, row):
        statements = snap.found(STATEMENTS)
        seen.append((len(statements.reading.entries), snap.baseline, snap.made(WAITS), snap.made(example)))
        return row

    example = _example(compute=compute, after=("statements", "waits"))
    c = pg_clusters[16]
    server = register(c)
    with_reading(example)
    collect(server)
    run(c, "SELECT 1", 5)
    collect(server)
    (entries, baseline, waits_made, itself), (later_entries, later_baseline, later_waits, _) = seen
    assert entries > 0 and later_entries >= entries and (baseline, later_baseline) == (True, False)
    assert waits_made == [] and isinstance(later_waits, list) and itself is None  # a baseline's waits: no rows


def test_a_reading_that_fails_on_its_own_leaves_its_status_and_the_snapshot_is_stored(
    pg_clusters, with_reading, example_table
):
    c = pg_clusters[16]
    server = register(c)

    def broken(snap):
        try:
            snap.conn.execute("SELECT * FROM no_such_relation_for_the_example")
        except psycopg.Error as exc:
            raise CollectionError(f"reading the example failed: {exc.diag.message_primary}") from exc

    with_reading(_example(read=broken))
    collect(server)
    run(c, "SELECT 1", 3)
    result = collect(server)
    assert result.ok and result.kind == "delta" and _stored(server) == []
    server.refresh_from_db()
    note = 'committed transactions not read in this snapshot: reading the example failed: relation "no_such_'
    assert note in server.status_notes and server.last_error_class == ""
    status = ServerState.objects.get(server=server).readings["example"]
    assert status["ok"] is False and status["code"] == "error" and "no_such_relation" in status["error"]
    # The readings after it used the same connection, whole.
    assert _waits_sources(server)[-1] == "pg_stat_activity" and status["at_us"] is not None

    # The same failure in a reading the snapshot cannot do without fails the snapshot, and stores nothing of it.
    with_reading(_example(read=broken, failure=Failure.SNAPSHOT))
    failed = server_collect(server_id=server.pk)
    assert not failed.ok and failed.error_code == "error" and "no_such_relation" in failed.error
    assert len(_waits_sources(server)) == 2


def test_a_reading_past_its_time_budget_is_cancelled_on_the_server_and_the_snapshot_goes_on(
    pg_clusters, with_reading, example_table, settings
):
    c = pg_clusters[16]
    server = register(c)
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_SECONDS": 0.3}

    def slow(snap):
        try:
            return snap.conn.execute("SELECT pg_sleep(3), 'slept'").fetchone()
        except psycopg.Error as exc:
            raise from_query_error(exc, "reading the example") from exc

    with_reading(_example(budget=Budget(seconds="EXAMPLE_SECONDS")))
    collect(server)
    assert _stored(server)[0][2:] == ("on", "300ms")  # in its own read-only transaction, under its budget
    with_reading(_example(read=slow, budget=Budget(seconds="EXAMPLE_SECONDS")))
    result = collect(server)
    assert result.ok and result.duration_ms < 2500, result.summary()
    status = ServerState.objects.get(server=server).readings["example"]
    assert status["ok"] is False and status["code"] == "timeout" and "statement timeout" in status["error"]
    assert _waits_sources(server)[-1] == "pg_stat_activity"  # the connection was still good for the next reading
    with_reading(_example())  # and on it, the budget was the transaction's alone
    collect(server)
    assert _stored(server)[-1][3] != "300ms"


def test_a_reading_with_a_cadence_is_read_once_it_has_passed(pg_clusters, with_reading, example_table, settings):
    c = pg_clusters[16]
    server = register(c)
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 3600}
    with_reading(_example(cadence="EXAMPLE_INTERVAL_S"))
    for _ in range(3):
        collect(server)
    first = _stored(server)
    assert len(first) == 1  # read by the first snapshot, not due at the next two
    kept = ServerState.objects.get(server=server).readings["example"]
    assert kept["ok"] is True and kept["at_us"] == round(first[0][0].timestamp() * 1_000_000)
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 0}
    collect(server)
    assert len(_stored(server)) == 2


def test_a_cadence_is_kept_on_each_servers_phase_so_a_fleet_read_together_spreads_out(settings):
    """1,000 servers read together (registered at once, or after an outage) read again each on its own phase of
    the cadence: as many in every minute of the next ten, never again all at once; each at least half a cadence
    after its read, and then exactly a cadence apart."""
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 600}
    reading = _example(cadence="EXAMPLE_INTERVAL_S")
    minute, t0 = 60_000_000, 1_800_000_000_000_000  # a whole minute (epoch µs)
    per_minute = [0] * 16
    for server_id in range(1, 1001):
        assert reading.due(None, t0)  # a first snapshot reads it
        state = ServerState(server_id=server_id, taken_at=None, readings={"example": {"at_us": t0, "ok": True}})
        assert reading.due(ServerState(server_id=server_id, taken_at=None), t0)  # never read: read now
        times = [t for t in range(t0 + minute, t0 + 16 * minute, minute) if reading.due(state, t)]
        first = times[0]
        assert 5 * minute <= first - t0 <= 15 * minute  # half a cadence at least, a cadence and a half at most
        per_minute[(first - t0) // minute] += 1
        state.readings = {"example": {"at_us": first, "ok": True}}
        following = next(t for t in range(first + minute, first + 12 * minute, minute) if reading.due(state, t))
        assert following - first == 10 * minute  # then once a cadence, on its phase
    assert sum(per_minute) == 1000 and max(per_minute) <= 150  # a tenth of the fleet a minute, give or take
    settings.COLLECTOR = {**settings.COLLECTOR, "EXAMPLE_INTERVAL_S": 0}
    assert reading.due(ServerState(server_id=1, taken_at=None, readings={"example": {"at_us": t0}}), t0 + 1)


def test_texts_that_cannot_be_read_leave_their_statements_pending_and_come_with_a_later_snapshot(
    pg_clusters, monkeypatch
):
    c = pg_clusters[16]
    run(c, "DROP TABLE IF EXISTS unit_texts; CREATE TABLE unit_texts (id int)")
    server = register(c)
    collect(server)
    run(c, "SELECT count(*) FROM unit_texts WHERE id > 41", 2)
    read_texts = texts.read_texts

    def refused(*args, **kwargs):
        raise CollectionError("reading query texts: permission denied (for the test)")

    monkeypatch.setattr(texts, "read_texts", refused)
    first = collect(server)
    queryid = server_entry(c, "SELECT count(*) FROM unit_texts%")["queryid"]
    statement = server.statements.get(queryid=queryid)
    assert first.kind == "delta" and statement.query is None and statement.text_status == "pending"
    assert any("query texts not read in this snapshot" in note for note in first.notes)
    monkeypatch.setattr(texts, "read_texts", read_texts)
    collect(server)
    statement.refresh_from_db()
    assert statement.text_status == "stored" and "unit_texts" in statement.query


def test_readings_are_ordered_by_what_they_come_after_and_a_missing_or_circular_one_is_refused():
    def declared(name, *after):
        return _example(name=name, after=after)

    found = {"b": declared("b", "a"), "a": declared("a"), "c": declared("c", "b", "a")}
    assert [r.name for r in unit.ordered(found)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"\['nowhere'\]"):
        unit.ordered({"a": declared("a", "nowhere")})
    with pytest.raises(graphlib.CycleError):
        unit.ordered({"a": declared("a", "b"), "b": declared("b", "a")})
