"""The statement page (/statements/<id>/): the escaped, highlighted text or why there is none, the
statement's facts, its figures and charts over the range as the selectors give them, its wait events,
the same queryid elsewhere in the organization, access rules and bounded queries. `make_world` is
shared with test_planning.py."""

from __future__ import annotations

import html as htmllib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from collectors.redact import redact
from console.services import server_delete
from history.models import Statement
from inventory.models import Membership, Organization, Server
from readtier import Window, db, statement_series, wait_events
from readtier.server import statements_in
from readtier.statement_detail import last_seen_at
from tests.history_world import build
from tests.readtier.test_statement_detail import HOSTILE, Planned, build_planned

pytestmark = pytest.mark.django_db

CHARTS = ("chart-calls", "chart-mean", "chart-rows", "chart-hit", "chart-temp")
SEED = 9  # build_planned's: the plain server gets the same queryids


@dataclass
class World:
    now: datetime
    planned: Server  # h3p-acme: track_planning on for the last ~10 hours; statement 0 stopped 20 hours ago
    synth: Planned
    twin: Server  # h3p-acme: the same queryids; its inventory row says PostgreSQL 13
    plain: Server  # h3p-other: bench/synthetic.py as it is, track_planning off throughout
    alice: User  # viewer in h3p-acme
    bob: User  # viewer in h3p-other
    staff: User  # is_staff only (the admin site's login), a member of nothing
    superuser: User  # a console administrator

    def sid(self, server: Server, key: tuple) -> int:
        userid, dbid, queryid, toplevel = key
        return Statement.objects.get(
            server=server, userid=userid, dbid=dbid, queryid=queryid, toplevel=bool(toplevel)
        ).pk


def make_world(prefix: str) -> World:
    """Three synthetic servers with history ending now, in two organizations, and their users."""
    now = timezone.now().replace(second=0, microsecond=0)
    step = timedelta(minutes=15)
    if now.minute < step.seconds // 60:
        # No snapshot would fall in the hour of `now` (a gap at the end of every chart, rightly): end the
        # history just before that hour instead, so that the tests read whole hours at both ends.
        now = now.replace(minute=0) - timedelta(minutes=1)
    start = now - timedelta(hours=26)
    # On about 10 hours ago, at half past: the hour it went on in is tracked for part of its time.
    plan_from = now.replace(minute=0) - timedelta(hours=10) + timedelta(minutes=30)
    planned, synth = build_planned(
        f"{prefix}-planned",
        organization=f"{prefix}-acme",
        start=start,
        end=now,
        step=step,
        plan_from=plan_from,
        retire=(now - timedelta(hours=20),),
    )
    twin, _ = build_planned(
        f"{prefix}-twin", organization=f"{prefix}-acme", start=now - timedelta(hours=2), end=now, step=step
    )
    Server.objects.filter(pk=twin.pk).update(server_version_num=130012)
    twin.refresh_from_db()
    plain = build(f"{prefix}-plain", n=24, start=start, end=now, step=step, seed=SEED)
    other = Organization.objects.create(name=f"{prefix}-other")
    Server.objects.filter(pk=plain.pk).update(organization=other)
    plain.refresh_from_db()
    alice = User.objects.create_user(f"{prefix}-alice", password="pw-alice-1")
    bob = User.objects.create_user(f"{prefix}-bob", password="pw-bob-1")
    staff = User.objects.create_user(f"{prefix}-staff", password="pw-staff-1", is_staff=True)
    superuser = User.objects.create_user(f"{prefix}-root", password="pw-root-1", is_staff=True, is_superuser=True)
    Membership.objects.create(user=alice, organization=planned.organization, role=Membership.Role.VIEWER)
    Membership.objects.create(user=bob, organization=other, role=Membership.Role.VIEWER)
    return World(now, planned, synth, twin, plain, alice, bob, staff, superuser)


def drop_world(w: World) -> None:
    for server in (w.planned, w.twin, w.plain):
        server_delete(server=server)
    User.objects.filter(pk__in=[w.alice.pk, w.bob.pk, w.staff.pk, w.superuser.pk]).delete()


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        w = make_world("h3p")
        yield w
        drop_world(w)


def charts_of(html: str) -> dict[str, dict]:
    found = re.findall(r'<script id="(chart-[\w-]+)" type="application/json">(.*?)</script>', html, re.S)
    return {cid: json.loads(body) for cid, body in found}


def figures_of(html: str) -> dict[str, str]:
    """The "In this range" figures, label -> text."""
    return {
        htmllib.unescape(k): htmllib.unescape(v)
        for k, v in re.findall(r"<div><dt>(.*?)</dt><dd[^>]*>(.*?)</dd></div>", html)
    }


def local(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M")  # the users here keep UTC


def get(client, statement_id: int, **params):
    return client.get(reverse("statement", args=[statement_id]), params)


def page(client, statement_id: int, **params) -> str:
    response = get(client, statement_id, **params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def custom(w: World, hours: float = 24) -> tuple[Window, dict[str, str]]:
    start, end = w.now - timedelta(hours=hours), w.now
    return Window(start, end), {"range": "custom", "start": local(start), "end": local(end)}


# -- the text ------------------------------------------------------------------------------------


def test_the_text_is_highlighted_and_escaped(client, world):
    client.force_login(world.alice)
    html = page(client, world.sid(world.planned, world.synth.hostile_key))
    text = html[html.index('<pre class="sql">') : html.index("</pre>")]
    assert "<script" not in html.replace('<script id="chart-', "").replace('<script src="', "")
    assert '<span class="str">&#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;</span>' in text
    assert '<span class="cmt">/* &lt;script&gt;alert(2)&lt;/script&gt; */</span>' in text
    assert '<span class="kw">SELECT</span>' in text and '<span class="param">$1</span>' in text
    assert htmllib.unescape(re.sub(r"<[^>]+>", "", text)) == HOSTILE


def test_a_missing_text_says_why(client, world):
    client.force_login(world.alice)
    evicted = page(client, world.sid(world.planned, world.synth.evicted_key))
    assert "Its text was evicted before it could be read." in evicted and '<pre class="sql">' not in evicted
    hidden = page(client, world.sid(world.planned, world.synth.hidden_key))
    assert "Its text is not visible to the monitoring role." in hidden and "pg_read_all_stats" in hidden


# -- the facts and the figures -------------------------------------------------------------------


def test_the_facts_of_the_statement(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    row = Statement.objects.get(pk=sid)
    html = page(client, sid)
    assert f"<dt>Database</dt><dd>{row.database_name}</dd>" in html and f"<dt>User</dt><dd>{row.user_name}</dd>" in html
    assert "<dt>Top level</dt><dd>yes" in html and f"<code>{row.queryid}</code>" in html
    assert f"<dt>First seen</dt><dd>{row.first_seen_at:%Y-%m-%d %H:%M}</dd>" in html
    last = re.search(r'<dd class="last-seen">\s*(.*?)\s*<span', html, re.S).group(1)
    seen = last_seen_at(server_id=world.planned.pk, statement_id=sid)
    assert last == f"{seen[0]:%Y-%m-%d %H:%M}" and seen[1] == "snapshot" and world.now - seen[0] < timedelta(hours=2)
    assert "(the snapshot that last counted calls)" in html
    stopped = page(client, world.sid(world.planned, tuple(world.synth.keys[0])))
    assert re.search(r'<dd class="last-seen">\s*(.*?)\s*<span', stopped, re.S).group(1) == (
        f"{world.now - timedelta(hours=20):%Y-%m-%d %H:%M}"  # the last interval that ended before it stopped
    )


def test_the_figures_are_the_selectors(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    window, params = custom(world)
    figures = figures_of(page(client, sid, **params))
    t = statements_in(server_id=world.planned.pk, window=window, statement_ids=[sid])[sid]
    assert t.calls > 0 and t.plan_ms > 0  # planning tracked for the last 10 of these 24 hours
    assert figures["Calls"] == f"{t.calls:,}"
    assert figures["Execution (ms)"] == f"{t.exec_ms:,.1f}" and figures["Planning (ms)"] == f"{t.plan_ms:,.1f}"
    assert figures["Total time (ms)"] == f"{t.total_ms:,.1f}" and figures["Plans"] == f"{t.plans:,}"
    assert figures["Plan share (%)"] == f"{t.plan_share * 100:,.1f}"
    assert figures["Rows"] == f"{t.rows:,}" and figures["Rows per call"] == f"{t.rows_per_call:,.2f}"
    assert figures["Shared buffer hit ratio (%)"] == f"{t.hit_ratio * 100:,.2f}"
    assert figures["WAL (bytes)"] == f"{t.wal_bytes:,}"


def test_every_chart_has_the_series_values(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    window, params = custom(world, hours=6)
    html = page(client, sid, **params)
    charts = charts_of(html)
    assert set(charts) == set(CHARTS)
    for cid, spec in charts.items():
        assert spec["unit"] and spec["x"], cid
        assert any(v is not None for s in spec["series"] for v in s["data"]), f"{cid} has no data"
        assert f'<canvas data-chart="{cid}"' in html
    series = statement_series(statement_id=sid, window=window)
    assert series.resolution == "raw" and len(series.points) == 24

    def same(data, values):
        return len(data) == len(values) and all(
            (a is None and b is None) or abs(a - b) < 1e-5 for a, b in zip(data, values, strict=True)
        )

    assert same(charts["chart-calls"]["series"][0]["data"], [p.calls_per_s for p in series.points])
    exec_, plan = charts["chart-mean"]["series"]
    assert same(exec_["data"], [p.mean_exec_ms for p in series.points])
    assert same(plan["data"], [p.mean_plan_ms for p in series.points]) and plan["label"] == "planning"
    assert same(charts["chart-rows"]["series"][0]["data"], [p.rows_per_call for p in series.points])
    assert same(
        charts["chart-hit"]["series"][0]["data"],
        [None if p.hit_ratio is None else p.hit_ratio * 100 for p in series.points],
    )
    assert same(
        charts["chart-temp"]["series"][0]["data"],
        [None if p.temp_blks is None else p.temp_blks / p.span_s for p in series.points],
    )
    assert charts["chart-calls"]["xMin"] == int(window.start.timestamp() * 1000)


def test_planning_not_tracked_is_never_zero(client, world):
    client.force_login(world.bob)
    sid = world.sid(world.plain, world.synth.hostile_key)
    html = page(client, sid, range="24h")
    figures = figures_of(html)
    assert figures["Calls"] != "0"
    for label in ("Planning (ms)", "Plans", "Mean planning (ms)", "Plan share (%)"):
        assert figures[label] == "not tracked", label
    assert "Planning not tracked</span> in this range" in html
    mean = charts_of(html)["chart-mean"]
    assert mean["series"][1]["label"] == "planning (not tracked)"
    assert all(v is None for v in mean["series"][1]["data"])
    assert "planning not tracked (pg_stat_statements.track_planning was off)" in html
    # Tracked for the last 10 hours of the day on the other server: said on the chart for the rest.
    client.force_login(world.alice)
    partly = page(client, world.sid(world.planned, world.synth.hostile_key), range="24h")
    assert "planning not tracked for part of the range" in partly


def test_a_statement_that_did_not_run_in_the_range(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, tuple(world.synth.keys[0]))  # stopped 20 hours ago
    start = world.now - timedelta(hours=12)
    html = page(client, sid, range="custom", start=local(start), end=local(start + timedelta(hours=2)))
    assert "It did not run in this range." in html
    charts = charts_of(html)
    assert charts["chart-calls"]["series"][0]["data"] == [0.0] * 8  # no call is 0 calls/s: the server was watched
    for cid in ("chart-mean", "chart-rows", "chart-hit"):  # a mean of no call is no value, not 0
        assert all(v is None for s in charts[cid]["series"] for v in s["data"]), cid


# -- wait events -------------------------------------------------------------------------------------


def test_the_wait_events_of_its_query_id(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    window, params = custom(world)
    html = page(client, sid, **params)
    waits = wait_events(server_id=world.planned.pk, window=window, statement_id=sid, top=10)
    assert waits.rows
    table = html[html.index('<table class="data waits">') :]
    table = table[: table.index("</table>")]
    got = re.findall(r'<tr><td>(.*?)</td><td class="num">(.*?)</td>', table)
    assert [htmllib.unescape(e) for e, _ in got] == [w.event for w in waits.rows]
    assert all(abs(float(a) - w.active_sessions) < 0.6e-4 for (_, a), w in zip(got, waits.rows, strict=True))


def test_wait_events_by_query_need_postgresql_14(client, world):
    client.force_login(world.alice)
    html = page(client, world.sid(world.twin, world.synth.hostile_key))
    assert "wait events by query need PostgreSQL 14 (this server runs 13.12)" in html
    assert '<table class="data waits">' not in html


# -- the same queryid elsewhere --------------------------------------------------------------------


def test_the_same_queryid_on_the_organizations_other_servers(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    html = page(client, sid, range="6h")
    card = html[html.index("The same queryid on the organization") :]
    twin_sid = world.sid(world.twin, world.synth.hostile_key)
    assert f'<a href="{reverse("statement", args=[twin_sid])}?range=6h">h3p-twin</a>' in card
    assert "h3p-plain" not in card  # the same queryid in another organization is not shown
    client.force_login(world.bob)
    alone = page(client, world.sid(world.plain, world.synth.hostile_key))
    assert "Not seen on the organization's other servers." in alone


# -- range, fragments, access, queries ---------------------------------------------------------------


def test_the_range_is_kept_in_the_url(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    base = reverse("statement", args=[sid])
    html = page(client, sid, range="7d")
    assert f'<a href="{base}?range=7d" class="active" aria-current="true">7d</a>' in html
    assert f'<a href="{base}?range=1h">1h</a>' in html
    assert f'href="{reverse("planning", args=[world.planned.pk])}?range=7d"' in html
    assert f'href="{reverse("server", args=[world.planned.pk])}?range=7d"' in html
    _, params = custom(world, hours=3)
    assert f'value="{params["start"]}"' in page(client, sid, **params)
    assert "unknown range &#x27;3w&#x27;" in page(client, sid, range="3w")


def test_an_htmx_request_gets_the_body_only(client, world):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    response = client.get(reverse("statement", args=[sid]), {"range": "6h"}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200 and "HX-Request" in response.headers["Vary"]
    assert body.lstrip().startswith('<div id="statement-body">') and "<html" not in body
    assert set(charts_of(body)) == set(CHARTS) and "Normalized text" not in body


def test_another_organizations_statement_is_a_404(client, world):
    mine = world.sid(world.planned, world.synth.hostile_key)
    theirs = world.sid(world.plain, world.synth.hostile_key)
    client.force_login(world.bob)
    for params in ({}, {"range": "1h"}):
        assert get(client, mine, **params).status_code == 404
        assert client.get(reverse("statement", args=[mine]), params, headers={"HX-Request": "true"}).status_code == 404
    assert get(client, theirs).status_code == 200
    client.force_login(world.alice)
    assert get(client, theirs).status_code == 404 and get(client, 10**12).status_code == 404
    # The admin site's login alone opens no organization; a console administrator sees every one.
    client.force_login(world.staff)
    assert get(client, mine).status_code == 404 and get(client, theirs).status_code == 404
    client.force_login(world.superuser)
    assert get(client, mine).status_code == 200 and get(client, theirs).status_code == 200
    client.logout()
    assert get(client, mine).status_code == 302


def test_queries_are_bounded(client, world, django_assert_max_num_queries):
    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    for params in ({"range": "1h"}, {"range": "24h"}, {"range": "30d"}):
        with django_assert_max_num_queries(10), db.counting() as c:
            assert get(client, sid, **params).status_code == 200
        # detail and last seen <= 6, series <= 6 (2 of them for the hour in progress, when it has snapshots),
        # the range's totals <= 6, wait events <= 5, elsewhere 1, plan changes 1
        assert c.queries <= 25, (params, c.queries)


def test_each_plan_change_is_marked_on_every_chart_and_named_under_them(client, world):
    from history import plans

    client.force_login(world.alice)
    sid = world.sid(world.planned, world.synth.hostile_key)
    changed = world.now - timedelta(hours=2)
    for paths, at in (
        (["Index Scan using orders_customer_idx on orders"], world.now - timedelta(hours=5)),
        (["Seq Scan on orders"], changed),
    ):
        node = paths[0].split(" on ")[0].split(" using ")[0]
        plan = {"Plan": {"Node Type": node, "Relation Name": "orders", "Total Cost": 1.0, "Plan Rows": 1.0}}
        new = plans.NewPlan(plan, node.replace(" ", "").ljust(32, "0"), paths, 1, "generic_plan")
        plans.record_plan(world.planned.pk, sid, new, at=at, redact=redact)
    named = "the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders"

    html = page(client, sid, **custom(world, hours=6)[1])
    for cid, spec in charts_of(html).items():
        assert spec["markers"] == [{"x": int(changed.timestamp() * 1000), "label": "new plan"}], cid
    assert f"{changed:%Y-%m-%d %H:%M}</span> {named}</li>" in html
    # Outside the range: no mark, no words.
    html = page(client, sid, **custom(world, hours=1)[1])
    assert all(spec["markers"] == [] for spec in charts_of(html).values()) and named not in html
