"""The server page's selectors (collectors/selectors/server.py) against a synthetic history written
through the real collection path, whose settings and versions change at known times, and real failed
collections. `configured_history` is also the history of the console's server page tests."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import numpy as np
import pytest
from django.utils import timezone

from bench import synthetic
from collectors import pgss, rollups
from collectors.models import FailedCollection, Snapshot, Statement
from collectors.selectors import Page, StatementFilters, Window, compare_windows, db, top_statements
from collectors.selectors.server import (
    config_changes,
    recent_errors,
    server_settings,
    statement_names,
    statements_in,
    version_text,
)
from collectors.services import KEEP_ERRORS, server_collect
from console.services import server_delete
from inventory.services import server_create
from tests.history_world import HardTexts

pytestmark = pytest.mark.django_db

STEP = timedelta(minutes=10)
HOSTILE = "SELECT '<script>alert(1)</script>' AS x FROM orders WHERE id = $1"
NEW_TEXT = "SELECT /* h2-late */ count(*) FROM late_table"


class Configured(HardTexts):
    """A synthetic server whose settings and versions change at given times (`schedule`: time ->
    what ServerMeta reads from then on), whose hottest statements have a hostile text, no text
    (evicted) and a text the role may not see, and one statement that runs only from `late_from` on."""

    def __init__(self, *, schedule: list[tuple[datetime, dict]], late_from: datetime, **kw):
        super().__init__(**kw)
        self.schedule = sorted(schedule, key=lambda s: s[0])
        self.late_from = late_from
        cost = self.p_run * (1 + self.rate) * self.us_per_call
        hot = self.hard_texts(cost, HOSTILE)
        self.late = int(hot[-1])  # the cheapest: it must not run before late_from
        self.late_key = tuple(self.keys[self.late].tolist())
        self.texts[self.late_key] = NEW_TEXT

    def _pick(self) -> np.ndarray:
        idx = super()._pick()
        idx = idx[idx != self.late]
        if self.taken_at + timedelta(seconds=self.step_us / 1e6) >= self.late_from:
            idx = np.union1d(idx, [self.late])
        return idx

    def meta(self) -> pgss.ServerMeta:
        m = super().meta()
        for at, change in self.schedule:
            if self.taken_at >= at:
                settings = {**m.settings, **change.get("settings", {})}
                settings = {k: v for k, v in settings.items() if v is not None}
                version = change.get("version", m.server_version_num)
                extension = change.get("extension", m.extension_version)
                m = dataclasses.replace(m, settings=settings, server_version_num=version, extension_version=extension)
        return m


def build_configured(
    name: str,
    *,
    organization: str,
    start: datetime,
    end: datetime,
    schedule: list[tuple[datetime, dict]],
    late_from: datetime,
    n: int = 60,
):
    """Like tests/history_world.build, with a Configured server: a snapshot every STEP in [start, end),
    rolled up every hour and at the end. Returns (server, the synthetic server)."""
    server = synthetic.register(name)
    from inventory.models import Organization, Server

    org, _ = Organization.objects.get_or_create(name=organization)
    Server.objects.filter(pk=server.pk).update(organization=org)
    synth = Configured(
        n=n,
        change_fraction=0.3,
        start=start,
        step_s=int(STEP.total_seconds()),
        seed=5,
        schedule=schedule,
        late_from=late_from,
    )
    last_rollup = start
    with synthetic.reading_from(synth):
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + STEP < end:
            synth.step()
            assert server_collect(server_id=server.pk).ok
            if synth.taken_at - last_rollup >= timedelta(hours=1):
                rollups.roll_up(now=synth.taken_at)
                last_rollup = synth.taken_at
    rollups.roll_up(now=end + timedelta(days=1))
    server.refresh_from_db()
    return server, synth


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def schedule_for(now: datetime) -> list[tuple[datetime, dict]]:
    """Within the last 24 hours: max raised (a restart), track_planning on, a minor upgrade with a new
    extension version, and sample_rate appearing (a fork) then going away again."""
    return [
        (now - timedelta(hours=20), {"settings": {"pg_stat_statements.max": "20000"}}),
        (now - timedelta(hours=10), {"settings": {"pg_stat_statements.track_planning": "on"}}),
        (now - timedelta(hours=5), {"version": 170011, "extension": "1.12"}),
        (now - timedelta(hours=3), {"settings": {"pg_stat_statements.sample_rate": "0.5"}}),
        (now - timedelta(hours=2), {"settings": {"pg_stat_statements.sample_rate": None}}),
    ]


@pytest.fixture(scope="module")
def configured_history(django_db_setup, django_db_blocker):
    """A Configured server over the last 26 hours (ending now), in organization h2-acme."""
    now = _minute(timezone.now())
    with django_db_blocker.unblock():
        server, synth = build_configured(
            "h2-configured",
            organization="h2-acme",
            start=now - timedelta(hours=26),
            end=now,
            schedule=schedule_for(now),
            late_from=now - timedelta(hours=3),
        )
        yield server, synth, now
        server_delete(server=server)


def _snapshots(server_id: int) -> list[Snapshot]:
    return list(Snapshot.objects.filter(server_id=server_id).order_by("taken_at"))


# -- settings ---------------------------------------------------------------------------------------


def test_settings_are_those_of_the_latest_snapshot(configured_history):
    server, _, _ = configured_history
    latest = _snapshots(server.pk)[-1]
    with db.counting() as c:
        s = server_settings(server_id=server.pk)
    assert c.queries == 1
    assert s.taken_at == latest.taken_at
    assert (s.entries_max, s.track, s.track_utility, s.track_planning, s.save) == (20000, "top", True, True, True)
    assert s.sample_rate is None  # gone again: "not available on this server"
    assert (s.server_version_num, s.extension_version) == (170011, "1.12")
    assert s.text("entries_max") == "20000" and s.text("track_planning") == "on" and s.text("sample_rate") is None
    assert s.text("server_version_num") == "17.11"


def test_settings_of_a_server_never_collected():
    server = synthetic.register("h2-never")
    s = server_settings(server_id=server.pk)
    assert s.taken_at is None and s.entries_max is None and s.track is None


def test_version_text():
    assert version_text(170004) == "17.4" and version_text(130021) == "13.21" and version_text(None) is None


# -- configuration changes --------------------------------------------------------------------------


def _expected_changes(server_id: int, window: Window) -> list[tuple[datetime, str, str | None, str | None]]:
    """Ground truth from the snapshot rows through the ORM: each snapshot in the window against the one before."""
    from collectors.selectors.server import CONFIG_COLUMNS, setting_text

    rows = _snapshots(server_id)
    out = []
    for before, now in zip(rows, rows[1:], strict=False):
        if not window.start <= now.taken_at < window.end:
            continue
        for column, setting in CONFIG_COLUMNS.items():
            a, b = getattr(before, column), getattr(now, column)
            if a != b:
                out.append((now.taken_at, setting, setting_text(column, a), setting_text(column, b)))
    return out


def test_config_changes_over_the_day(configured_history):
    server, _, now = configured_history
    window = Window(now - timedelta(hours=24), now + timedelta(minutes=1))
    with db.counting() as c:
        changes = config_changes(server_id=server.pk, window=window)
    assert c.queries == 1
    got = [(x.at, x.setting, x.before, x.after) for x in changes]
    assert got == _expected_changes(server.pk, window)
    assert [(s, b, a) for _, s, b, a in got] == [
        ("pg_stat_statements.max", "10000", "20000"),
        ("pg_stat_statements.track_planning", "off", "on"),
        ("server version", "17.10", "17.11"),
        ("extension version", "1.11", "1.12"),
        ("pg_stat_statements.sample_rate", None, "0.5"),
        ("pg_stat_statements.sample_rate", "0.5", None),
    ]
    # Each change is seen by the first snapshot at or after the time it was made.
    schedule = schedule_for(now)
    assert changes[0].at - schedule[0][0] < STEP and changes[0].at >= schedule[0][0]
    assert changes[2].at == changes[3].at  # the upgrade changed both versions at once


def test_a_change_at_the_windows_first_snapshot_is_against_the_one_before(configured_history):
    server, _, now = configured_history
    first = config_changes(server_id=server.pk, window=Window(now - timedelta(hours=24), now))[0]
    at_start = config_changes(server_id=server.pk, window=Window(first.at, first.at + timedelta(minutes=1)))
    assert [(c.setting, c.before, c.after) for c in at_start] == [("pg_stat_statements.max", "10000", "20000")]
    just_after = Window(first.at + timedelta(seconds=1), first.at + timedelta(hours=1))
    assert config_changes(server_id=server.pk, window=just_after) == []


def test_no_changes_in_a_quiet_window(configured_history):
    server, _, now = configured_history
    quiet = Window(now - timedelta(hours=26), now - timedelta(hours=21))
    assert config_changes(server_id=server.pk, window=quiet) == []


# -- failed collections -----------------------------------------------------------------------------


def _closed_port_server(name: str):
    """A server whose collections really fail: nothing listens on port 1."""
    return server_create(name=name, dsn="postgresql://monitor:pw@127.0.0.1:1/app", organization_name="h2-acme")


def test_a_failed_collection_is_kept_and_listed_newest_first():
    server = _closed_port_server("h2-closed")
    for _ in range(3):
        result = server_collect(server_id=server.pk)
        assert not result.ok and result.error_code == "unreachable", result.summary()
    with db.counting() as c:
        errors = recent_errors(server_id=server.pk)
    assert c.queries == 1
    assert len(errors) == 3
    assert all(e.error_class == "unreachable" and "127.0.0.1:1" in e.message for e in errors)
    assert [e.at for e in errors] == sorted((e.at for e in errors), reverse=True)
    server.refresh_from_db()
    assert errors[0].message == server.last_error_message
    assert len(recent_errors(server_id=server.pk, limit=2)) == 2


def test_only_the_last_errors_are_kept():
    server = _closed_port_server("h2-many-failures")
    old = timezone.now() - timedelta(days=1)
    FailedCollection.objects.bulk_create(
        FailedCollection(server=server, at=old + timedelta(minutes=i), error_class="timeout", message=f"old {i}")
        for i in range(KEEP_ERRORS + 5)
    )
    assert not server_collect(server_id=server.pk).ok
    kept = FailedCollection.objects.filter(server=server)
    assert kept.count() == KEEP_ERRORS
    # The newest stay: the one just written, and the latest KEEP_ERRORS - 1 of the old ones.
    assert kept.filter(error_class="unreachable").count() == 1
    assert sorted(kept.exclude(error_class="unreachable").values_list("message", flat=True)) == sorted(
        f"old {i}" for i in range(6, KEEP_ERRORS + 5)
    )
    other = _closed_port_server("h2-other-failing")
    assert recent_errors(server_id=other.pk) == []


# -- the statements' dimension and a page against the previous period -------------------------------


def test_statement_names(configured_history):
    server, _, _ = configured_history
    names = statement_names(server_id=server.pk)
    rows = Statement.objects.filter(server=server)
    assert names.databases == sorted(set(rows.values_list("database_name", flat=True))) == ["db0", "db1"]
    assert names.users == sorted(set(rows.values_list("user_name", flat=True)))
    assert len(names.users) == 3


def test_statements_in_agrees_with_compare_windows(configured_history):
    server, _, now = configured_history
    window = Window(now - timedelta(hours=6), now)
    page = top_statements(server_id=server.pk, window=window, page=Page(1, 20))
    ids = [r.statement_id for r in page.rows]
    with db.counting() as c:
        previous = statements_in(server_id=server.pk, window=window.previous(), statement_ids=ids)
    assert c.queries <= 5
    expected = {
        ch.statement_id: ch.previous
        for ch in compare_windows(server_id=server.pk, window=window).changes
        if ch.statement_id in ids and ch.previous is not None
    }
    assert previous == expected
    late = Statement.objects.get(server=server, query=NEW_TEXT).pk
    found = top_statements(server_id=server.pk, window=window, filters=StatementFilters(text="h2-late")).rows
    assert [r.statement_id for r in found] == [late]
    assert late not in statements_in(server_id=server.pk, window=window.previous(), statement_ids=ids + [late])
    assert late in statements_in(server_id=server.pk, window=window, statement_ids=[late])
    assert statements_in(server_id=server.pk, window=window, statement_ids=[]) == {}
    # The span the history covers comes along (the compare notice of partly covered periods).
    assert previous.span_s == compare_windows(server_id=server.pk, window=window).previous_planning.span_s > 0
    before_history = Window(now - timedelta(days=30), now - timedelta(days=29))
    assert statements_in(server_id=server.pk, window=before_history, statement_ids=ids).span_s == 0


# -- across the servers of an organization (collectors/selectors/across.py) ---------------------------


@pytest.fixture(scope="module")
def second_server(configured_history, django_db_blocker):
    """A plain synthetic server over the same hours, in the same organization."""
    from inventory.models import Server
    from tests.history_world import build

    configured, _, now = configured_history
    with django_db_blocker.unblock():
        server = build("h2-second", n=25, start=now - timedelta(hours=26), end=now, step=STEP, seed=3)
        Server.objects.filter(pk=server.pk).update(organization=configured.organization)
        yield server
        server_delete(server=server)


@pytest.mark.parametrize("order", ["total", "calls", "mean", "plan", "wal"])
def test_statements_across_servers_merge_each_servers_list(configured_history, second_server, order):
    from collectors.selectors.across import SORT_KEYS, statements_across

    configured, _, now = configured_history
    ids = [configured.pk, second_server.pk]
    window = Window(now - timedelta(hours=6), now)
    everything = []
    for sid in ids:
        top = top_statements(server_id=sid, window=window, order=order, page=Page(1, 500))
        everything += [(sid, s) for s in top.rows]

    def key(item):
        value = getattr(item[1], SORT_KEYS[order])
        return (value is None, -(value or 0), item[0], item[1].statement_id)

    everything.sort(key=key)
    for number in (1, 2, 3):
        with db.counting() as c:
            got = statements_across(server_ids=ids, window=window, order=order, page=Page(number, 20))
        assert c.queries <= 6 * len(ids)
        assert [(r.server_id, r.statement) for r in got.rows] == everything[(number - 1) * 20 : number * 20]
        assert got.total_count == len(everything)
    if order == "plan":  # planning not tracked on the second server: its statements come last
        assert [sid for sid, _ in everything] == sorted((sid for sid, _ in everything), key=ids.index)
    else:
        assert {sid for sid, _ in everything[:40]} == set(ids)  # both servers are in the first pages
    # track_planning on (configured, since 10 hours) and off (second): tracked somewhere, not everywhere.
    assert got.planning_tracked and not got.planning_everywhere


def test_statements_across_filters_and_limits(configured_history, second_server):
    from collectors.selectors.across import MAX_PAGES, statement_names_across, statements_across

    configured, _, now = configured_history
    ids = [configured.pk, second_server.pk]
    window = Window(now - timedelta(hours=6), now)
    got = statements_across(server_ids=ids, window=window, filters=StatementFilters(database="db1"))
    assert got.rows and all(r.statement.database == "db1" for r in got.rows)
    expected = sum(
        top_statements(server_id=s, window=window, filters=StatementFilters(database="db1")).total_count for s in ids
    )
    assert got.total_count == expected
    with pytest.raises(ValueError, match="first 500"):
        statements_across(server_ids=ids, window=window, page=Page(MAX_PAGES + 1, 50))
    with pytest.raises(ValueError, match="unknown order"):
        statements_across(server_ids=ids, window=window, order="nonsense")
    assert statements_across(server_ids=[], window=window).rows == []
    databases, users = statement_names_across(server_ids=ids)
    assert databases == ["db0", "db1"] and users == ["app_user0", "app_user1", "app_user2"]
