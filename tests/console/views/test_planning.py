"""The planning-vs-execution page (/servers/<id>/planning/): the rankings by plan share and by plan time
as top_statements gives them, the server's plan share over time, "planning not tracked" with when and
what enabling it costs (never 0 ms), access rules and bounded queries. The world is the statement
page tests' (tests/console/views/test_statements.py)."""

from __future__ import annotations

import html as htmllib
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from console.views.planning import MATERIAL_SHARE, untracked_intervals
from readtier import Page, StatementFilters, Window, db, server_series, top_statements
from readtier.coverage import window_summary
from tests.console.views.test_statements import charts_of, drop_world, local, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        w = make_world("h3q")
        yield w
        drop_world(w)


def get(client, server, **params):
    return client.get(reverse("planning", args=[server.pk]), params)


def page(client, server, **params) -> str:
    response = get(client, server, **params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def ranking(html: str, table_id: str) -> list[tuple[int, list[str]]]:
    """(statement id, the cells after user) of a ranking table."""
    section = html[html.index(f'id="{table_id}"') :]
    section = section[: section.index("</table>")]
    rows = re.findall(r'<tr data-statement="(\d+)">(.*?)</tr>', section, re.S)
    return [
        (int(sid), [htmllib.unescape(c) for c in re.findall(r'<td class="num">(.*?)</td>', body)]) for sid, body in rows
    ]


def window_of(w, hours: float, *, ago: float = 0) -> tuple[Window, dict[str, str]]:
    end = w.now - timedelta(hours=ago)
    start = end - timedelta(hours=hours)
    return Window(start, end), {"range": "custom", "start": local(start), "end": local(end)}


def test_the_rankings_are_top_statements_by_plan_share_and_plan_time(client, world):
    client.force_login(world.alice)
    window, params = window_of(world, 8)  # inside the 10 hours with track_planning on
    html = page(client, world.planned, **params)
    material = StatementFilters(min_time_share=MATERIAL_SHARE)
    rankings = (("plan_share", "by-plan-share", material), ("plan", "by-plan-time", StatementFilters()))
    for order, table_id, filters in rankings:
        top = top_statements(server_id=world.planned.pk, window=window, order=order, filters=filters, page=Page(1, 20))
        got = ranking(html, table_id)
        assert [sid for sid, _ in got] == [r.statement_id for r in top.rows] and len(got) > 1, order
        for (_, cells), r in zip(got, top.rows, strict=True):
            calls, plans, exec_ms, plan_ms, _, share = cells
            assert (calls, plans) == (f"{r.calls:,}", f"{r.plans:,}")
            assert (exec_ms, plan_ms) == (f"{r.exec_ms:,.1f}", f"{r.plan_ms:,.1f}")
            assert share == f"{r.plan_share * 100:,.1f}"
        shares = [r.plan_share for r in top.rows]
        if order == "plan_share":
            assert shares == sorted(shares, reverse=True)
            # Ranked among the statements with material time only: each has 1% of the server's time or more,
            # and every statement left out has less.
            db_ms = window_summary(server_id=world.planned.pk, window=window).db_time_ms
            every = top_statements(server_id=world.planned.pk, window=window, order="plan_share", page=Page(1, 500))
            kept = {r.statement_id for r in every.rows if r.exec_ms + (r.plan_ms or 0) >= MATERIAL_SHARE * db_ms}
            assert {r.statement_id for r in top.rows} == kept or len(top.rows) == 20
            assert all(r.exec_ms + (r.plan_ms or 0) >= MATERIAL_SHARE * db_ms for r in top.rows)
            assert len(every.rows) > len(top.rows)  # some statements were too small to lead the ranking
    assert "Planning time was tracked over the whole range" in html and "Planning not tracked" not in html
    # The statement links keep the range.
    first = ranking(html, "by-plan-time")[0][0]
    assert f'href="{reverse("statement", args=[first])}?range=custom&amp;start=' in html


def test_the_plan_share_over_time(client, world):
    client.force_login(world.alice)
    window, params = window_of(world, 24)
    html = page(client, world.planned, **params)
    charts = charts_of(html)
    assert set(charts) == {"chart-plan-share", "chart-plan-time"}
    series = server_series(server_id=world.planned.pk, window=window)
    share = charts["chart-plan-share"]["series"][0]["data"]
    expected = [
        None if p.plan_ms_per_s is None else p.plan_ms_per_s / (p.exec_ms_per_s + p.plan_ms_per_s) * 100
        for p in series.points
    ]
    # Collected every 30 minutes: by the hour (10-minute bins would be two gaps in three), the hour in progress
    # snapshot by snapshot so that its last minutes are not averaged into a whole hour.
    hours = [p for p in series.points if p.end - p.start == timedelta(hours=1)]
    tail = series.points[len(hours) :]
    # (23 hours in the first 10 minutes of an hour: the hour before is drawn per snapshot too.)
    assert series.resolution == "hourly" and len(share) == len(expected) and len(hours) in (23, 24)
    assert all(p.start >= window.end - timedelta(hours=2) and p.end <= window.end for p in tail)
    assert all(
        (a is None) == (b is None) and (a is None or abs(a - b) < 1e-4) for a, b in zip(share, expected, strict=True)
    )
    drawn = [v for v in share if v is not None]
    assert 8 <= len(drawn) <= 11 + len(tail) and all(0 < v < 100 for v in drawn)  # the last 10 hours: never 0 for off
    assert charts["chart-plan-share"]["unit"] == "%" and charts["chart-plan-share"]["yMax"] == 100
    assert '<canvas data-chart="chart-plan-share"' in html and '<canvas data-chart="chart-plan-time"' in html
    time = charts["chart-plan-time"]["series"]
    assert [s["label"] for s in time] == ["execution", "planning"] and all(v is not None for v in time[0]["data"])


def test_planning_partly_tracked_says_when_and_what_enabling_costs(client, world):
    client.force_login(world.alice)
    window, params = window_of(world, 24)
    html = page(client, world.planned, **params)
    assert "Planning not tracked</strong>\n      for part of this range" in html
    untracked = untracked_intervals(server_series(server_id=world.planned.pk, window=window))
    assert len(untracked) == 1
    assert world.now - timedelta(hours=11) <= untracked[0].end <= world.now - timedelta(hours=9)
    assert untracked[0].start == window.start and untracked[0].partly  # on from inside an hour
    listed = re.findall(r"<li>not tracked from (.*?) to (.*?)( <span.*?</span>)?</li>", html)
    assert [(a, b) for a, b, _ in listed] == [
        (f"{u.start:%Y-%m-%d %H:%M}", f"{u.end:%Y-%m-%d %H:%M}") for u in untracked
    ]
    assert "track_planning changed during the hour at its edge" in listed[0][2]
    cost = html[html.index('class="help enabling-cost"') :]
    assert "second spinlock-protected update" in cost and "200,000" in cost and "no restart" in cost
    assert "not tracked for part of the range" in html  # on the charts too
    # The rankings count planning only where it was tracked.
    assert ranking(html, "by-plan-time")


def test_planning_not_tracked_on_a_synthetic_server(client, world):
    client.force_login(world.bob)
    window, params = window_of(world, 24)
    html = page(client, world.plain, **params)
    assert "Planning not tracked</strong>\n      in this range" in html
    listed = re.findall(r"<li>not tracked from (.*?) to (.*?)</li>", html)
    series = server_series(server_id=world.plain.pk, window=window)
    # The whole range, up to its last snapshot (what came after it is not known yet).
    assert listed == [(f"{window.start:%Y-%m-%d %H:%M}", f"{series.points[-1].end:%Y-%m-%d %H:%M}")]
    assert window.end - timedelta(minutes=31) <= series.points[-1].end <= window.end
    assert series.points and all(p.planning == "not tracked" for p in series.points)
    assert "second spinlock-protected update" in html
    assert 'id="by-plan-share"' not in html and "there is no planning time to rank statements by" in html
    charts = charts_of(html)
    assert "chart-plan-share" not in charts and "there is no plan share to draw" in html  # no share of nothing
    planning = charts["chart-plan-time"]["series"][1]
    assert planning["label"] == "planning (not tracked)" and all(v is None for v in planning["data"])  # not 0
    assert any(v for v in charts["chart-plan-time"]["series"][0]["data"])
    assert not re.search(r">\s*0(\.0+)?\s*<", html)  # no figure of 0 anywhere on the page


def test_no_snapshot_in_the_range(client, world):
    client.force_login(world.alice)
    _, params = window_of(world, 2, ago=-3)  # not yet
    html = page(client, world.planned, **params)
    assert "No snapshot in this range." in html and "Planning not tracked" not in html
    assert all(v is None for spec in charts_of(html).values() for s in spec["series"] for v in s["data"])


def test_the_range_is_kept_in_the_url(client, world):
    client.force_login(world.alice)
    base = reverse("planning", args=[world.planned.pk])
    html = page(client, world.planned, range="7d")
    assert f'<a href="{base}?range=7d" class="active" aria-current="true">7d</a>' in html
    assert f'<a href="{base}?range=30d">30d</a>' in html
    assert f'href="{reverse("server", args=[world.planned.pk])}?range=7d"' in html  # the server's head and its nav


def test_an_htmx_request_gets_the_body_only(client, world):
    client.force_login(world.alice)
    response = client.get(reverse("planning", args=[world.planned.pk]), {"range": "6h"}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="planning-body">')
    assert "<html" not in body and set(charts_of(body)) == {"chart-plan-share", "chart-plan-time"}


def test_another_organizations_server_is_a_404(client, world):
    client.force_login(world.bob)
    for headers in ({}, {"HX-Request": "true"}):
        assert client.get(reverse("planning", args=[world.planned.pk]), headers=headers).status_code == 404
    assert get(client, world.plain).status_code == 200
    client.force_login(world.alice)
    assert get(client, world.plain).status_code == 404 and get(client, world.planned).status_code == 200
    assert client.get("/servers/999999999/planning/").status_code == 404
    client.force_login(world.superuser)
    assert get(client, world.plain).status_code == 200


def test_queries_are_bounded(client, world, django_assert_max_num_queries):
    client.force_login(world.alice)
    for params in ({"range": "1h"}, {"range": "24h"}, {"range": "30d"}):
        with django_assert_max_num_queries(8), db.counting() as c:
            assert get(client, world.planned, **params).status_code == 200
        # Two top lists (<= 6 each) and the series (coverage and 2, and 2 for the hour in progress).
        assert c.queries <= 17, (params, c.queries)
