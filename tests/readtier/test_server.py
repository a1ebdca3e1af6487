"""The server page's selectors (readtier/server.py) against a synthetic history written
through the real collection path, whose settings and versions change at known times, and real failed
collections. `configured_history` (conftest.py) is also the history of the console's server page tests."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from bench import synthetic
from collectors.services import KEEP_ERRORS, server_collect
from history.models import FailedCollection, Snapshot, Statement
from inventory.connection import parse_dsn
from inventory.services import server_create
from readtier import Page, StatementFilters, Window, compare_windows, db, top_statements
from readtier.server import (
    config_changes,
    recent_errors,
    server_settings,
    statement_names,
    statements_in,
    version_text,
)
from tests.readtier.configured import NEW_TEXT, STEP, schedule_for

pytestmark = pytest.mark.django_db


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
    from readtier.server import CONFIG_COLUMNS, setting_text

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
    return server_create(
        name=name, connection=parse_dsn("postgresql://monitor:pw@127.0.0.1:1/app"), organization_name="h2-acme"
    )


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
