"""Audit exports through the API (every response checked against the served OpenAPI schema): request, poll,
download by role, errors in the one shape, the JSON Schema at its URL, and the bundle's figures against the
API's own top statements for the same window."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import jsonschema
import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from accounts.tokens import token_create
from exports.models import AuditExport, AuditLogEntry
from exports.services import audit_export_build, audit_exports_tidy
from tests.api_world import assert_error
from tests.console.api.schema_check import CheckedClient
from tests.exports.export_world import members, unzip

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(known_history, settings, tmp_path):
    cache.clear()  # throttling counters
    settings.EXPORT_ROOT = tmp_path / "exports"
    users = members(known_history)

    def client(role: str, *, read_only: bool = False) -> CheckedClient:
        _, secret = token_create(user=users[role], name=f"t-{role}", read_only=read_only)
        return CheckedClient(HTTP_AUTHORIZATION=f"Bearer {secret}")

    return known_history, users, client


def _post(client, body: dict):
    return client.post("/api/v1/exports/", json.dumps(body), content_type="application/json")


def _body(history, **extra) -> dict:
    w = history.week.window
    return {
        "organization": history.organization.pk,
        "window_start": w.start.isoformat(),
        "window_end": w.end.isoformat(),
        **extra,
    }


def test_request_poll_download(api):
    history, users, client = api
    dba = client("dba")
    r = _post(dba, _body(history, formats=["json", "csv"]))
    assert r.status_code == 202, r.content
    created = r.json()
    assert created["status"] == "queued" and created["download_url"] is None
    assert created["server_ids"] == [history.server.pk] and created["formats"] == ["csv", "json"]
    assert_error(dba.get(f"{created['status_url']}download/"), 409, "not_ready")
    audit_export_build(export_id=created["id"])  # what the worker does (tests/exports/test_tasks.py)
    status = dba.get(created["status_url"]).json()
    assert status["status"] == "done" and status["progress"] == 100 and len(status["sha256"]) == 64
    r = dba.get(status["download_url"])
    data = r.content
    assert r["Content-Type"] == "application/zip" and r["X-Checksum-SHA256"] == status["sha256"]
    assert hashlib.sha256(data).hexdigest() == status["sha256"] and status["file_name"] in r["Content-Disposition"]
    files = unzip(data)
    assert "audit.pdf" not in files and "audit.json" in files and "csv/top_calls.csv" in files
    # The figures are the API's own for the same window.
    w = history.week.window
    top = dba.get(
        f"/api/v1/servers/{history.server.pk}/statements/",
        {"from": w.start.isoformat(), "to": w.end.isoformat(), "order_by": "calls", "page_size": 20},
    ).json()
    doc = json.loads(files["audit.json"])
    mine = doc["servers"][0]["top"]["calls"]
    assert [(r["statement_id"], r["calls"], r["exec_ms"], r["plan_ms"]) for r in mine] == [
        (r["statement_id"], r["calls"], round(r["exec_ms"], 3), r["plan_ms"]) for r in top["results"]
    ]
    schema = dba.get("/api/v1/schemas/audit-export.json").json()
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert [e["id"] for e in dba.get("/api/v1/exports/").json()["results"]] == [created["id"]]
    assert (
        AuditLogEntry.objects.filter(export_id=created["id"], action="export_downloaded", user=users["dba"]).count()
        == 1
    )
    # Past the retention: "expired" in the schema's enum, no download URL, and the old one says why.
    AuditExport.objects.filter(pk=created["id"]).update(finished_at=timezone.now() - timedelta(days=31))
    audit_exports_tidy()
    expired = dba.get(created["status_url"]).json()
    assert (expired["status"], expired["download_url"], expired["sha256"]) == ("expired", None, status["sha256"])
    error = assert_error(dba.get(f"{created['status_url']}download/"), 409, "not_ready")
    assert error["message"].startswith("the export has expired (its file was deleted 30 days after it was built)")


def test_roles_and_organizations(api):
    history, users, client = api
    assert_error(_post(client("viewer"), _body(history)), 403)
    assert_error(_post(client("dba", read_only=True), _body(history)), 403, "read_only_token")
    # The organization is in the body: a field error, as for a server's creation.
    assert "organization" in assert_error(_post(client("outsider"), _body(history)), 400)["errors"]
    created = _post(client("admin"), _body(history)).json()
    audit_export_build(export_id=created["id"])
    url = created["status_url"]
    # Any member follows it; only a DBA or an admin takes its file.
    assert client("viewer").get(url).json()["status"] == "done"
    assert client("viewer").get("/api/v1/exports/").json()["count"] == 1
    assert_error(client("viewer").get(f"{url}download/"), 403)
    assert_error(client("outsider").get(url), 404)
    assert_error(client("outsider").get(f"{url}download/"), 404)
    assert client("outsider").get("/api/v1/exports/").json()["count"] == 0
    assert client("dba").get(f"{url}download/").status_code == 200
    assert not AuditLogEntry.objects.filter(action="export_downloaded", user__in=[users["viewer"], users["outsider"]])
    assert_error(Client().get("/api/v1/schemas/audit-export.json"), 401)


def test_bad_requests_say_what_to_fix(api):
    history, _, client = api
    dba = client("dba")
    w = history.week.window
    cases = [
        (_body(history, window_start=w.end.isoformat(), window_end=w.start.isoformat()), "window_start"),
        (_body(history, window_end="2999-01-01T00:00:00Z"), "window_end"),
        (_body(history, window_start="2000-01-01T00:00:00Z"), "window_start"),
        (_body(history, servers=[history.other.pk]), "servers"),
        (_body(history, formats=["docx"]), "formats"),
        (_body(history, formats=[]), "formats"),
        (_body(history, window_start="yesterday"), "window_start"),
        ({"organization": "acme"}, "organization"),
        (_body(history, servers="all"), "servers"),
    ]
    for body, field in cases:
        assert field in assert_error(_post(dba, body), 400, "invalid")["errors"], body
    assert_error(dba.post("/api/v1/exports/", "[1, 2]", content_type="application/json"), 400)
    assert_error(dba.get("/api/v1/exports/123456789/"), 404)


def test_past_the_organizations_share_the_api_answers_429_with_the_reason(api, settings):
    history, _, client = api
    settings.EXPORTS_IN_PROGRESS_PER_ORGANIZATION = 1
    dba = client("dba")
    assert _post(dba, _body(history, formats=["json"])).status_code == 202
    refused = assert_error(_post(dba, _body(history, formats=["json"])), 429, "throttled")
    assert "has 1 export queued or being built" in refused["message"]
