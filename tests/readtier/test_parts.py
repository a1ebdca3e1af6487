"""parts: the planning states every surface shows, ServerTotals' arithmetic (signed snapshots, gauges counted only
from snapshots inside a window, rates over the seconds they are known for), the select list that adds up server
buckets, and a server's totals over a window, here against sums computed from the raw snapshots of a small history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from console.services import server_delete
from history.columns import TOTAL_NAMES
from inventory.models import Organization
from readtier import Window, db, parts, windows
from readtier.parts import (
    PlanningState,
    ServerTotals,
    bucket_sums,
    bucket_totals,
    planning_state,
    relative_change,
    window_totals,
)
from tests.alerts.alert_world import Synthetic, collected
from tests.history_world import build, raw_rows

pytestmark = pytest.mark.django_db

START, END = datetime(2026, 6, 11, 7, 3, tzinfo=UTC), datetime(2026, 6, 11, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        s = build("parts-small", n=6, start=START, end=END, step=timedelta(minutes=10))
        yield s
        server_delete(server=s)


@pytest.mark.parametrize(
    "tracked, span, state",
    [
        (0, 0, "no data"),
        (0, -5, "no data"),
        (0, 600, "not tracked"),
        (300, 600, "partly tracked"),
        (600, 600, "tracked"),
    ],
)
def test_planning_state_never_reads_not_tracked_as_zero(tracked, span, state):
    found = planning_state(tracked, span)
    assert found == state and isinstance(found, PlanningState) and str(found) == state


def test_the_audit_exports_schema_knows_every_planning_state_and_no_other():
    schema = json.loads((Path(__file__).resolve().parents[2] / "exports/schemas/audit-export.schema.json").read_text())
    enums = [node["enum"] for node in _nodes(schema) if "enum" in node and "partly tracked" in node["enum"]]
    assert enums and all(sorted(e) == sorted(s.value for s in PlanningState) for e in enums)


def _nodes(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


@pytest.mark.parametrize(
    "now, before, change",
    [(150, 100, 0.5), (50, 100, -0.5), (100, 100, 0.0), (5, 0, None), (None, 100, None), (100, None, None)],
)
def test_a_relative_change_is_none_where_a_side_is_unknown_or_zero(now, before, change):
    assert relative_change(now, before) == change


def test_totals_add_snapshots_and_know_rates_only_where_they_were_counted():
    a = ServerTotals.of_snapshot(600, True, [10, 4, 5000, 800, 20, 1, 0, 0, 0, 99], 6, 100, 5000)
    b = ServerTotals.of_snapshot(300, None, [5, None, 1000, None, 5, 0, 2, 0, 0, 1], None, 120, None)
    t = ServerTotals()
    assert (t.planning, t.per_s("calls"), t.plan_ms_per_s, t.dealloc_per_s) == ("no data", None, None, None)
    t.add(a)
    t.add(b)
    assert (t.snapshots, t.span_s, t.planning_tracked_s, t.planning) == (2, 900, 600, "partly tracked")
    assert t.values.tolist() == [15, 4, 6000, 800, 25, 1, 2, 0, 0, 100] and t.get("exec_us") == 6000
    assert t.per_s("calls") == 15 / 900 and t.per_s("exec_us", 1 / 1000) == pytest.approx(6 / 900)
    assert t.plan_ms_per_s == 0.8 / 600  # over the seconds planning was tracked only
    assert (t.dealloc, t.dealloc_span_s, t.dealloc_per_s) == (6, 600, 6 / 600)  # b's interval knew none
    assert (t.entries_peak, t.entries_max) == (120, 5000)  # a setting not read does not erase the one read


def test_a_subtracted_snapshot_takes_its_sums_away_but_not_its_gauges():
    t = ServerTotals()
    t.add(ServerTotals.of_snapshot(600, False, [10] * len(TOTAL_NAMES), 8, 50, 5000, wait_session_s=3.0))
    t.add(ServerTotals.of_snapshot(200, False, [4] * len(TOTAL_NAMES), 2, 70, 100, sign=-1, wait_session_s=1.0))
    assert (t.snapshots, t.span_s, t.dealloc, t.dealloc_span_s, t.wait_session_s) == (0, 400, 6, 400, 2.0)
    assert t.values.tolist() == [6] * len(TOTAL_NAMES) and t.planning == "not tracked"
    assert (t.entries_peak, t.entries_max) == (50, 5000)


def test_bucket_totals_of_an_empty_sum_are_zero_with_deallocations_unknown():
    t = bucket_totals([None] * (3 + len(TOTAL_NAMES) + 5))
    assert (t.snapshots, t.span_s, t.dealloc, t.entries_peak, t.wait_session_s) == (0, 0.0, None, None, 0.0)
    assert not t.values.any() and t.values.dtype == np.int64


def _raw(server_id: int, start: datetime, end: datetime) -> dict:
    """The server's sums over the delta snapshots taken in [start, end), from the raw rows and blocks."""
    rows = raw_rows(server_id, start, end)
    values = sum((v for _, _, f in rows for v in f.values()), np.zeros(len(TOTAL_NAMES), np.int64))
    with connection.cursor() as cur:
        cur.execute(
            "SELECT sum(dealloc_delta), max(entries), (SELECT sum(session_s) FROM collectors_wait_event "
            "WHERE server_id = %(s)s AND taken_at >= %(a)s AND taken_at < %(b)s) FROM collectors_snapshot "
            "WHERE server_id = %(s)s AND kind = 'delta' AND taken_at >= %(a)s AND taken_at < %(b)s",
            {"s": server_id, "a": start, "b": end},
        )
        dealloc, peak, waits = cur.fetchone()
    return dict(
        n=len(rows), span=sum(r[1] for r in rows), values=values.tolist(), dealloc=dealloc, peak=peak, waits=waits
    )


def _check(t: ServerTotals, raw: dict) -> None:
    assert (t.snapshots, t.span_s, t.values.tolist(), t.dealloc) == (
        raw["n"],
        raw["span"],
        raw["values"],
        raw["dealloc"],
    )
    assert (t.entries_peak, t.wait_session_s) == (raw["peak"], pytest.approx(raw["waits"]))
    assert t.planning == "not tracked" and t.entries_max == 10000


def test_bucket_sums_of_the_hourly_buckets_are_the_raw_sums_of_their_hours(server):
    a, b = datetime(2026, 6, 11, 8, 0, tzinfo=UTC), datetime(2026, 6, 11, 11, 0, tzinfo=UTC)
    row = db.fetchone(
        f"SELECT {bucket_sums('max(entries_max)')} FROM collectors_server_hourly "
        "WHERE server_id = %s AND bucket >= %s AND bucket < %s",
        [server.pk, a, b],
    )
    _check(bucket_totals(row), _raw(server.pk, a, b))


@pytest.mark.parametrize(
    "start, end", [((7, 41), (11, 23)), ((8, 7), (10, 52)), ((8, 0), (10, 0)), ((9, 2), (9, 58)), ((7, 0), (13, 0))]
)
def test_window_totals_are_the_raw_sums_of_the_window(server, start, end):
    window = Window(datetime(2026, 6, 11, *start, tzinfo=UTC), datetime(2026, 6, 11, *end, tzinfo=UTC))
    p = windows.plan(window, windows.coverage(server.pk))
    assert any(sign < 0 for *_, sign in p.raw) == (start in ((8, 7), (9, 2)))  # whole hours less minutes
    _check(window_totals(server.pk, p), _raw(server.pk, window.start, window.end))


def test_nothing_to_read_is_no_data():
    core = parts.core_totals(1, None)
    assert (core.snapshots, core.span_s, core.planning, core.dealloc, core.values.any()) == (
        0,
        0.0,
        "no data",
        None,
        False,
    )
    totals, sums = parts.read_raw(1, [])
    assert (totals.snapshots, totals.planning, len(sums.statement_id)) == (0, "no data", 0)


def test_the_setting_a_window_reports_is_the_one_its_latest_snapshot_read():
    synth = Synthetic(n=4, change_fraction=0.3, start=START, step_s=600)
    synth.entries_max, synth.max_changed_at = "20000", datetime(2026, 6, 11, 10, 5, tzinfo=UTC)
    org = Organization.objects.create(name="parts-max")
    server = collected(synth, organization=org, name="parts-max-db", until=END, step=timedelta(minutes=10))
    window = Window(datetime(2026, 6, 11, 8, 40, tzinfo=UTC), datetime(2026, 6, 11, 10, 25, tzinfo=UTC))
    totals = window_totals(server.pk, windows.plan(window, windows.coverage(server.pk)))
    assert totals.entries_max == 20000  # read at 10:13 and 10:23, after the raise
