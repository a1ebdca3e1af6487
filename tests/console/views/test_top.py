"""Top statements of a server (/servers/<id>/statements/ and the same table on the server page): the
figures are the selector's, every order and filter is in the URL and changes the result, paging, the
comparison with the previous period, untrusted texts escaped, missing texts explained, htmx fragments,
access rules, bounded queries and the fragment's size."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.urls import reverse
from django.utils.html import strip_tags

from console.views import top
from history.models import ServerState, Statement
from history.own import own_mark
from readtier import ORDERS, Page, StatementChange, StatementFilters, Window, db, top_statements
from readtier.server import statements_in
from tests.console.views.test_servers import drop_world, make_world
from tests.readtier.configured import HOSTILE, NEW_TEXT

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        w = make_world("h2t")
        yield w
        drop_world(w)


class _Table(HTMLParser):
    """The rows of the statements table: (statement id, query cell text, its title, [figure cells],
    [their changes]), and whether a row is marked new."""

    def __init__(self):
        super().__init__()
        self.rows: list[dict] = []
        self._cell: list[str] | None = None
        self._small = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-statement" in a:
            self.rows.append({"id": int(a["data-statement"]), "cells": [], "changes": [], "title": None, "new": False})
        elif not self.rows:
            return
        elif tag == "td":
            self._cell = []
        elif tag == "a" and self._cell is not None and self.rows[-1]["title"] is None:
            self.rows[-1]["title"] = a.get("title")
        elif tag == "small":
            self._small = True
        elif tag == "span" and "new" in (a.get("class") or "").split():
            self.rows[-1]["new"] = True

    def handle_endtag(self, tag):
        if tag == "small":
            self._small = False
        elif tag == "td" and self._cell is not None and self.rows:
            self.rows[-1]["cells"].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tbody":
            self._cell = None

    def handle_data(self, data):
        if self._cell is None or not self.rows:
            return
        if self._small:
            self.rows[-1]["changes"].append((len(self.rows[-1]["cells"]), data))
        else:
            self._cell.append(data)


def table(html: str) -> list[dict]:
    parser = _Table()
    parser.feed(html)
    for row in parser.rows:  # the text cell carries the "new" badge's word after the text
        row["text"] = row["cells"][0].removesuffix("new").strip()
    return parser.rows


def _local(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M")


def custom(world, hours: int) -> tuple[dict[str, str], Window]:
    """A custom range of the last `hours` (minutes exact, so that the selector reads the same window)."""
    start, end = world.now - timedelta(hours=hours), world.now
    return {"range": "custom", "start": _local(start), "end": _local(end)}, Window(start, end)


def get(client, server, *, htmx: bool = False, **params) -> str:
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get(reverse("server-statements", args=[server.pk]), params, **headers)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _bytes(text: str) -> float:
    """ "1.5 kB" -> 1536.0 (the table's WAL column)."""
    value, unit = text.split()
    return _num(value) * {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[unit]


# Column of each figure in a row's cells (after the text, database and user).
COL = {order: 3 + i for i, order in enumerate(top.COLUMNS)}
SHARE = 3 + len(top.COLUMNS)


def test_every_column_sorts_by_an_order_of_the_selector():
    assert set(top.COLUMNS) <= set(ORDERS)


def test_the_figures_are_the_selectors(client, world):
    client.force_login(world.alice)
    params, window = custom(world, 6)
    rows = table(get(client, world.configured, **params))
    expected = top_statements(server_id=world.configured.pk, window=window, page=Page(1, top.PAGE_SIZE)).rows
    assert [r["id"] for r in rows] == [s.statement_id for s in expected] and len(rows) == 50
    for row, s in zip(rows, expected, strict=True):
        cells = row["cells"]
        assert cells[1:3] == [s.database, s.user]
        assert cells[COL["calls"]] == f"{s.calls:,}" and cells[COL["rows"]] == f"{s.rows:,}"
        assert cells[COL["shared_read"]] == f"{s.shared_blks_read:,}" and cells[COL["temp"]] == f"{s.temp_blks:,}"
        for order, value in (("total", s.total_ms), ("exec", s.exec_ms), ("io", s.io_ms), ("plan", s.plan_ms)):
            assert abs(_num(cells[COL[order]]) - value) <= 0.05, (order, cells[COL[order]], value)
        assert abs(_num(cells[COL["mean"]]) - s.mean_exec_ms) <= 0.005
        assert abs(_bytes(cells[COL["wal"]]) - s.wal_bytes) <= 0.05 * _bytes("1 " + cells[COL["wal"]].split()[1])
        assert abs(_num(cells[SHARE]) - s.plan_share * 100) <= 0.05  # planning tracked (on since 10 hours)
    assert rows[0]["text"] == HOSTILE


def test_planning_not_tracked_is_never_zero(client, world):
    client.force_login(world.superuser)
    params, window = custom(world, 24)
    html = get(client, world.plain, **params)
    rows = table(html)
    assert rows and all(r["cells"][COL["plan"]] == "not tracked" and r["cells"][SHARE] == "not tracked" for r in rows)
    assert "Planning not tracked</span> (pg_stat_statements.track_planning was off)" in html


def test_every_order_is_in_the_url_and_changes_the_result(client, world):
    client.force_login(world.alice)
    params, window = custom(world, 24)
    html = get(client, world.configured, **params)
    base = reverse("server-statements", args=[world.configured.pk])
    seen = {}
    for order in top.COLUMNS:
        label = re.escape(top.COLUMNS[order][0])
        link = re.search(rf'<a href="({re.escape(base)}\?[^"]*)" hx-get="\1"[^>]*>{label}', html)
        assert link, order
        url = link.group(1).replace("&amp;", "&")
        assert ("order=" + order in url) == (order != "total"), url
        response = client.get(url, HTTP_HX_REQUEST="true")
        ids = [r["id"] for r in table(response.content.decode())]
        expected = top_statements(server_id=world.configured.pk, window=window, order=order, page=Page(1, 50))
        assert ids == [s.statement_id for s in expected.rows], order
        seen[order] = ids
        assert 'class="sorted"' in response.content.decode()
    assert seen["calls"] != seen["total"] and seen["temp"] != seen["total"] and seen["rows"] != seen["calls"]
    # The plan share sorts too, where the selector has the order.
    share = re.search(r'<a href="([^"]*order=plan_share[^"]*)"[^>]*>Plan share', html)
    assert share is not None
    response = client.get(share.group(1).replace("&amp;", "&"), HTTP_HX_REQUEST="true").content.decode()
    expected = top_statements(server_id=world.configured.pk, window=window, order="plan_share", page=Page(1, 50))
    assert [r["id"] for r in table(response)] == [s.statement_id for s in expected.rows]
    assert 'aria-sort="descending">Plan share (%) ▼' in response


@pytest.mark.parametrize(
    "params, filters",
    [
        ({"db": "db1"}, StatementFilters(database="db1")),
        ({"user": "app_user2"}, StatementFilters(user="app_user2")),
        ({"q": "ORDERS"}, StatementFilters(text="ORDERS")),
        (
            {"db": "db0", "user": "app_user1", "q": "select"},
            StatementFilters(database="db0", user="app_user1", text="select"),
        ),
    ],
)
def test_filters_are_in_the_url_and_filter(client, world, params, filters):
    client.force_login(world.alice)
    rng, window = custom(world, 24)
    html = get(client, world.configured, htmx=True, **rng, **params, order="calls")
    rows = table(html)
    expected = top_statements(
        server_id=world.configured.pk, window=window, order="calls", filters=filters, page=Page(1, 50)
    )
    assert [r["id"] for r in rows] == [s.statement_id for s in expected.rows]
    everything = top_statements(server_id=world.configured.pk, window=window, order="calls", page=Page(1, 50))
    assert 0 < expected.total_count < everything.total_count
    assert f"{expected.total_count} statements ran in this range (filtered)" in html
    # Every link of the table keeps the filters (so that sorting or paging stays filtered).
    exec_link = re.search(r'<a href="([^"]*order=exec[^"]*)"', html).group(1).replace("&amp;", "&")
    for key, value in params.items():
        assert f"{key}={value}" in exec_link
    # The form submits them (htmx pushes the URL it sends).
    assert 'hx-push-url="true"' in html and 'name="q"' in html


def test_paging(client, world, monkeypatch):
    monkeypatch.setattr(top, "PAGE_SIZE", 10)
    client.force_login(world.alice)
    params, window = custom(world, 24)
    html = get(client, world.configured, **params, page="2")
    expected = top_statements(server_id=world.configured.pk, window=window, page=Page(2, 10))
    assert [r["id"] for r in table(html)] == [s.statement_id for s in expected.rows]
    pages = -(-expected.total_count // 10)
    assert f"page 2 of {pages} · statements 11–20" in html
    assert re.search(r'href="[^"]*page=3[^"]*"[^>]*rel="next"', html) and 'rel="prev"' in html
    first = get(client, world.configured, **params)
    assert 'rel="prev"' not in first and re.search(r'href="[^"]*page=2[^"]*"[^>]*rel="next"', first)
    beyond = get(client, world.configured, **params, page="99")
    assert "No statement ran in this range" in beyond and f"page 99 of {pages}" in beyond


def test_an_htmx_request_gets_only_the_table(client, world):
    client.force_login(world.alice)
    fragment = get(client, world.configured, htmx=True, order="calls")
    table_part, picker = fragment.split('<div id="range-picker" hx-swap-oob="true">')  # the range links, out of band
    assert table_part.lstrip().startswith('<section id="top-statements"') and table_part.rstrip().endswith("</section>")
    assert picker.rstrip().endswith("</div>")
    assert "<html" not in fragment and "server-head" not in fragment
    whole = get(client, world.configured, order="calls")
    assert "<html" in whole and f"<h1>{world.configured.name}</h1>" in whole and '<section id="top-statements"' in whole
    # A history restore (back button without a cache) gets the whole page.
    restore = client.get(
        reverse("server-statements", args=[world.configured.pk]),
        HTTP_HX_REQUEST="true",
        HTTP_HX_HISTORY_RESTORE_REQUEST="true",
    )
    assert "<html" in restore.content.decode()


def test_compare_marks_new_statements_and_shows_changes(client, world):
    client.force_login(world.alice)
    params, window = custom(world, 6)  # the late statement runs from 3 hours ago: not in the 6 hours before
    html = get(client, world.configured, **params, compare="1")
    rows = table(html)
    ids = [r["id"] for r in rows]
    previous = statements_in(server_id=world.configured.pk, window=window.previous(), statement_ids=ids)
    current = {s.statement_id: s for s in top_statements(server_id=world.configured.pk, window=window).rows}
    checked = 0
    for row in rows:
        change = StatementChange(current[row["id"]], previous.get(row["id"]))
        assert row["new"] == change.is_new
        ratio = change.change("calls")
        shown = [text for col, text in row["changes"] if col == COL["calls"]]
        if ratio is not None and round(ratio * 100):
            assert shown == [f"{ratio * 100:+,.0f}%"], row["id"]
            checked += 1
    assert checked > 10
    late = table(get(client, world.configured, **params, compare="1", q="h2-late"))
    assert [r["text"] for r in late] == [NEW_TEXT] and late[0]["new"]
    assert not table(get(client, world.configured, **params, q="h2-late"))[0]["new"]  # no comparison, no mark
    # The toggle is a link of the table's URL: on, then off again.
    assert 'name="compare" value="1" data-autosubmit checked' in html


def test_untrusted_texts_are_escaped(client, world):
    client.force_login(world.alice)
    html = get(client, world.configured, q="alert")
    assert "<script>alert(1)</script>" not in html
    assert "SELECT &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27; AS x" in html
    (row,) = table(html)
    assert row["text"] == HOSTILE and row["title"] == HOSTILE
    # The search box gives back what was typed, escaped too.
    attack = get(client, world.configured, q='"><script>alert(2)</script>')
    assert "<script>alert(2)" not in attack and "&quot;&gt;&lt;script&gt;alert(2)" in attack


def test_missing_texts_say_why(client, world):
    client.force_login(world.alice)
    rows = table(get(client, world.configured))
    texts = [r["text"] for r in rows]
    assert "<evicted before its text could be read>" in texts and "<text not visible to this role>" in texts
    assert all(texts)  # never a blank
    long = [r for r in rows if len(r["text"]) > top.TEXT_CHARS]
    assert not long  # truncated in the table


def test_the_fragment_of_fifty_rows_is_small(client, world):
    client.force_login(world.alice)
    response = client.get(
        reverse("server-statements", args=[world.configured.pk]),
        {"range": "24h", "compare": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert len(table(response.content.decode())) == 50
    assert len(response.content) < 150_000, len(response.content)


def test_bad_parameters_say_so(client, world):
    client.force_login(world.alice)
    html = get(client, world.configured, order="nonsense", page="x")
    assert "unknown order &#x27;nonsense&#x27;" in html and "is not a page number" in html
    assert len(table(html)) == 50


def test_another_organizations_server_is_a_404(client, world):
    client.force_login(world.bob)
    url = reverse("server-statements", args=[world.configured.pk])
    assert client.get(url).status_code == 404
    assert client.get(url, {"order": "calls"}, HTTP_HX_REQUEST="true").status_code == 404
    assert (
        client.get(
            reverse("server", args=[world.configured.pk]), {"order": "calls"}, HTTP_HX_REQUEST="true"
        ).status_code
        == 404
    )
    assert client.get(reverse("server-statements", args=[world.plain.pk])).status_code == 200
    client.force_login(world.alice)
    assert client.get(reverse("server-statements", args=[world.plain.pk])).status_code == 404
    assert client.get(reverse("server-statements", args=[world.plain.pk]), HTTP_HX_REQUEST="true").status_code == 404


@pytest.mark.parametrize("range_key", ["1h", "24h", "30d"])
def test_queries_are_bounded(client, world, django_assert_max_num_queries, range_key):
    client.force_login(world.alice)
    get(client, world.configured)  # the session's time zone is read once
    for htmx in (False, True):
        with django_assert_max_num_queries(5), db.counting() as c:
            get(client, world.configured, htmx=htmx, range=range_key, compare="1", db="db0")
        assert c.queries <= 14, c.queries


# -- across the servers of an organization ---------------------------------------------------------


def test_an_organizations_statements_merge_its_servers(client, world):
    from inventory.models import Server
    from readtier.across import statements_across

    acme = world.configured.organization
    Server.objects.filter(pk=world.plain.pk).update(organization=acme)  # rolled back with the test
    client.force_login(world.alice)
    params, window = custom(world, 6)
    url = reverse("organization-statements", args=[acme.pk])
    response = client.get(url, {**params, "order": "calls"})
    assert response.status_code == 200
    html = response.content.decode()
    rows = table(html)
    names = {world.configured.pk: world.configured.name, world.plain.pk: world.plain.name}
    expected = statements_across(
        server_ids=sorted(names, key=names.get), window=window, order="calls", page=Page(1, top.PAGE_SIZE)
    )
    assert [(r["id"], r["cells"][1]) for r in rows] == [
        (e.statement.statement_id, names[e.server_id]) for e in expected.rows
    ]
    assert {r["cells"][1] for r in rows} == set(names.values())
    for row, e in zip(rows, expected.rows, strict=True):
        assert row["cells"][1 + COL["calls"]] == f"{e.statement.calls:,}"
    assert f"{expected.total_count} statements ran in this range" in html
    assert "Planning partly tracked</span> in this range (off on some servers" in html
    assert f'href="/servers/{world.plain.pk}/?range=custom' in html
    # Sorting and filtering stay on the organization's URL, and htmx gets the table alone.
    assert f'href="{url}?range=custom' in html and "order=exec" in html
    fragment = client.get(url, {**params, "db": "db1"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<section id="top-statements"') and "<html" not in fragment
    assert table(fragment) and all(r["cells"][2] == "db1" for r in table(fragment))
    compared = table(client.get(url, {**params, "compare": "1", "q": "h2-late"}).content.decode())
    assert [r["text"] for r in compared] == [NEW_TEXT] and compared[0]["new"]


def test_an_organizations_statements_need_membership(client, world, django_assert_max_num_queries):
    acme = world.configured.organization
    url = reverse("organization-statements", args=[acme.pk])
    client.force_login(world.bob)
    assert client.get(url).status_code == 404
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 404
    assert client.get(reverse("organization-statements", args=[999_999_999])).status_code == 404
    client.force_login(world.alice)
    client.get(url)
    with django_assert_max_num_queries(6), db.counting() as c:
        html = client.get(url, {"range": "24h", "compare": "1", "page": "11"}).content.decode()
    assert c.queries <= 14, c.queries
    assert "the first 10 pages are listed" in html


def test_compare_says_when_the_previous_period_is_partly_covered(client, world):
    client.force_login(world.alice)
    # History starts 26 hours ago: the 20 hours before the last 20 have 6 hours of it.
    params, _ = custom(world, 20)
    html = get(client, world.configured, **params, compare="1")
    assert "the previous period has history for 6 h of its 20 h" in html
    params, _ = custom(world, 6)  # the 6 hours before are covered
    assert "Partial history" not in get(client, world.configured, **params, compare="1")
    params, _ = custom(world, 20)
    assert "Partial history" not in get(client, world.configured, **params)  # no comparison, no notice


def test_an_htmx_table_update_swaps_the_range_links_out_of_band(client, world):
    client.force_login(world.alice)
    url = reverse("server", args=[world.configured.pk])
    html = client.get(url, {"range": "24h", "order": "calls", "q": "h2"}, HTTP_HX_REQUEST="true").content.decode()
    picker = html[html.index('<div id="range-picker" hx-swap-oob="true">') :]
    # The range links carry the table's new state (order, filter), from page 1.
    assert "order=calls" in picker and "q=h2" in picker and "range=6h" in picker
    full = client.get(url, {"range": "24h", "order": "calls"}).content.decode()
    assert full.count('id="range-picker"') == 1 and "hx-swap-oob" not in full  # the page has it once, in place


def test_the_consoles_own_statements_are_left_out_unless_asked_for(client, world):
    """The console's own statements (marked at their end and run as its monitoring role: history.own) are its
    collections, not the application's: left out of the table (and said so), listed with a badge on ?own=1. Told
    apart by the mark and the role together: the monitoring role's unmarked statements stay listed (defect 1 of
    issue 35: hidden by role, an application sharing the monitoring role disappeared), and so do another role's
    that end with the mark (issue 52: any user of the server could hide statements from the DBA)."""
    client.force_login(world.alice)
    params, window = custom(world, 6)
    every = top_statements(server_id=world.configured.pk, window=window, page=Page(1, 500)).rows
    role_oid = ServerState.objects.get(server=world.configured).role_oid  # what the synthetic server is read as
    (monitor,) = set(
        Statement.objects.filter(server=world.configured, userid=role_oid).values_list("user_name", flat=True)
    )
    ours = {s.statement_id for s in [s for s in every if s.user == monitor and s.query is not None][::2]}
    forged = {s.statement_id for s in [s for s in every if s.user != monitor and s.query is not None][::2]}
    with connection.cursor() as cur:  # rolled back with the test
        cur.execute(
            "UPDATE collectors_statement SET query = query || %s WHERE id = ANY(%s)",
            [f"\n{own_mark()}", list(ours | forged)],
        )
    every = top_statements(server_id=world.configured.pk, window=window, page=Page(1, 500)).rows
    assert ours and forged and {s.statement_id for s in every if s.own} == ours
    hidden = StatementFilters(hide_own=True)
    apps = top_statements(server_id=world.configured.pk, window=window, page=Page(1, 500), filters=hidden).rows
    assert {s.statement_id for s in apps} == {s.statement_id for s in every} - ours
    assert forged <= {s.statement_id for s in apps}  # another role's, whatever they end with
    assert any(s.user == monitor for s in apps)  # the monitoring role's other statements stay

    html = get(client, world.configured, **params)
    shown = table(html)
    assert [r["id"] for r in shown] == [s.statement_id for s in apps][: top.PAGE_SIZE]
    said = " ".join(strip_tags(html).split())
    assert (
        f"{len(apps)} statements ran in this range, not counting the console's own (marked /* pgconsole … */)" in said
    )
    assert 'name="own" value="1"' in html and "pgconsole</span>" not in html

    html = get(client, world.configured, own="1", **params)
    listed = table(html)
    assert [r["id"] for r in listed] == [s.statement_id for s in every][: top.PAGE_SIZE]
    badged = {r["id"] for r in listed if r["cells"][0].endswith("pgconsole")}
    assert badged == ours & {r["id"] for r in listed} and badged
    assert "own=1" in html  # the sort links keep it

    filtered = table(get(client, world.configured, user="app_user1", **params))
    mine = [s.statement_id for s in apps if s.user == "app_user1"]
    assert [r["id"] for r in filtered] == mine[: top.PAGE_SIZE]
