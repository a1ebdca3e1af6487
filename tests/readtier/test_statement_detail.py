"""The statement page's selectors (readtier/statement_detail.py) and the plan_share order, against
a synthetic history written through the real collection path and rolled up by the real rollup, over
two and a half days that cross a month boundary. `Planned` and `build_planned` also make the histories
of the statement and planning page tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection

from bench import synthetic
from collectors.services import server_collect
from collectors.settings import instance
from console.services import server_delete
from history import rollups, tiers
from history.columns import COUNTER_NAMES, TOTAL_NAMES
from history.models import Statement, TextStatus
from inventory.models import Organization, Server
from readtier import Page, Window, db, top_statements
from readtier.statement_detail import (
    last_seen_at,
    same_queryid_elsewhere,
    statement_detail,
    statement_owner,
)
from tests.history_world import HardTexts, raw_rows, raw_sums

pytestmark = pytest.mark.django_db

C = {name: j for j, name in enumerate(COUNTER_NAMES)}
HOSTILE = "SELECT '<script>alert(1)</script>' AS x /* <script>alert(2)</script> */ FROM orders WHERE id = $1"


class Planned(HardTexts):
    """A synthetic server whose pg_stat_statements.track_planning is on from `plan_from` (None: never),
    whose statements are planned at every call while it is on (a cost per plan of their own), whose
    first len(`retire`) statements run in every interval until their time in `retire`, then never again,
    and whose three costliest other statements have a hostile text, no text (evicted) and a text the
    monitoring role may not see."""

    def __init__(self, *, plan_from: datetime | None, retire: tuple[datetime, ...] = (), **kw):
        self.plan_from = plan_from
        self.retire = retire
        self.plan_us_per_call = np.exp(np.random.default_rng(3).normal(np.log(80), 1.2, kw.get("n", 5000)))
        super().__init__(**kw)
        cost = self.p_run * (1 + self.rate) * self.us_per_call
        cost[: len(retire)] = -1
        self.hard_texts(cost, HOSTILE)

    @property
    def _interval_end(self) -> datetime:
        return self.taken_at + timedelta(microseconds=self.step_us)

    def _tracking(self, at: datetime) -> bool:
        return self.plan_from is not None and at >= self.plan_from

    def _advance(self, idx: np.ndarray) -> np.ndarray:
        d = super()._advance(idx)
        if self._tracking(self._interval_end):  # the snapshot that ends this interval reads "on"
            calls = d[:, C["calls"]]
            plan_us = np.maximum(1, calls * self.plan_us_per_call[idx]).astype(np.int64)
            d[:, C["plans"]], d[:, C["total_plan_us"]] = calls, plan_us
            self.counters[idx, C["plans"]] += calls
            self.counters[idx, C["total_plan_us"]] += plan_us
        return d

    def _pick(self) -> np.ndarray:
        idx = super()._pick()
        idx = idx[idx >= len(self.retire)]
        running = [i for i, at in enumerate(self.retire) if self._interval_end <= at]
        return np.union1d(idx, np.asarray(running, np.int64)).astype(np.int64)

    def meta(self) -> instance.ServerMeta:
        m = super().meta()
        m.settings["pg_stat_statements.track_planning"] = "on" if self._tracking(self.taken_at) else "off"
        return m


def build_planned(
    name: str,
    *,
    organization: str,
    start: datetime,
    end: datetime,
    step: timedelta,
    n: int = 24,
    seed: int = 9,
    plan_from: datetime | None = None,
    retire: tuple[datetime, ...] = (),
    last_rollup_at: datetime | None = None,
) -> tuple[Server, Planned]:
    """Like tests/history_world.build with a Planned server in `organization`: a snapshot every `step` in
    [start, end), rolled up every hour as the periodic task does, and last at `last_rollup_at` (default: a
    day after the end; a time inside the last hour leaves the snapshots after it not rolled up)."""
    server = synthetic.register(name)
    org, _ = Organization.objects.get_or_create(name=organization)
    Server.objects.filter(pk=server.pk).update(organization=org)
    synth = Planned(
        n=n,
        change_fraction=0.3,
        start=start,
        step_s=int(step.total_seconds()),
        seed=seed,
        plan_from=plan_from,
        retire=retire,
    )
    last_rollup = start
    with synthetic.reading_from(synth):
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + step < end:
            synth.step()
            assert server_collect(server_id=server.pk).ok
            if synth.taken_at - last_rollup >= timedelta(hours=1) and (
                last_rollup_at is None or synth.taken_at <= last_rollup_at
            ):
                rollups.roll_up(now=synth.taken_at)
                last_rollup = synth.taken_at
    rollups.roll_up(now=last_rollup_at or end + timedelta(days=1))
    server.refresh_from_db()
    return server, synth


START = datetime(2026, 10, 30, 20, 0, tzinfo=UTC)
END = datetime(2026, 11, 2, 4, 0, tzinfo=UTC)
STEP = timedelta(minutes=20)
PLAN_FROM = datetime(2026, 10, 31, 12, 0, tzinfo=UTC)
# Statements 0..3 stop running at these times (the last one before its first delta: never seen running).
RETIRE = (
    datetime(2026, 10, 31, 5, 10, tzinfo=UTC),
    datetime(2026, 11, 1, 9, 40, tzinfo=UTC),
    datetime(2026, 10, 30, 23, 0, tzinfo=UTC),
    START,
)
LAST_ROLLUP = END - timedelta(minutes=50)  # the last snapshots stay raw only


@pytest.fixture(scope="module")
def planned(django_db_setup, django_db_blocker):
    """A Planned server in organization h3-sel-a (track_planning on from PLAN_FROM), its twin (same queryids)
    in h3-sel-a, and another twin in h3-sel-b."""
    with django_db_blocker.unblock():
        server, synth = build_planned(
            "h3-sel-planned",
            organization="h3-sel-a",
            start=START,
            end=END,
            step=STEP,
            plan_from=PLAN_FROM,
            retire=RETIRE,
            last_rollup_at=LAST_ROLLUP,
        )
        twin, _ = build_planned("h3-sel-twin", organization="h3-sel-a", start=START, end=START + 3 * STEP, step=STEP)
        other, _ = build_planned("h3-sel-other", organization="h3-sel-b", start=START, end=START + 3 * STEP, step=STEP)
        yield server, synth, twin, other
        for s in (server, twin, other):
            server_delete(server=s)


def _statement_id(server: Server, key: tuple) -> int:
    userid, dbid, queryid, toplevel = key
    return Statement.objects.get(server=server, userid=userid, dbid=dbid, queryid=queryid, toplevel=bool(toplevel)).pk


def _truth(server: Server) -> dict[int, datetime]:
    """Ground truth: each statement's latest delta snapshot that counted calls, from the raw blocks."""
    out: dict[int, datetime] = {}
    for taken, _, figures in raw_rows(server.pk, START - timedelta(days=1), END + timedelta(days=1)):
        for sid, values in figures.items():
            if values[TOTAL_NAMES.index("calls")] > 0:
                out[sid] = taken
    return out


def _delete_before(table: str, column: str, server: Server, before: datetime) -> None:
    """Expire history as retention would (inside the test's transaction, rolled back after it)."""
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {table} WHERE server_id = %s AND {column} < %s", [server.pk, before])


# -- the dimension --------------------------------------------------------------------------------


def test_detail_is_the_dimension_row_with_its_organization(planned):
    server, synth, _, _ = planned
    sid = _statement_id(server, synth.hostile_key)
    row = Statement.objects.get(pk=sid)
    with db.counting() as c:
        d = statement_detail(statement_id=sid)
    assert c.queries <= 6
    assert (d.statement_id, d.server_id, d.organization_id) == (sid, server.pk, server.organization_id)
    assert (d.queryid, d.userid, d.dbid, d.toplevel) == (row.queryid, row.userid, row.dbid, row.toplevel)
    assert (d.database, d.user) == (row.database_name, row.user_name) and d.database.startswith("db")
    assert d.query == HOSTILE and d.text_status == TextStatus.STORED and not d.query_truncated
    assert d.first_seen_at == row.first_seen_at == START
    evicted = statement_detail(statement_id=_statement_id(server, synth.evicted_key))
    hidden = statement_detail(statement_id=_statement_id(server, synth.hidden_key))
    assert (evicted.query, evicted.text_status) == (None, TextStatus.EVICTED)
    assert (hidden.query, hidden.text_status) == (None, TextStatus.NOT_VISIBLE)


def test_detail_of_an_unknown_statement_or_another_organization(planned):
    server, synth, _, other = planned
    sid = _statement_id(server, synth.hostile_key)
    with pytest.raises(LookupError):
        statement_detail(statement_id=10**12)
    with db.counting() as c, pytest.raises(LookupError):
        statement_detail(statement_id=sid, organization_ids=[other.organization_id])
    assert c.queries == 1  # nothing more is read for a statement the caller may not see
    assert statement_detail(statement_id=sid, organization_ids=[other.organization_id, server.organization_id])


def test_owner_is_one_query_with_the_same_visibility(planned):
    server, synth, _, other = planned
    sid = _statement_id(server, synth.hostile_key)
    with db.counting() as c:
        owner = statement_owner(statement_id=sid, organization_ids=[other.organization_id, server.organization_id])
    assert c.queries == 1  # no search for when it last ran
    assert (owner.statement_id, owner.server_id, owner.organization_id) == (sid, server.pk, server.organization_id)
    assert statement_owner(statement_id=sid) == owner
    with pytest.raises(LookupError):
        statement_owner(statement_id=10**12)
    with pytest.raises(LookupError):
        statement_owner(statement_id=sid, organization_ids=[other.organization_id])
    with pytest.raises(LookupError):
        statement_owner(statement_id=sid, organization_ids=[])


# -- last seen ------------------------------------------------------------------------------------


def test_last_seen_is_the_latest_snapshot_with_calls(planned):
    server, synth, _, _ = planned
    truth = _truth(server)
    ids = list(Statement.objects.filter(server=server).values_list("pk", flat=True))
    assert len(ids) == synth.n and len(truth) > synth.n // 2
    assert _statement_id(server, tuple(synth.keys[3])) not in truth  # retired before the first interval
    in_tail = 0
    for sid in ids:
        with db.counting() as c:
            seen = last_seen_at(server_id=server.pk, statement_id=sid)
        assert c.queries <= 5, sid
        assert seen == ((truth[sid], "snapshot") if sid in truth else (None, None)), sid
        in_tail += sid in truth and truth[sid] >= LAST_ROLLUP
    assert in_tail > 0  # some were found in the snapshots not rolled up yet, the others through the tiers
    retired = [_statement_id(server, tuple(synth.keys[i])) for i in range(3)]
    assert [truth[sid] for sid in retired] == [
        datetime(2026, 10, 31, 5, 0, tzinfo=UTC),  # the last interval ending before its retire time
        datetime(2026, 11, 1, 9, 40, tzinfo=UTC),
        datetime(2026, 10, 30, 23, 0, tzinfo=UTC),
    ]


def test_last_seen_falls_back_to_the_hour_then_the_day(planned):
    server, synth, _, _ = planned
    truth = _truth(server)
    early, late, first = (_statement_id(server, tuple(synth.keys[i])) for i in range(3))
    expired = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
    _delete_before("collectors_snapshot", "taken_at", server, expired)  # raw data of October has expired
    assert last_seen_at(server_id=server.pk, statement_id=early) == (datetime(2026, 10, 31, 6, 0, tzinfo=UTC), "hour")
    assert last_seen_at(server_id=server.pk, statement_id=first) == (datetime(2026, 10, 31, 0, 0, tzinfo=UTC), "hour")
    assert last_seen_at(server_id=server.pk, statement_id=late) == (truth[late], "snapshot")
    _delete_before("collectors_server_hourly", "bucket", server, expired)  # and its hours: days only
    _delete_before("collectors_statement_hourly", "until", server, expired + tiers.HOUR)
    with db.counting() as c:
        assert last_seen_at(server_id=server.pk, statement_id=early) == (expired, "day")
    assert c.queries <= 5
    assert last_seen_at(server_id=server.pk, statement_id=first) == (datetime(2026, 10, 31, 0, 0, tzinfo=UTC), "day")
    assert last_seen_at(server_id=server.pk, statement_id=late) == (truth[late], "snapshot")


# -- the same queryid elsewhere -------------------------------------------------------------------


def test_same_queryid_on_the_organizations_other_servers_only(planned):
    server, synth, twin, other = planned
    sid = _statement_id(server, synth.hostile_key)
    with db.counting() as c:
        rows = same_queryid_elsewhere(statement_id=sid, organization_id=server.organization_id)
    assert c.queries == 1
    twin_sid = _statement_id(twin, synth.hostile_key)
    assert [(r.statement_id, r.server_id, r.server_name) for r in rows] == [(twin_sid, twin.pk, "h3-sel-twin")]
    twin_row = Statement.objects.get(pk=twin_sid)
    assert (rows[0].database, rows[0].user, rows[0].toplevel) == (twin_row.database_name, twin_row.user_name, True)
    assert rows[0].first_seen_at == START
    # Asked for another organization: its servers (the statement's own is never listed).
    assert [r.server_id for r in same_queryid_elsewhere(statement_id=sid, organization_id=other.organization_id)] == [
        other.pk
    ]
    assert same_queryid_elsewhere(statement_id=twin_sid, organization_id=server.organization_id)[0].server_id == (
        server.pk
    )


# -- the plan_share order -------------------------------------------------------------------------


def _share(v: np.ndarray) -> float | None:
    exec_us, plan_us = int(v[TOTAL_NAMES.index("exec_us")]), int(v[TOTAL_NAMES.index("plan_us")])
    return plan_us / (exec_us + plan_us) if exec_us + plan_us else None


@pytest.mark.parametrize(
    "window",
    [
        Window(datetime(2026, 10, 31, 13, 10, tzinfo=UTC), datetime(2026, 11, 1, 21, 30, tzinfo=UTC)),  # tracked
        Window(datetime(2026, 10, 31, 3, 0, tzinfo=UTC), datetime(2026, 10, 31, 19, 0, tzinfo=UTC)),  # partly
    ],
)
def test_plan_share_order_sorts_like_the_raw_sums(planned, window):
    server, _, _, _ = planned
    expected, _ = raw_sums(server.pk, window.start, window.end)
    want = sorted(expected, key=lambda sid: (_share(expected[sid]) is None, -(_share(expected[sid]) or 0), sid))
    got = top_statements(server_id=server.pk, window=window, order="plan_share", page=Page(1, 500))
    assert [r.statement_id for r in got.rows] == want
    assert got.planning.tracked
    assert [r.plan_share for r in got.rows] == pytest.approx([_share(expected[sid]) for sid in want], rel=1e-12)
    assert len({r.plan_share for r in got.rows}) > 3  # really ranked, not all equal
    # Paging in SQL gives the same order, a page at a time.
    pages = [
        top_statements(server_id=server.pk, window=window, order="plan_share", page=Page(n, 7)).rows
        for n in range(1, 5)
    ]
    assert [r.statement_id for p in pages for r in p] == want


def test_plan_share_where_planning_was_not_tracked(planned):
    server, _, _, _ = planned
    window = Window(START, PLAN_FROM - timedelta(hours=1))
    got = top_statements(server_id=server.pk, window=window, order="plan_share", page=Page(1, 500))
    assert got.planning.state == "not tracked" and got.rows
    assert all(r.plan_ms is None and r.plan_share is None for r in got.rows)  # never 0 ms
    assert [r.statement_id for r in got.rows] == sorted(r.statement_id for r in got.rows)  # every share 0: by id
