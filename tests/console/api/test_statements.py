"""Top statements, one statement, series and wait events through the API, on a real server with a known
workload: the same figures as the selectors, planning not tracked as null, bad input as 400/404."""

from __future__ import annotations

from datetime import datetime

import pytest

from history.own import marks
from readtier import Page, StatementFilters, Window, top_statements
from tests.api_world import assert_error
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = "api_items"


@pytest.fixture
def known(api_world, pg_clusters):
    """PostgreSQL 15 (track_planning off): 7 calls of one SELECT and 3 of an INSERT between two snapshots."""
    c = pg_clusters[15]
    run(c, f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (id int)")
    server = register(c, name="api-statements-15", org="acme")
    collect(server)
    run(c, f"INSERT INTO {TABLE} SELECT generate_series(1, 10)", 3)
    run(c, f"SELECT count(*) FROM {TABLE} WHERE id > 0", 7)
    collect(server)
    return server


def _window(body) -> Window:
    return Window(datetime.fromisoformat(body["window_start"]), datetime.fromisoformat(body["window_end"]))


def test_top_statements_agree_with_the_selector(api_world, known):
    url = f"/api/v1/servers/{known.pk}/statements/"
    for role in ("viewer", "dba", "admin"):
        assert api_world.client(role).get(url).status_code == 200, role
    assert_error(api_world.client("outsider").get(url), 404, "not_found")
    body = api_world.client("viewer").get(url, {"since": "1h", "order_by": "calls", "text": TABLE}).json()
    truth = top_statements(
        server_id=known.pk, window=_window(body), order="calls", filters=StatementFilters(text=TABLE), page=Page(1, 50)
    )
    assert [r["statement_id"] for r in body["results"]] == [s.statement_id for s in truth.rows]
    select = next(r for r in body["results"] if r["query"].startswith("SELECT count(*)"))
    assert select["calls"] == 7 and select["rows"] == 7
    insert = next(r for r in body["results"] if r["query"].startswith("INSERT"))
    assert insert["calls"] == 3 and insert["rows"] == 30
    # track_planning is off: planning is null with the flag, never 0.
    assert select["plan_ms"] is None and select["plan_share"] is None
    assert body["planning_tracked"] is False and body["planning"] == "not tracked"
    csv = api_world.client("viewer").get(url, {"format": "csv", "text": TABLE}).content.decode().splitlines()
    assert csv[0].startswith("statement_id,queryid,") and len(csv) == 1 + len(body["results"])


def test_the_consoles_own_statements_are_listed_only_when_asked_for(api_world, known):
    """As on the page: the console's collections (run as its monitoring role, their texts ending with its mark) are
    left out unless own=true, then listed with own: true; across an organization the same."""
    c = api_world.client("viewer")
    for url in (f"/api/v1/servers/{known.pk}/statements/", f"/api/v1/organizations/{api_world.acme.pk}/statements/"):
        body = c.get(url, {"since": "1h", "page_size": 500}).json()
        every = c.get(url, {"since": "1h", "page_size": 500, "own": "true"}).json()
        own = {r["statement_id"] for r in every["results"] if r["own"]}
        # The console's texts on the tests' long-lived cluster: this installation's mark, or an older console's.
        assert own and all(r["query"].endswith(marks()) for r in every["results"] if r["own"]), url
        assert not any(r["own"] for r in body["results"]), url
        assert {r["statement_id"] for r in body["results"]} == {r["statement_id"] for r in every["results"]} - own
        assert body["count"] == every["count"] - len(own), url
        assert any(r["query"].startswith("SELECT count(*)") for r in body["results"]), url
        assert "own" in assert_error(c.get(url, {"own": "maybe"}), 400)["errors"]


def test_top_statements_bad_input(api_world, known):
    c = api_world.client("viewer")
    url = f"/api/v1/servers/{known.pk}/statements/"
    body = assert_error(c.get(url, {"order_by": "speed"}), 400)
    assert "one of total, exec, plan" in body["errors"]["order_by"][0]
    assert "page_size" in assert_error(c.get(url, {"page_size": 10000}), 400)["errors"]
    assert "toplevel" in assert_error(c.get(url, {"toplevel": "maybe"}), 400)["errors"]
    assert (
        "from"
        in assert_error(c.get(url, {"from": "2026-11-23T10:00:00Z", "to": "2026-11-22T10:00:00Z"}), 400)["errors"]
    )
    # SQL-looking filter text is a substring like any other: 200, nothing matched, nothing broken.
    r = c.get(url, {"text": "'; DROP TABLE api_items; --"})
    assert r.status_code == 200 and r.json()["count"] == 0
    assert_error(c.get("/api/v1/servers/999999/statements/"), 404)


def test_organization_statements_name_their_server(api_world, known):
    url = f"/api/v1/organizations/{api_world.acme.pk}/statements/"
    body = api_world.client("viewer").get(url, {"text": TABLE}).json()
    assert {r["server"] for r in body["results"]} == {"api-statements-15"} and body["count"] >= 2
    assert_error(api_world.client("outsider").get(url), 404)
    assert "page" in assert_error(api_world.client("viewer").get(url, {"page": 11}), 400)["errors"]


def test_one_statement_its_series_and_waits(api_world, known):
    c = api_world.client("viewer")
    top = c.get(f"/api/v1/servers/{known.pk}/statements/", {"text": "SELECT count(*) FROM api_items"}).json()
    sid = top["results"][0]["statement_id"]
    body = c.get(f"/api/v1/statements/{sid}/", {"since": "1h"}).json()
    assert body["totals"]["calls"] == 7 and body["query"].startswith("SELECT count(*)") and body["first_seen_at"]
    series = c.get(f"/api/v1/statements/{sid}/series/", {"since": "1h"}).json()
    assert series["resolution"] == "raw" and sum(p["calls"] or 0 for p in series["points"]) == 7
    assert all(p["mean_plan_ms"] is None for p in series["points"])
    hourly = c.get(f"/api/v1/statements/{sid}/series/", {"since": "1h", "resolution": "hourly"}).json()
    assert hourly["resolution"] == "hourly"
    assert (
        "resolution"
        in assert_error(c.get(f"/api/v1/statements/{sid}/series/", {"resolution": "weekly"}), 400)["errors"]
    )
    waits = c.get(f"/api/v1/statements/{sid}/waits/", {"since": "1h"}).json()
    assert waits["available"] is True  # PostgreSQL 15: pg_stat_activity.query_id
    for path in (f"/api/v1/statements/{sid}/", f"/api/v1/statements/{sid}/series/", f"/api/v1/statements/{sid}/waits/"):
        assert_error(api_world.client("outsider").get(path), 404)
    assert_error(c.get("/api/v1/statements/999999999/"), 404)


def test_server_series(api_world, known):
    c = api_world.client("dba")
    body = c.get(f"/api/v1/servers/{known.pk}/series/", {"since": "1h"}).json()
    assert body["resolution"] == "raw" and body["points"]
    point = [p for p in body["points"] if p["span_s"]][-1]
    assert point["calls_per_s"] > 0 and point["plan_ms_per_s"] is None and point["planning"] == "not tracked"
    assert_error(api_world.client("outsider").get(f"/api/v1/servers/{known.pk}/series/"), 404)
