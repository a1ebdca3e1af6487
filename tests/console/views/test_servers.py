"""The server page (/servers/<id>/): its charts with data and the configuration changes marked, the
settings card, the recent collection errors of a really failing server, the range picker, the embedded
top statements table, access rules and bounded queries. `make_world` is shared with
test_top.py."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from collectors.errors import summary
from collectors.services import server_collect
from console.services import server_delete
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization, Server
from inventory.services import server_create
from readtier import Window, db, server_series
from readtier.server import config_changes
from tests.history_world import build
from tests.readtier.configured import Configured, build_configured, schedule_for

pytestmark = pytest.mark.django_db

CHARTS = ("chart-time", "chart-calls", "chart-dealloc", "chart-waits", "chart-entries", "chart-hit")


@dataclass
class World:
    now: datetime
    configured: Server  # organization h2-acme: settings change over the last day
    synth: Configured
    plain: Server  # organization h2-other: track_planning off throughout
    alice: User  # viewer in h2-acme
    bob: User  # viewer in h2-other
    staff: User  # is_staff only (the admin site's login), a member of nothing
    superuser: User  # a console administrator


def make_world(prefix: str) -> World:
    """Two synthetic servers with 26 hours of history ending now, in two organizations, and their users."""
    now = timezone.now().replace(second=0, microsecond=0)
    start = now - timedelta(hours=26)
    configured, synth = build_configured(
        f"{prefix}-configured",
        organization=f"{prefix}-acme",
        start=start,
        end=now,
        schedule=schedule_for(now),
        late_from=now - timedelta(hours=3),
    )
    plain = build(f"{prefix}-plain", n=30, start=start, end=now, step=timedelta(minutes=10))
    other = Organization.objects.create(name=f"{prefix}-other")
    Server.objects.filter(pk=plain.pk).update(organization=other)
    plain.refresh_from_db()
    alice = User.objects.create_user(f"{prefix}-alice", password="pw-alice-1")
    bob = User.objects.create_user(f"{prefix}-bob", password="pw-bob-1")
    staff = User.objects.create_user(f"{prefix}-staff", password="pw-staff-1", is_staff=True)
    superuser = User.objects.create_user(f"{prefix}-root", password="pw-root-1", is_staff=True, is_superuser=True)
    Membership.objects.create(user=alice, organization=configured.organization, role=Membership.Role.VIEWER)
    Membership.objects.create(user=bob, organization=other, role=Membership.Role.VIEWER)
    return World(now, configured, synth, plain, alice, bob, staff, superuser)


def drop_world(w: World) -> None:
    for server in (w.configured, w.plain):
        server_delete(server=server)
    User.objects.filter(pk__in=[w.alice.pk, w.bob.pk, w.staff.pk, w.superuser.pk]).delete()


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        w = make_world("h2p")
        yield w
        drop_world(w)


def charts_of(html: str) -> dict[str, dict]:
    """The chart specs a page passes with json_script, by id."""
    found = re.findall(r'<script id="(chart-[\w-]+)" type="application/json">(.*?)</script>', html, re.S)
    return {cid: json.loads(body) for cid, body in found}


def _local(at: datetime) -> str:
    """A time as the custom range's inputs send it (the users here keep UTC)."""
    return at.strftime("%Y-%m-%dT%H:%M")


def page(client, server: Server, **params) -> str:
    response = client.get(reverse("server", args=[server.pk]), params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_every_chart_has_data_and_the_changes_marked(client, world):
    client.force_login(world.alice)
    html = page(client, world.configured, range="24h")
    charts = charts_of(html)
    assert set(charts) == set(CHARTS)
    for cid, spec in charts.items():
        assert spec["x"] and spec["unit"], cid
        assert any(v is not None for s in spec["series"] for v in s["data"]), f"{cid} has no data"
        assert len(spec["markers"]) == 5, cid  # max, track_planning, the upgrade (both versions), sample_rate twice
        assert f'<canvas data-chart="{cid}"' in html
    labels = [m["label"] for m in charts["chart-time"]["markers"]]
    assert labels[0] == "max 10000→20000" and labels[1] == "track_planning off→on"
    assert labels[2] == "server version 17.10→17.11; extension version 1.11→1.12"
    # The marker sits at the snapshot that saw the change.
    change = config_changes(server_id=world.configured.pk, window=Window(world.now - timedelta(hours=24), world.now))
    assert charts["chart-time"]["markers"][0]["x"] == int(change[0].at.timestamp() * 1000)


def test_the_charts_show_the_series_values(client, world):
    client.force_login(world.alice)
    start, end = world.now - timedelta(hours=6), world.now
    html = page(client, world.configured, range="custom", start=_local(start), end=_local(end))
    charts = charts_of(html)
    series = server_series(server_id=world.configured.pk, window=Window(start, end))
    assert series.resolution == "raw"
    calls = charts["chart-calls"]["series"][0]["data"]
    expected = [p.calls_per_s for p in series.points]
    assert len(calls) == len(expected) == 36
    assert all(abs(a - b) < 1e-5 for a, b in zip(calls, expected, strict=True))  # rounded to 6 digits in the JSON
    hit = charts["chart-hit"]["series"][0]["data"]
    assert all(abs(a - p.hit_ratio * 100) < 1e-4 for a, p in zip(hit, series.points, strict=True))
    waits = charts["chart-waits"]["series"]
    assert [s["label"] for s in waits] == series.events and len(waits) >= 2
    entries = charts["chart-entries"]["series"]
    assert [s["label"] for s in entries] == ["entries (peak)", "pg_stat_statements.max"]
    assert entries[1]["data"][-1] == 20000 and entries[0]["data"][-1] == 60
    assert charts["chart-hit"]["unit"] == "%" and charts["chart-hit"]["yMax"] == 100
    assert "pg_stat_statements.max = 20,000" in html


def test_planning_not_tracked_is_said_on_the_chart(client, world):
    client.force_login(world.superuser)
    html = page(client, world.plain, range="24h")
    spec = charts_of(html)["chart-time"]
    assert "Database time per second, execution and planning (planning not tracked)" in html
    plan = spec["series"][1]
    assert plan["label"] == "planning (not tracked)" and all(v is None for v in plan["data"])
    assert any(v is not None for v in spec["series"][0]["data"])
    # track_planning went on 10 hours ago on the other server: not tracked for part of the range.
    assert "(planning not tracked for part of the range)" in page(client, world.configured, range="24h")


def test_the_settings_card(client, world):
    client.force_login(world.alice)
    html = page(client, world.configured)
    card = html[html.index("pg_stat_statements settings") : html.index("Configuration changes in this range")]
    for name, value in (
        ("max", "20000"),
        ("track", "top"),
        ("track_utility", "on"),
        ("track_planning", "on"),
        ("save", "on"),
    ):
        assert re.search(rf"<code>pg_stat_statements\.{name}</code></dt>\s*<dd>\s*<strong>{value}</strong>", card), name
    sample = card[card.index("pg_stat_statements.sample_rate") :]
    assert "not available on this server" in sample and "Tantor" in sample
    assert "least used are evicted" in card and "planning time is counted" in card  # one line on what each means


def test_the_configuration_changes_are_listed(client, world):
    client.force_login(world.alice)
    html = page(client, world.configured, range="24h")
    listed = html[html.index("Configuration changes in this range") : html.index("Recent collection errors")]
    assert listed.count("<tr>") == 1 + 6  # heading + six changes
    assert "<code>server version</code></td><td>17.10</td><td>17.11</td>" in listed
    assert "<code>pg_stat_statements.sample_rate</code></td><td>not available</td><td>0.5</td>" in listed
    quiet = page(client, world.configured, range="1h")
    assert "None seen" in quiet and not charts_of(quiet)["chart-calls"]["markers"]


def test_a_really_failing_server_lists_its_errors(client, world):
    server = server_create(
        name="h2p-closed-port",
        connection=parse_dsn("postgresql://monitor:pw@127.0.0.1:1/app"),
        organization_name=world.configured.organization.name,
    )
    for _ in range(2):
        result = server_collect(server_id=server.pk)
        assert not result.ok and result.error_code == "unreachable"
    server.refresh_from_db()
    client.force_login(world.alice)
    html = page(client, server)
    errors = html[html.index("Recent collection errors") :]
    assert errors.count('<span class="badge failing">unreachable</span>') == 2
    # The member reads the console's sentence; libpq's words and the address tried are console staff's.
    assert errors.count(summary("unreachable")) == 2 and "127.0.0.1:1" not in errors
    assert '<span class="badge failing">failing</span>' in html  # the head says so too
    # No snapshot: no settings and no charts yet, but the page stands.
    assert "No snapshot yet" in html and "No snapshot of this server yet" in html and not charts_of(html)
    assert "No failed collection." in page(client, world.configured)


def test_range_picker_keeps_the_range_in_the_url(client, world):
    client.force_login(world.alice)
    base = reverse("server", args=[world.configured.pk])
    html = page(client, world.configured, range="7d", order="calls")
    assert f'<a href="{base}?range=7d&amp;order=calls" class="active" aria-current="true">7d</a>' in html
    assert f'<a href="{base}?range=1h&amp;order=calls">1h</a>' in html
    # The table's links carry the range and stay on this page.
    assert f'href="{base}?range=7d&amp;order=exec"' in html
    start, end = _local(world.now - timedelta(hours=3)), _local(world.now - timedelta(hours=1))
    custom = page(client, world.configured, range="custom", start=start, end=end)
    assert f'value="{start}"' in custom and f'value="{end}"' in custom
    assert charts_of(custom)["chart-time"]["xMin"] == int((world.now - timedelta(hours=3)).timestamp() * 1000)
    bad = page(client, world.configured, range="3w")
    assert "unknown range &#x27;3w&#x27;" in bad


def test_the_table_is_embedded_and_its_htmx_requests_get_only_the_table(client, world):
    client.force_login(world.alice)
    html = page(client, world.configured)
    assert '<section id="top-statements"' in html and "<html" in html
    # The organization's name leads to the top statements of all its servers.
    organization_url = reverse("organization-statements", args=[world.configured.organization_id])
    assert f'<a href="{organization_url}?range=24h"' in html
    fragment = client.get(reverse("server", args=[world.configured.pk]), {"order": "calls"}, HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert fragment.status_code == 200 and body.lstrip().startswith('<section id="top-statements"')
    assert "<html" not in body and "chart-time" not in body
    assert "HX-Request" in fragment.headers["Vary"]


def test_another_organizations_server_is_a_404(client, world):
    client.force_login(world.bob)
    for server in (world.configured,):
        assert client.get(reverse("server", args=[server.pk])).status_code == 404
        assert client.get(reverse("server", args=[server.pk]), HTTP_HX_REQUEST="true").status_code == 404
    assert client.get(reverse("server", args=[world.plain.pk])).status_code == 200
    assert client.get(reverse("server", args=[999_999_999])).status_code == 404
    # The admin site's login alone opens no organization; a console administrator sees every one.
    client.force_login(world.staff)
    assert client.get(reverse("server", args=[world.configured.pk])).status_code == 404
    client.force_login(world.superuser)
    assert client.get(reverse("server", args=[world.configured.pk])).status_code == 200


def test_the_page_needs_a_login(client, world):
    response = client.get(reverse("server", args=[world.configured.pk]))
    assert response.status_code == 302 and response.headers["Location"].startswith("/?next=")


@pytest.mark.parametrize("range_key", ["1h", "24h", "30d"])
def test_queries_are_bounded(client, world, django_assert_max_num_queries, range_key):
    client.force_login(world.alice)
    client.get(reverse("server", args=[world.configured.pk]))  # the session's time zone is read once
    with django_assert_max_num_queries(6), db.counting() as c:
        page(client, world.configured, range=range_key, compare="1")
    assert c.queries <= 24, c.queries  # 22, and 2 for the hour in progress when it has snapshots


def test_no_inline_script_or_style(client, world):
    client.force_login(world.alice)
    html = page(client, world.configured)
    assert 'style="' not in html and "hx-on" not in html
    assert not re.search(r"<script(?![^>]*(src=|type=\"application/json\"))", html)
    assert not re.search(r"\son[a-z]+=\"", html)


def test_charts_of_a_postgresql_13_server_say_why_dealloc_is_missing():
    """Built from the selectors' dataclasses alone: before 14 there is no dealloc, and a gap stays a gap."""
    from console.views.servers import change_markers, server_charts
    from readtier import ServerPoint, ServerSeries
    from readtier.server import ConfigChange, ServerSettings

    t0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    step = timedelta(minutes=1)
    points = [
        ServerPoint(t0, t0 + step, 60.0, "not tracked", 2.0, 3.0, None, None, 10, 5000, 0.99, {"IO:DataFileRead": 0.5}),
        ServerPoint(t0 + step, t0 + 2 * step, None, None, None, None, None, None, None, None, None, {}),
    ]
    series = ServerSeries(1, Window(t0, t0 + 2 * step), "raw", ["IO:DataFileRead"], points)
    settings = ServerSettings(t0, 130021, "1.8", 5000, "top", True, False, True, None)
    changes = [
        ConfigChange(t0 + step, "pg_stat_statements.max", "5000", "8000"),
        ConfigChange(t0 + step, "pg_stat_statements.track", "top", "all"),
    ]
    markers = change_markers(changes)
    assert markers == [(t0 + step, "max 5000→8000; track top→all")]
    charts = {c.id: c for c in server_charts(series, markers, settings, series.window)}
    assert charts["chart-dealloc"].note == "dealloc needs PostgreSQL 14 (pg_stat_statements_info)"
    assert "pg_stat_statements.max = 5,000" in charts["chart-dealloc"].title
    assert charts["chart-waits"].spec["series"][0]["data"] == [0.5, None]
    assert charts["chart-time"].spec["series"][1]["data"] == [None, None]
    assert all(
        c.spec["markers"] == [{"x": int((t0 + step).timestamp() * 1000), "label": markers[0][1]}]
        for c in charts.values()
    )


def test_each_point_covers_its_interval_so_an_outage_is_a_step_or_a_break():
    """A snapshot taken after an outage covers the outage (its prev_taken_at is before it): the chart gets its
    span, drawn flat across it; after a new baseline nothing covers the outage, and the spans do not meet."""
    from console.views.servers import server_charts
    from readtier import ServerPoint, ServerSeries
    from readtier.server import ServerSettings

    t0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    m = timedelta(minutes=1)

    def point(start, end, calls_per_s):
        span = (end - start).total_seconds()
        return ServerPoint(start, end, span, "tracked", calls_per_s, 1.0, 0.1, 0.0, 10, 5000, 0.99, {})

    first = [point(t0, t0 + m, 100.0), point(t0 + m, t0 + 2 * m, 110.0)]
    spanning = [*first, point(t0 + 2 * m, t0 + 32 * m, 40.0), point(t0 + 32 * m, t0 + 33 * m, 120.0)]
    broken = [*first, point(t0 + 32 * m, t0 + 33 * m, 120.0)]
    settings = ServerSettings(t0, 170004, "1.11", 5000, "top", True, True, True, None)
    for points in (spanning, broken):
        series = ServerSeries(1, Window(t0, t0 + 33 * m), "raw", [], points)
        charts = {c.id: c for c in server_charts(series, [], settings, series.window)}
        for chart in charts.values():
            spec = chart.spec
            assert spec["x"] == [int(p.start.timestamp() * 1000) for p in points], chart.id
            assert spec["xEnd"] == [int(p.end.timestamp() * 1000) for p in points], chart.id
        assert charts["chart-calls"].spec["series"][0]["data"] == [p.calls_per_s for p in points]
    # Spanning: every span meets the next (the 30-minute one drawn flat at its average, 40 calls/s). Broken:
    # the second ends 30 minutes before the third begins, where static/console/console.js breaks the line.
    window = Window(t0, t0 + 33 * m)
    spec = server_charts(ServerSeries(1, window, "raw", [], broken), [], settings, window)[1].spec
    assert spec["x"][2] - spec["xEnd"][1] == 30 * 60_000
