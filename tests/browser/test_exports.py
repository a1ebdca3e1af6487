"""The audit export page in a real browser: a DBA requests an export, the list follows its progress by
itself (htmx polling, no inline script under the CSP) until the download link shows, and the download is
the stored zip; no console error, CSP violation or 5xx on the way (the console_log fixture)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from exports.models import AuditExport
from exports.services import audit_export_build
from inventory.models import Organization

LOCAL = "%Y-%m-%dT%H:%M"


def test_a_dba_requests_follows_and_downloads_an_export(console_page: Page, synthetic_server, settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"  # the live server runs in this process: it sees the override
    server = synthetic_server("db-export", hours=6)
    org = Organization.objects.get(name="acme")
    page = console_page
    page.goto(f"/organizations/{org.pk}/")
    page.get_by_role("link", name="Audit exports").click()
    expect(page.get_by_role("heading", name="Audit exports")).to_be_visible()
    now = timezone.now()
    page.get_by_label(server.name).check()
    page.locator("#id_window_start").fill((now - timedelta(hours=5)).strftime(LOCAL))
    page.locator("#id_window_end").fill((now - timedelta(minutes=5)).strftime(LOCAL))
    for label in ("PDF report", "XLSX workbook", "CSV files"):
        page.get_by_label(label).uncheck()
    page.get_by_role("button", name="Request the export").click()
    expect(page.locator(".messages")).to_contain_text("is queued")
    row = page.locator("#exports-list tbody tr").first
    expect(row.locator("progress")).to_be_visible()
    export = AuditExport.objects.get(organization=org)
    assert export.formats == ["json"] and export.server_ids == [server.pk]

    audit_export_build(export_id=export.pk)  # the worker's job (tests/exports/test_tasks.py runs one)
    export.refresh_from_db()
    link = row.get_by_role("link", name=export.file_name.rsplit("/", 1)[-1])
    expect(link).to_be_visible(timeout=10_000)  # the list polled every 2 s and swapped itself
    expect(page.locator("#exports-list")).not_to_have_attribute("hx-trigger", "every 2s")
    with page.expect_download() as download:
        link.click()
    data = open(download.value.path(), "rb").read()
    assert hashlib.sha256(data).hexdigest() == export.sha256
    page.reload()
    expect(page.locator("#exports-list")).to_contain_text("downloaded")


@pytest.fixture(autouse=True)
def _no_broker_needed(monkeypatch):
    """The request queues the build on the broker; here the test builds it itself, so nothing is sent."""
    monkeypatch.setattr("exports.tasks.audit_export_build_task.delay", lambda *args, **kwargs: None)
