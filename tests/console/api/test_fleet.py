"""GET /api/v1/fleet/: the fleet page's figures from the same selector, the caller's servers only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from advisor import advice as found
from advisor.services import recommendations_apply
from inventory.connection import parse_dsn
from inventory.services import server_create
from readtier import Window, fleet_summary
from tests.api_world import assert_error
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
FLEET = "/api/v1/fleet/"


def test_fleet_figures_agree_with_the_selector_and_stay_in_the_organization(api_world, pg_clusters):
    c = pg_clusters[16]
    server = register(c, name="api-fleet-16", org="acme")
    collect(server)
    run(c, "SELECT 1", 25)
    collect(server)
    server_create(name="theirs", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="other")
    recommendations_apply(
        server=server,
        found_now=[
            found.Advice(
                rule="pgss_max", severity="critical", server=server.name, subject="server", title="t", explanation="e"
            )
        ],
        now=timezone.now(),
        clear_after=timedelta(hours=2),
    )
    r = api_world.client("viewer").get(FLEET, {"since": "1h"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert [s["name"] for s in body["results"]] == ["api-fleet-16"] and body["count"] == 1
    row = body["results"][0]
    start = timezone.datetime.fromisoformat(body["window_start"])
    end = timezone.datetime.fromisoformat(body["window_end"])
    (truth,) = fleet_summary(server_ids=[server.pk], window=Window(start, end))
    assert row["calls_per_s"] == pytest.approx(truth.calls_per_s) and truth.calls_per_s > 0
    assert row["snapshots"] == truth.snapshots == 1
    assert row["plan_ms_per_s"] is None and row["planning"] == "not tracked"  # track_planning off: null, not 0
    assert row["recommendations"] == {"critical": 1, "warning": 0, "info": 0}
    assert [s["name"] for s in api_world.client("outsider").get(FLEET).json()["results"]] == ["theirs"]
    csv = api_world.client("viewer").get(FLEET, {"format": "csv"}).content.decode().splitlines()
    assert "recommendations.critical" in csv[0] and csv[1].count("api-fleet-16") == 1


def test_fleet_bad_windows_and_pages_say_what_to_fix(api_world):
    c = api_world.client("viewer")
    assert (
        "from"
        in assert_error(c.get(FLEET, {"from": "2026-11-23T10:00:00Z", "to": "2026-11-23T09:00:00Z"}), 400)["errors"]
    )
    assert "ISO 8601" in assert_error(c.get(FLEET, {"from": "yesterday"}), 400)["message"]
    assert "UTC offset" in assert_error(c.get(FLEET, {"from": "2026-11-23T10:00:00"}), 400)["message"]
    assert "since" in assert_error(c.get(FLEET, {"since": "banana"}), 400)["errors"]
    assert "31" in assert_error(c.get(FLEET, {"since": "90d"}), 400)["message"]
    # A length past what a timedelta holds (Schemathesis found this one as a 500): a 400 like any other.
    assert "31" in assert_error(c.get(FLEET, {"since": "114101710714242846878304min"}), 400)["message"]
    assert (
        "retention"
        in assert_error(c.get(FLEET, {"from": "2001-01-01T00:00:00Z", "to": "2001-01-02T00:00:00Z"}), 400)["message"]
    )
    assert "page_size" in assert_error(c.get(FLEET, {"page_size": 501}), 400)["errors"]
    assert "organization" in assert_error(c.get(FLEET, {"organization": "x"}), 400)["errors"]
