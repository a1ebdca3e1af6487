"""Recommendations through the API: the caller's organizations only, filters, history, acknowledge and
resolve by DBA and admin (viewer 403, read-only token 403, another organization 404, a wrong step 409)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from advisor import advice as found
from advisor import sources
from advisor.models import Recommendation, RecommendationEvent
from advisor.services import recommendations_apply
from inventory.connection import parse_dsn
from inventory.services import server_create
from tests.api_world import assert_error

pytestmark = pytest.mark.django_db
LIST = "/api/v1/recommendations/"


def _finding(rule: str, severity: str, subject: str = "server", change: bool = True) -> found.Advice:
    now = timezone.now()
    return found.Advice(
        rule=rule,
        severity=severity,
        server="x",
        subject=subject,
        title=f"{rule} {severity}",
        explanation="dealloc 39.5/s <script>alert(1)</script>",
        change=found.Change("ALTER SYSTEM SET pg_stat_statements.max = 5000;", "restart") if change else None,
        evidence=(found.EvidenceSeries("deallocations", "dealloc/s", ((now, 39.5), (now, None))),),
        references=("seeds/000_619f50110a6dd62f.txt",),
    )


@pytest.fixture
def advice(api_world):
    ours = server_create(
        name="db1", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="acme"
    )
    theirs = server_create(
        name="db9", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="other"
    )
    now = timezone.now()
    recommendations_apply(
        server=ours,
        found_now=[
            _finding("pgss_max", "critical"),
            _finding("planning_dominated", "warning", "statement:1", change=False),
        ],
        now=now,
        clear_after=timedelta(hours=2),
    )
    recommendations_apply(
        server=theirs, found_now=[_finding("pgss_max", "critical")], now=now, clear_after=timedelta(hours=2)
    )
    return {r.rule: r for r in Recommendation.objects.filter(server=ours)}, Recommendation.objects.get(server=theirs)


def test_list_filters_and_scope(api_world, advice):
    ours, theirs = advice
    body = api_world.client("viewer").get(LIST).json()
    assert [r["rule"] for r in body["results"]] == ["pgss_max", "planning_dominated"]  # most severe first
    first = body["results"][0]
    assert first["change"] == {"text": "ALTER SYSTEM SET pg_stat_statements.max = 5000;", "apply": "restart"}
    assert first["evidence"][0]["points"][1][1] is None and first["server"] == "db1"
    assert body["results"][1]["change"] is None
    # Stored by an earlier version with the team's file name: read as the public text it is.
    assert first["references"] == [sources.DALIBO_SLOW_COMMIT]
    assert [r["id"] for r in api_world.client("outsider").get(LIST).json()["results"]] == [theirs.pk]
    c = api_world.client("viewer")
    assert [r["rule"] for r in c.get(LIST, {"severity": "critical"}).json()["results"]] == ["pgss_max"]
    assert [r["rule"] for r in c.get(LIST, {"rule": "planning_dominated"}).json()["results"]] == ["planning_dominated"]
    assert c.get(LIST, {"status": "resolved"}).json()["count"] == 0
    assert c.get(LIST, {"organization": api_world.other.pk}).json()["count"] == 0  # not theirs to see
    assert "severity" in assert_error(c.get(LIST, {"severity": "urgent"}), 400)["errors"]
    assert "status" in assert_error(c.get(LIST, {"status": "closed"}), 400)["errors"]
    assert "server" in assert_error(c.get(LIST, {"server": "db1"}), 400)["errors"]
    csv = c.get(LIST, {"format": "csv"}).content.decode().splitlines()
    assert "change.text" in csv[0] and len(csv) == 3


def test_read_with_history_and_other_organizations_404(api_world, advice):
    ours, theirs = advice
    body = api_world.client("viewer").get(f"{LIST}{ours['pgss_max'].pk}/").json()
    assert body["title"] == "pgss_max critical" and [e["kind"] for e in body["events"]] == ["opened"]
    assert "<script>" in body["explanation"]  # JSON carries the text as it is; escaping is the renderer's job
    assert_error(api_world.client("viewer").get(f"{LIST}{theirs.pk}/"), 404, "not_found")
    assert_error(api_world.client("viewer").get(f"{LIST}999999/"), 404)


def test_acknowledge_and_resolve_by_role(api_world, advice):
    ours, theirs = advice
    rec = ours["pgss_max"]
    url = f"{LIST}{rec.pk}/acknowledge/"
    assert_error(api_world.client("viewer").post(url), 403)
    assert_error(api_world.client("dba", read_only=True).post(url), 403, "read_only_token")
    assert_error(api_world.client("outsider").post(url), 404)
    body = api_world.client("dba").post(url).json()
    assert body["status"] == "acknowledged" and body["acknowledged_by"] == "dba"
    assert [e["kind"] for e in body["events"]] == ["opened", "acknowledged"]
    body = assert_error(api_world.client("admin").post(url), 409, "conflict")
    assert "only an open recommendation" in body["message"]
    body = api_world.client("admin").post(f"{LIST}{rec.pk}/resolve/").json()
    assert body["status"] == "resolved" and body["resolved_by"] == "admin"
    assert_error(api_world.client("admin").post(f"{LIST}{rec.pk}/resolve/"), 409, "conflict")
    assert RecommendationEvent.objects.filter(recommendation=rec, kind="resolved").count() == 1
    assert [r["id"] for r in api_world.client("viewer").get(LIST, {"status": "resolved"}).json()["results"]] == [rec.pk]
    assert_error(api_world.client("dba").post(f"{LIST}{theirs.pk}/resolve/"), 404)
