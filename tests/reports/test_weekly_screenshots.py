"""The weekly mail in a real browser (Debian's chromium) at a desktop client's width and a phone's: nothing
wider than the window, every chart loaded and within the column. The screenshots go to a temporary folder,
or to WEEKLY_SCREENSHOTS_DIR (e.g. docs/screenshots, for docs/reports.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devenv import mail_screenshots
from reports.mail import weekly_preview_html
from reports.unsubscribe import unsubscribe_url
from reports.weekly import weekly_report

pytestmark = pytest.mark.django_db


def test_the_mail_fits_a_desktop_client_and_a_phone(known_history, tmp_path):
    org = known_history.organization.pk
    report = weekly_report(organization_id=org, week=known_history.week)
    html = weekly_preview_html(report, unsubscribe_url=unsubscribe_url(organization_id=org, address="you@example.com"))
    out = Path(os.environ.get("WEEKLY_SCREENSHOTS_DIR") or tmp_path)
    shots = mail_screenshots.take(html, out)
    assert [s.path.name for s in shots] == ["weekly-report.png", "weekly-report-narrow.png"]
    for shot in shots:
        assert shot.scroll_width <= shot.width, f"{shot.path.name}: {shot.scroll_width} px wide in {shot.width}"
        assert len(shot.images) == len(report.images) == 2
        for drawn, natural in shot.images:
            assert natural > 0 and 0 < drawn <= shot.width - 24
        assert shot.path.read_bytes().startswith(b"\x89PNG")
