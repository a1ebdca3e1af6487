"""Lineage changes on real servers: when the statistics behind a DSN are not the ones the previous
snapshot read (another cluster, a standby, a restored copy, entries of other roles becoming visible),
no interval is booked with the new statistics' lifetime counters."""

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from collectors.settings import instance
from collectors.statements import lineage
from devenv import port_for_extra_test, start_many, stop_many
from history.models import ServerState
from inventory.models import Server
from tests import slots
from tests.conftest import monitored_spec
from tests.world import calls_per_snapshot, collect, copy_stopped, register, run, server_entry, stored_statement

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
MAJOR = 16
PORT = slots.port(port_for_extra_test(13))  # where the DSN points
OTHER_PORT = slots.port(port_for_extra_test(15))
SELECT = "SELECT count(*) FROM lineage_items"


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _us(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def _meta(
    *, started: datetime = T0, save: str = "on", all_stats: bool = True, role: int = 16400
) -> instance.ServerMeta:
    return instance.ServerMeta(
        server_version_num=160000,
        taken_at_us=_us(T0 + timedelta(hours=2)),
        postmaster_start_us=_us(started),
        database="app",
        extension_version="1.10",
        extension_schema="public",
        wait_sampling_schema=None,
        settings={"pg_stat_statements.save": save},
        reads_all_stats=all_stats,
        role_oid=role,
        executable=frozenset(lineage.FUNCTIONS),
    )


def _prev(**fields) -> ServerState:
    values = dict(
        taken_at=T0 + timedelta(hours=1),
        postmaster_start_at=T0,
        stats_reset_at=T0,
        system_identifier=1,
        timeline_id=1,
        in_recovery=False,
        reads_all_stats=True,
        role_oid=16400,
    )
    return ServerState(**{**values, **fields})


SAME = lineage.Identity(system_identifier=1, timeline_id=1, in_recovery=False)


@pytest.mark.parametrize(
    ("prev", "meta", "identity", "reset_at", "expected"),
    [
        (None, _meta(), SAME, T0, lineage.Continuity()),
        (_prev(), _meta(), SAME, T0, lineage.Continuity()),
        # a reset after the previous snapshot: inside the interval, every entry counts from zero
        (_prev(), _meta(), SAME, T0 + timedelta(minutes=90), lineage.Continuity(full_reset=True)),
        # a reset time after the previous one but before the previous snapshot: not these statistics
        (_prev(), _meta(), SAME, T0 + timedelta(minutes=30), "before the previous snapshot"),
        (_prev(), _meta(), SAME, T0 - timedelta(days=1), "reset time went back"),
        (_prev(), _meta(), lineage.Identity(2, 1, False), T0, "a different PostgreSQL cluster"),
        (_prev(system_identifier=None), _meta(), lineage.Identity(None, 1, False), T0, lineage.Continuity()),
        # promoted in place (same postmaster): the same counters go on; after a restart, another server
        (_prev(in_recovery=True), _meta(), lineage.Identity(1, 2, False), T0, lineage.Continuity()),
        (
            _prev(in_recovery=True),
            _meta(started=T0 + timedelta(minutes=80)),
            lineage.Identity(1, 2, False),
            T0,
            "now a primary (it was a standby)",
        ),
        (
            _prev(),
            _meta(started=T0 + timedelta(minutes=80)),
            lineage.Identity(1, 2, False),
            T0,
            "on timeline 2 (was 1)",
        ),
        (_prev(), _meta(started=T0 + timedelta(minutes=80)), SAME, T0, lineage.Continuity()),  # a plain restart
        # PostgreSQL 13: no stats_reset; a restart with save=off empties the statistics
        (
            _prev(stats_reset_at=None),
            _meta(save="off", started=T0 + timedelta(minutes=80)),
            SAME,
            None,
            lineage.Continuity(full_reset=True),
        ),
        (_prev(reads_all_stats=False), _meta(), SAME, T0, lineage.Continuity(visible_before_userid=16400)),
        (
            _prev(reads_all_stats=False),
            _meta(all_stats=False, role=16500),
            SAME,
            T0,
            lineage.Continuity(visible_before_userid=16400),
        ),
        (_prev(reads_all_stats=False), _meta(all_stats=False), SAME, T0, lineage.Continuity()),
    ],
)
def test_assess(prev, meta, identity, reset_at, expected):
    got = lineage.assess(prev, meta, identity, None if reset_at is None else _us(reset_at))
    if isinstance(expected, str):
        assert expected in got.baseline_reason and lineage.BASELINE in got.baseline_reason
        assert not got.full_reset and got.visible_before_userid is None
    else:
        assert got == expected


def test_newly_visible_keys_are_the_new_keys_of_other_roles():
    keys = np.array([[16400, 5, 1, 1], [10, 5, 2, 1], [10, 5, 3, 1]], np.int64)
    new = np.array([True, True, False])
    assert lineage.Continuity(visible_before_userid=16400).newly_visible(keys, new).tolist() == [False, True, False]
    assert not lineage.Continuity().newly_visible(keys, new).any()


def _start(spec):
    return start_many([spec])[spec.name]


def _prepare(c) -> int:
    run(c, "DROP TABLE IF EXISTS lineage_items; CREATE TABLE lineage_items (id int)")
    run(c, SELECT)
    return server_entry(c, "SELECT count(*) FROM lineage_items%")["queryid"]


def _notes(server: Server) -> str:
    server.refresh_from_db()
    return server.status_notes


def test_a_new_cluster_behind_the_same_address_is_a_baseline(cluster_lock):
    spec = monitored_spec(MAJOR, name="test-lineage-a", port=PORT)
    c = _start(spec)
    try:
        q = _prepare(c)
        server = register(c)
        collect(server)
        run(c, SELECT, 3)
        assert collect(server).kind == "delta"

        stop_many([c])
        c = _start(spec)  # fresh: initdb again, same name, same port, same DSN
        assert _prepare(c) == q
        run(c, SELECT, 5)  # lifetime of the new cluster: 6 calls
        result = collect(server)
        assert result.kind == "baseline", result.summary()
        assert "a different PostgreSQL cluster answers at this address" in _notes(server)
        assert "new baseline" in _notes(server)
        run(c, SELECT, 2)
        assert collect(server).kind == "delta"
        assert calls_per_snapshot(server, q) == [None, 3, None, 2]
    finally:
        stop_many([c])


def test_reset_time_going_back_is_another_lineage_without_pg_control_system(cluster_lock):
    """pg_control_system() revoked: only the statistics' reset time can tell the other cluster."""
    older_spec = monitored_spec(MAJOR, name="test-lineage-older", port=OTHER_PORT)
    older = _start(older_spec)
    spec = monitored_spec(MAJOR, name="test-lineage-a", port=PORT)
    c = None
    try:
        q = _prepare(older)
        run(older, SELECT, 4)  # lifetime: 5 calls, kept in its statistics file across the restart
        older.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC", dbname="app")
        stop_many([older])

        c = _start(spec)  # started later: a later stats_reset
        c.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC", dbname="app")
        assert _prepare(c) == q
        server = register(c)
        collect(server)
        assert "pg_control_system() is not executable by the monitoring role" in _notes(server)
        run(c, SELECT, 3)
        collect(server)

        stop_many([c])
        older = _start(dataclasses.replace(older_spec, port=PORT, fresh=False))  # now behind the DSN
        result = collect(server)
        assert result.kind == "baseline", result.summary()
        assert "the statistics' reset time went back" in _notes(server)
        run(older, SELECT, 2)
        collect(server)
        assert calls_per_snapshot(server, q) == [None, 3, None, 2]
    finally:
        stop_many([x for x in (older, c) if x is not None])


def test_standby_promotion_and_failover(cluster_lock):
    """The DSN moves to a standby (a baseline), the standby is promoted in place (same statistics:
    deltas go on), then the DSN moves back to the old primary on the old timeline (a baseline)."""
    spec = monitored_spec(MAJOR, name="test-lineage-primary", port=PORT)
    primary = _start(spec)
    standby = None
    try:
        q = _prepare(primary)
        stop_many([primary])
        standby = copy_stopped(primary, name="test-lineage-standby", port=OTHER_PORT)
        standby.configure(
            {**spec.settings, "primary_conninfo": f"host=127.0.0.1 port={PORT} user=postgres"}, spec.preload, spec.hba
        )
        (standby.datadir / "standby.signal").touch()
        primary.start()
        standby.start()
        assert standby.execute("SELECT pg_is_in_recovery()") == [(True,)]

        server = register(primary)
        collect(server)
        run(primary, SELECT, 3)
        collect(server)

        run(standby, SELECT, 4)  # the standby's own statistics
        Server.objects.filter(pk=server.pk).update(port=OTHER_PORT)
        result = collect(server)
        assert result.kind == "baseline", result.summary()
        assert "is now a standby (it was a primary)" in _notes(server)
        run(standby, SELECT, 2)
        collect(server)

        standby.execute("SELECT pg_promote()")
        standby.execute("CHECKPOINT")
        assert standby.execute("SELECT timeline_id FROM pg_control_checkpoint()") == [(2,)]
        run(standby, SELECT, 1)
        assert collect(server).kind == "delta"  # promoted in place: the same counters go on

        Server.objects.filter(pk=server.pk).update(port=PORT)
        run(primary, SELECT, 7)
        result = collect(server)
        assert result.kind == "baseline", result.summary()
        assert "is on timeline 1 (was 2)" in _notes(server)
        run(primary, SELECT, 2)
        collect(server)
        assert calls_per_snapshot(server, q) == [None, 3, None, 2, 1, None, 2]
    finally:
        stop_many([x for x in (primary, standby) if x is not None])


@pytest.mark.parametrize("major", (13, 18))
def test_entries_becoming_visible_are_a_baseline_of_their_own(pg_clusters, major):
    """GRANT pg_read_all_stats to a role that lacked it: the other roles' entries appear with their
    lifetime counters; they are counted from the next snapshot on, while the entries the role saw
    before keep their deltas."""
    c = pg_clusters[major]
    role = "lineage_plain"
    c.execute(f"DROP ROLE IF EXISTS {role}")
    c.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    q = _prepare(c)
    server = register(c, user=role, password="pw")
    collect(server)
    run(c, SELECT, 5)  # the superuser's: hidden from the role
    collect(server)
    assert not server.statements.filter(queryid=q).exists()
    assert "entries of other roles are not visible" in _notes(server)

    c.execute(f"GRANT pg_read_all_stats TO {role}")
    run(c, SELECT, 2)  # lifetime now 8 calls
    result = collect(server)
    assert result.kind == "delta", result.summary()
    assert result.changed > 0  # the role's own statements (the collector's queries) keep their deltas
    assert "the monitoring role now sees statements it could not see before" in _notes(server)
    assert stored_statement(server, q).text_status == "stored"
    run(c, SELECT, 3)
    collect(server)
    assert calls_per_snapshot(server, q) == [None, None, None, 3]
