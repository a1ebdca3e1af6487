"""The fleet overview against a synthetic history written through the real collection path (the last
26 hours, so that the page's preset ranges read it): who sees which servers, figures equal to the
selector's, filters, sorting, paging, htmx fragments, errors and a bounded number of queries."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.services import server_delete
from console.views.fleet import PAGE_SIZE, _line, age_text, rate_cell, spark_points
from inventory.models import Membership, Organization, Server
from readtier import FleetRow, Window, db, fleet_summary
from tests.history_world import build

pytestmark = pytest.mark.django_db

URL = "/fleet/"
N_STATEMENTS = 20
QUERIES = 6  # per request of the page (one reads the advisor counts), besides the selector's one read of the history
MAX = 10_000  # pg_stat_statements.max of the synthetic servers


@pytest.fixture(scope="module")
def fleet(django_db_setup, django_db_blocker):
    """Two organizations. North: ok (tags prod), failing (staging), disabled. South: ok (prod, eu),
    stale, never collected (no history). Snapshots every 20 minutes over the last 26 hours."""
    with django_db_blocker.unblock():
        now = timezone.now().replace(second=0, microsecond=0)
        start, end = now - timedelta(hours=26), now - timedelta(minutes=5)
        north = Organization.objects.create(name="North")
        south = Organization.objects.create(name="South")
        servers = {}
        for i, (name, org, tags) in enumerate(
            [
                ("n-ok", north, ["prod"]),
                ("n-failing", north, ["staging"]),
                ("n-disabled", north, []),
                ("s-ok", south, ["prod", "eu"]),
                ("s-stale", south, []),
            ]
        ):
            server = build(name, n=N_STATEMENTS, start=start, end=end, step=timedelta(minutes=20), seed=11 + i)
            # Collected every 20 minutes: stale only after an hour without a snapshot.
            Server.objects.filter(pk=server.pk).update(organization=org, tags=tags, interval_s=1200)
            servers[name] = server.pk
        never = Server.objects.create(organization=south, name="s-never", host="192.0.2.1", user="monitor")
        servers["s-never"] = never.pk
        Server.objects.filter(pk=servers["n-failing"]).update(
            consecutive_failures=3,
            last_attempt_at=timezone.now(),
            last_error_class="connection",
            last_error_message="could not connect to server: <Connection refused>",
        )
        Server.objects.filter(pk=servers["n-disabled"]).update(enabled=False)
        Server.objects.filter(pk=servers["s-stale"]).update(last_success_at=timezone.now() - timedelta(hours=3))
        Server.objects.filter(pk=servers["s-ok"], organization=south).update(last_success_at=timezone.now())
        Server.objects.filter(pk=servers["n-ok"]).update(last_success_at=timezone.now())
        yield {"servers": servers, "north": north, "south": south}
        for server in Server.objects.filter(pk__in=servers.values()):
            server_delete(server=server)
        Organization.objects.filter(pk__in=[north.pk, south.pk]).delete()


@pytest.fixture
def users(fleet):
    superuser = User.objects.create_user("root", password="x", is_staff=True, is_superuser=True)
    alice = User.objects.create_user("alice", password="x")  # North, viewer
    Membership.objects.create(user=alice, organization=fleet["north"], role=Membership.Role.VIEWER)
    bob = User.objects.create_user("bob", password="x")  # South, dba
    Membership.objects.create(user=bob, organization=fleet["south"], role=Membership.Role.DBA)
    carol = User.objects.create_user("carol", password="x")  # no organization
    operator = User.objects.create_user("operator", password="x", is_staff=True)  # North, viewer; the admin site
    Membership.objects.create(user=operator, organization=fleet["north"], role=Membership.Role.VIEWER)
    # A member of both organizations sees the fleet's servers alone, whatever else the database holds.
    both = User.objects.create_user("both", password="x")
    for org in (fleet["north"], fleet["south"]):
        Membership.objects.create(user=both, organization=org, role=Membership.Role.VIEWER)
    return {"superuser": superuser, "alice": alice, "bob": bob, "carol": carol, "operator": operator, "both": both}


def get(client, user, query: str = "", **headers):
    client.force_login(user)
    response = client.get(URL + query, headers=headers)
    assert response.status_code == 200, response.content[:500]
    return response


def shown(response) -> list[int]:
    """The server ids of the table's rows, in order."""
    return [int(x) for x in re.findall(r'<tr data-server="(\d+)"', response.content.decode())]


def row_html(response, server_id: int) -> str:
    html = response.content.decode()
    start = html.index(f'<tr data-server="{server_id}"')
    return html[start : html.index("</tr>", start)]


def cell(row: str, css: str) -> str:
    """The text of a row's cell with this class."""
    match = re.search(rf'<td class="num {css}[^"]*"[^>]*>(.*?)</td>', row, re.S)
    assert match, (css, row)
    return re.sub(r"<[^>]+>", " ", match.group(1)).split()[0] if css != "plan" else match.group(1)


def test_superusers_see_every_server_with_the_ones_to_look_at_first(client, users, fleet):
    s = fleet["servers"]
    everything = shown(get(client, users["superuser"]))
    # Every server of the console (other tests' session-wide histories included), each once.
    assert sorted(everything) == sorted(Server.objects.values_list("pk", flat=True))
    assert [pk for pk in everything if pk in s.values()] == shown(get(client, users["both"]))
    response = get(client, users["both"])
    ids = shown(response)
    # Failing first, then stale, never collected, ok (by name), disabled last.
    assert ids == [s["n-failing"], s["s-stale"], s["s-never"], s["n-ok"], s["s-ok"], s["n-disabled"]]
    html = response.content.decode()
    assert "<html" in html and 'id="fleet"' in html
    summary = re.sub(
        r"<[^>]+>",
        "",
        html[html.index('class="fleet-summary"') : html.index("</p>", html.index('class="fleet-summary"'))],
    )
    assert " ".join(summary.split()).endswith("6 servers: failing 1 · stale 1 · never collected 1 · ok 2 · disabled 1")
    failing = row_html(response, s["n-failing"])
    assert 'class="badge failing"' in failing and "<strong>connection</strong>" in failing
    # A member reads the console's sentence for the class (libpq's words are console staff's: collectors.errors) ...
    assert "The collection failed." in failing and "Connection refused" not in failing
    # ... staff read the message, which comes from a monitored server: escaped.
    as_staff = row_html(get(client, users["superuser"]), s["n-failing"])
    assert "could not connect to server: &lt;Connection refused&gt;" in as_staff
    assert 'class="badge never"' in row_html(response, s["s-never"])
    assert 'class="badge stale"' in row_html(response, s["s-stale"]) and "3 h ago" in row_html(response, s["s-stale"])
    assert f'href="/servers/{s["n-ok"]}/?range=24h"' in row_html(response, s["n-ok"])


def test_a_member_sees_only_their_organizations_servers(client, users, fleet):
    s = fleet["servers"]
    alice = get(client, users["alice"])
    assert shown(alice) == [s["n-failing"], s["n-ok"], s["n-disabled"]]
    html = alice.content.decode()
    assert "South" not in html and ">s-ok<" not in html and ">eu<" not in html  # nor in the filters' options
    bob = get(client, users["bob"])
    assert shown(bob) == [s["s-stale"], s["s-never"], s["s-ok"]]
    # Asking for another organization's servers shows nothing of it, in the same words as a missing one.
    other = get(client, users["alice"], f"?org={fleet['south'].pk}")
    assert shown(other) == shown(alice)
    assert f"organization &#x27;{fleet['south'].pk}&#x27; is not one of yours" in other.content.decode()
    missing = get(client, users["alice"], "?org=999999")
    assert "organization &#x27;999999&#x27; is not one of yours" in missing.content.decode()
    nobody = get(client, users["carol"])
    assert shown(nobody) == [] and "No server is visible to you" in nobody.content.decode()


def test_staff_see_only_the_servers_of_their_organizations(client, users, fleet):
    """is_staff lets one into the admin site, not into other organizations' servers."""
    s = fleet["servers"]
    assert shown(get(client, users["operator"])) == [s["n-failing"], s["n-ok"], s["n-disabled"]]
    assert shown(get(client, users["operator"], f"?org={fleet['south'].pk}")) == shown(get(client, users["alice"]))


def test_the_figures_are_the_selectors(client, users, fleet):
    response = get(client, users["both"])
    window = response.context["range"].window
    assert window.end - window.start == timedelta(hours=24)
    rows = fleet_summary(server_ids=shown(response), window=window)
    with_history = [r for r in rows if r.name != "s-never"]
    assert len(with_history) == 5
    for r in with_history:
        row = row_html(response, r.server_id)
        assert r.calls_per_s > 0 and r.snapshots >= 70
        assert cell(row, "calls") == rate_cell(r.calls_per_s) != "0"
        assert cell(row, "exec") == rate_cell(r.exec_ms_per_s)
        assert cell(row, "dbtime") == rate_cell(r.exec_ms_per_s)  # planning not tracked: execution alone
        # Synthetic servers run with track_planning off: "not tracked", never 0.
        assert r.plan_ms_per_s is None and cell(row, "plan") == "not tracked"
        assert cell(row, "dealloc") == "0" and f"max {MAX:,}" in row
        assert cell(row, "entries") == f"{N_STATEMENTS}" and f"{N_STATEMENTS} / {MAX:,}" in row
        assert "<td>17.10</td>" in row and "<td>1.11</td>" in row
        spec = json.loads(
            re.search(
                rf'<script id="spark-{r.server_id}" type="application/json">(.*?)</script>',
                response.content.decode(),
                re.S,
            ).group(1)
        )
        assert len(spec["x"]) == len(r.trend_calls_per_s) == 25 and spec["spark"] is True
        assert spec["series"][0]["data"] == [None if v is None else round(v, 6) for v in r.trend_calls_per_s]
        assert sum(v is not None for v in spec["series"][0]["data"]) >= 23
        assert f'<canvas data-chart="spark-{r.server_id}"' in row
    never = row_html(response, fleet["servers"]["s-never"])
    assert cell(never, "calls") == "–" and "not read yet" in never and ">never<" in never


def test_ranges_change_the_window_and_the_trend(client, users, fleet):
    s = fleet["servers"]
    week = get(client, users["superuser"], "?range=7d")
    assert week.context["range"].key == "7d" and 'class="active" aria-current="true">7d<' in week.content.decode()
    [r] = fleet_summary(server_ids=[s["n-ok"]], window=week.context["range"].window)
    spec = week.context["lines"][shown(week).index(s["n-ok"])].chart
    assert len(r.trend_calls_per_s) == 169 and len(spec["x"]) == 57  # 3 hours a point
    assert cell(row_html(week, s["n-ok"]), "calls") == rate_cell(r.calls_per_s)
    # Links keep the range.
    assert 'href="/fleet/?range=7d&amp;sort=name"' in week.content.decode()
    hour = get(client, users["superuser"], "?range=1h")
    [h] = fleet_summary(server_ids=[s["n-ok"]], window=hour.context["range"].window)
    assert h.snapshots >= 1 and cell(row_html(hour, s["n-ok"]), "calls") == rate_cell(h.calls_per_s)


def test_filters_and_sorting_come_from_the_url(client, users, fleet):
    s = fleet["servers"]
    superuser = users["both"]
    assert shown(get(client, superuser, "?tag=prod")) == [s["n-ok"], s["s-ok"]]
    assert shown(get(client, superuser, "?status=failing")) == [s["n-failing"]]
    assert shown(get(client, superuser, "?status=never")) == [s["s-never"]]
    assert shown(get(client, superuser, "?q=OK")) == [s["n-ok"], s["s-ok"]]
    assert shown(get(client, superuser, f"?org={fleet['north'].pk}&status=ok")) == [s["n-ok"]]
    by_org = get(client, superuser, f"?org={fleet['south'].pk}&sort=name")
    assert shown(by_org) == [s["s-never"], s["s-ok"], s["s-stale"]]
    # The summary counts every status among the other filters' matches; the status filter is kept in links.
    html = get(client, superuser, "?tag=prod&status=ok").content.decode()
    assert '2 servers</a> <span class="muted">(filtered, of 6)</span>' in html
    assert 'href="/fleet/?range=24h&amp;tag=prod&amp;status=ok&amp;sort=calls"' in html
    assert shown(get(client, superuser, "?sort=name")) == [s[n] for n in sorted(s)]
    assert shown(get(client, superuser, "?sort=org"))[:3] == [s["n-disabled"], s["n-failing"], s["n-ok"]]
    for sort, attribute in (("calls", "calls_per_s"), ("dbtime", "exec_ms_per_s")):
        response = get(client, superuser, f"?sort={sort}")
        rows = {
            r.server_id: r for r in fleet_summary(server_ids=list(s.values()), window=response.context["range"].window)
        }
        values = [getattr(rows[i], attribute) for i in shown(response)]
        assert values[-1] is None and values[:-1] == sorted(values[:-1], reverse=True), sort  # no data last
        assert 'class="sorted" aria-sort="descending"' in response.content.decode()
    dealloc = shown(get(client, superuser, "?sort=dealloc"))
    assert dealloc[-1] == s["s-never"] and len(dealloc) == 6


def test_200_servers_are_paged_with_the_failing_first(client, users, fleet, django_assert_max_num_queries):
    s = fleet["servers"]
    get(client, users["both"])  # the session settles (time zone) on a first request
    with CaptureQueriesContext(connection) as few, db.counting() as selectors:
        assert client.get(URL + "?sort=calls").status_code == 200
    # One read of the history, and without a range in the URL one more: how old it is (the opening range).
    assert len(few) == QUERIES and selectors.queries == 2
    bulk = Organization.objects.create(name="Bulk")
    Server.objects.bulk_create(
        Server(organization=bulk, name=f"bulk-{i:03}", host="192.0.2.1", user="m", enabled=i % 10 != 0)
        for i in range(194)
    )
    Membership.objects.create(user=users["both"], organization=bulk, role=Membership.Role.VIEWER)
    superuser = users["both"]
    first = get(client, superuser)
    ids = shown(first)
    assert len(ids) == PAGE_SIZE and ids[:2] == [s["n-failing"], s["s-stale"]]
    assert "page 1 of 4 · servers 1–50 of 200" in first.content.decode()
    assert (
        'href="/fleet/?range=24h&amp;page=2" hx-get="/fleet/?range=24h&amp;page=2" rel="next"' in first.content.decode()
    )
    pages = [ids] + [shown(get(client, superuser, f"?page={p}")) for p in (2, 3, 4)]
    everything = [i for page in pages for i in page]
    assert len(everything) == len(set(everything)) == 200
    assert set(everything[-21:]) == set(Server.objects.filter(enabled=False).values_list("pk", flat=True))
    last = get(client, superuser, "?page=9")
    assert shown(last) == pages[3] and "page 9 is past the last page (4)" in last.content.decode()
    # A fixed number of queries whatever the number of servers (session, user, organizations, servers,
    # and fleet_summary's inventory read), and two reads of the history (its age, its figures); sorting by a
    # figure reads all 200 servers' figures, still in one query.
    for query in ("", "?sort=calls", "?status=never&sort=name&page=2", f"?org={bulk.pk}&q=1&sort=org"):
        client.get(URL + query)  # the session settles (time zone) on a first request
        with django_assert_max_num_queries(QUERIES), db.counting() as selectors:
            response = client.get(URL + query)
        assert response.status_code == 200 and selectors.queries == 2, query
    with db.counting() as selectors:
        assert client.get(URL + "?range=24h").status_code == 200
    assert selectors.queries == 1  # a range in the URL: the history's age is not read


def test_htmx_gets_the_fragment_alone(client, users, fleet):
    response = get(client, users["superuser"], "?sort=name&tag=prod", HX_Request="true")
    html = response.content.decode()
    assert "<html" not in html and "<h1>" not in html
    assert html.lstrip().startswith('<section id="fleet"') and 'hx-push-url="true"' in html
    assert shown(response) == [fleet["servers"]["n-ok"], fleet["servers"]["s-ok"]]
    assert "HX-Request" in response.headers["Vary"]
    # A history restore needs the whole page.
    restore = get(client, users["superuser"], "?sort=name", HX_Request="true", HX_History_Restore_Request="true")
    assert "<html" in restore.content.decode()


def test_bad_parameters_show_their_error_and_fall_back(client, users, fleet):
    response = get(client, users["both"], "?range=2w&sort=size&status=sleepy&page=x")
    html = response.content.decode()
    assert "unknown range &#x27;2w&#x27;" in html
    assert "unknown sort &#x27;size&#x27;" in html and "unknown status &#x27;sleepy&#x27;" in html
    assert "page &#x27;x&#x27; is not a page number" in html
    assert response.context["range"].key == "24h" and len(shown(response)) == 6
    custom = get(client, users["both"], "?range=custom&start=2026-01-02T10:00&end=2026-01-01T10:00")
    assert "the start must be before the end" in custom.content.decode()


def test_the_page_has_no_inline_script_or_style(client, users, fleet):
    html = get(client, users["superuser"]).content.decode()
    assert " style=" not in html and " onclick" not in html and "hx-on" not in html
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts and all(" src=" in s or 'type="application/json"' in s for s in scripts)
    assert "console/fleet.css" in html
    assert reverse("fleet") == URL


def _row(**kw) -> FleetRow:
    base = dict(
        server_id=1,
        name="a",
        organization="o",
        tags=[],
        status="ok",
        error_class="",
        error_message="",
        server_version_num=130012,
        extension_version="1.8",
        last_snapshot_at=None,
        snapshots=3,
        span_s=180.0,
        calls_per_s=12.345,
        exec_ms_per_s=4.0,
        plan_ms_per_s=0.5,
        planning="tracked",
        dealloc_per_s=None,
        entries_peak=4980,
        entries_max=5000,
        trend_calls_per_s=[1.0, None],
    )
    return FleetRow(**{**base, **kw})


def test_a_rows_texts():
    window = Window(datetime(2026, 3, 1, 10, 30, tzinfo=UTC), datetime(2026, 3, 1, 11, 30, tzinfo=UTC))
    now = datetime(2026, 3, 1, 11, 30, tzinfo=UTC)
    line = _line(_row(last_snapshot_at=now - timedelta(seconds=150)), window, now)
    assert (line.calls, line.exec_time, line.plan_time, line.db_time) == ("12.3", "4.00", "0.500", "4.50")
    assert (line.entries, line.entries_max, line.dealloc, line.version, line.age) == (
        "4,980 / 5,000",
        "5,000",
        "unknown",
        "13.12",
        "2 min ago",
    )
    untracked = _line(_row(plan_ms_per_s=None, planning="not tracked"), window, now)
    assert untracked.plan_time is None and untracked.db_time == "4.00" and untracked.age == ""
    partly = _line(_row(plan_ms_per_s=0.0, planning="partly tracked"), window, now)
    assert partly.plan_time == "0" and partly.plan_partly  # tracked, and none: a real 0
    assert _line(_row(server_version_num=None), window, now).version == "not read yet"


def test_texts():
    values = (None, 0, 0.01234, 1.5, 12.34, 1234.5)
    assert [rate_cell(v) for v in values] == ["–", "0", "0.012", "1.50", "12.3", "1,234"]
    assert [age_text(timedelta(seconds=s)) for s in (3, 42, 150, 7300, 3 * 86400)] == [
        "just now",
        "42 s ago",
        "2 min ago",
        "2 h ago",
        "3 days ago",
    ]


def test_spark_points_average_long_ranges():
    start = datetime(2026, 3, 1, 0, 30, tzinfo=UTC)
    x, y = spark_points(Window(start, start + timedelta(hours=2)), [1.0, None, 3.0])
    assert (
        y == [1.0, None, 3.0] and x[0] == datetime(2026, 3, 1, 0, 0, tzinfo=UTC) and x[2] - x[0] == timedelta(hours=2)
    )
    month = [float(i) for i in range(721)]
    month[3:6] = [None, None, None]
    x, y = spark_points(Window(start, start + timedelta(days=30)), month)
    assert len(x) == len(y) == 66  # 11 hours a point
    assert y[0] == sum(v for v in month[:11] if v is not None) / 8 and y[-1] == 717.5  # the last 6 hours
    assert x[1] - x[0] == timedelta(hours=11)
