"""The console's audit export page of an organization: who sees it, requesting an export, the list that
polls itself while one is built, the permission-checked download, and the audit log."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from exports.models import AuditExport, AuditLogEntry
from exports.services import audit_export_build, audit_exports_tidy
from tests.exports.export_world import members

pytestmark = pytest.mark.django_db
LOCAL = "%Y-%m-%dT%H:%M"


@pytest.fixture
def page(known_history, settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    users = members(known_history)

    def client(role: str) -> Client:
        c = Client()
        c.force_login(users[role])
        return c

    return known_history, users, client, reverse("exports", args=[known_history.organization.pk])


def _form(history, **extra) -> dict:
    w = history.week.window  # the users' zone is UTC (no preference)
    return {
        "window_start": w.start.strftime(LOCAL),
        "window_end": w.end.strftime(LOCAL),
        "formats": ["json", "pdf"],
        **extra,
    }


def test_who_sees_the_page(page):
    history, _, client, url = page
    assert client("viewer").get(url).status_code == 403
    assert client("outsider").get(url).status_code == 404
    r = client("dba").get(url)
    assert r.status_code == 200
    html = r.content.decode()
    assert "rep-main" in html and "rep-elsewhere" not in html and 'type="datetime-local"' in html
    org_page = reverse("organization", args=[history.organization.pk])
    assert url in client("admin").get(org_page).content.decode()
    assert url not in client("viewer").get(org_page).content.decode()


def test_request_follow_and_download(page, django_capture_on_commit_callbacks):
    history, users, client, url = page
    dba = client("dba")
    with django_capture_on_commit_callbacks() as queued:
        r = dba.post(url, _form(history, servers=[str(history.server.pk)]))
    assert r.status_code == 302 and len(queued) == 1
    export = AuditExport.objects.get(organization=history.organization)
    assert (export.window_start, export.window_end) == (history.week.window.start, history.week.window.end)
    assert export.formats == ["pdf", "json"] and export.requested_by == users["dba"]
    # While it is queued the list polls itself (an htmx request gets the list alone)...
    fragment = dba.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 2s"' in fragment and "<h1>" not in fragment and "queued" in fragment
    audit_export_build(export_id=export.pk)
    export.refresh_from_db()
    # ... and stops once it is done, with the download link.
    fragment = dba.get(url, headers={"HX-Request": "true"}).content.decode()
    download = reverse("export-download", args=[history.organization.pk, export.pk])
    assert "hx-trigger" not in fragment and download in fragment and export.sha256[:8] in fragment
    r = dba.get(download)
    assert r.status_code == 200 and r["Content-Type"] == "application/zip"
    assert hashlib.sha256(r.content).hexdigest() == export.sha256
    assert client("viewer").get(download).status_code == 403
    assert client("outsider").get(download).status_code == 404
    # Another organization's URL for the same export: nothing there.
    other = reverse("export-download", args=[history.other.organization_id, export.pk])
    assert client("outsider").get(other).status_code == 404
    log = [(e.action, e.user_id) for e in AuditLogEntry.objects.filter(export=export).order_by("at", "id")]
    assert log == [
        ("export_requested", users["dba"].pk),
        ("export_generated", None),
        ("export_downloaded", users["dba"].pk),
    ]
    html = dba.get(url).content.decode()
    assert "downloaded" in html and "generated" in html and "exp-dba" in html
    # Past the retention its file goes: the list says so, without a link, and the old link explains.
    AuditExport.objects.filter(pk=export.pk).update(finished_at=timezone.now() - timedelta(days=31))
    assert audit_exports_tidy().expired == [export.pk]
    fragment = dba.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "expired" in fragment and "its file was deleted 30 days after it was built" in fragment
    assert download not in fragment
    r = dba.get(download, follow=True)
    assert "has expired (its file was deleted 30 days after it was built): request it again" in r.content.decode()


def test_a_bad_request_says_what_to_fix(page):
    history, _, client, url = page
    future = (timezone.now() + timedelta(days=1)).strftime(LOCAL)
    r = client("admin").post(url, _form(history, window_end=future))
    assert r.status_code == 400 and "the window must have ended" in r.content.decode()
    r = client("admin").post(url, _form(history, servers=[str(history.other.pk)], formats=[]))
    assert r.status_code == 400 and "This field is required" in r.content.decode()
    assert not AuditExport.objects.exists()
