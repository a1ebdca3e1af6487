"""Every sentence of the weekly report against its inputs, in the cases a new installation meets first: a week
with no history at all, a server added in the middle of the week (with and without an outage), and servers
whose version decides what can be known (PostgreSQL 13 has no pg_stat_statements_info)."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest

from inventory.connection import parse_dsn
from inventory.models import Organization, Server
from inventory.services import server_create
from presentation import formatting as f
from readtier.coverage import collection_coverage
from reports.mail import render, weekly_context
from reports.weekly import weekly_report
from reports.weeks import week_of
from tests.history_world import build

pytestmark = pytest.mark.django_db

STEP = timedelta(minutes=20)
UTC_ZONE = zoneinfo.ZoneInfo("UTC")


def _bodies(report) -> tuple[str, str]:
    _, text, html = render("weekly", weekly_context(report, unsubscribe_url="https://console.example/u"))
    return text, " ".join(html.split())


def _server(name: str, organization: Organization, version_num: int) -> Server:
    server = server_create(
        name=name, connection=parse_dsn(f"postgresql://m@{name}.example/app"), organization_name=organization.name
    )
    Server.objects.filter(pk=server.pk).update(server_version_num=version_num)
    return server


def test_a_week_without_history_claims_nothing_it_does_not_know():
    org = Organization.objects.create(name="sent-new")
    _server("sent-pg16", org, 160004)
    _server("sent-pg13", org, 130011)
    week = week_of(datetime.now(UTC) - timedelta(days=7), time_zone="UTC")
    report = weekly_report(organization_id=org.pk, week=week, charts=False)
    assert report.highlights == [
        "No history was collected this week for any of your 2 servers: there are no figures to report yet. The "
        "first report with figures is the one after the first collections."
    ]
    by = {s.name: s for s in report.servers}
    assert by["sent-pg16"].dealloc == "Deallocations: no history this week."
    assert by["sent-pg13"].dealloc == "Deallocations: unknown (pg_stat_statements_info needs PostgreSQL 14 or later)."
    for s in report.servers:
        assert s.summary == f"{s.name} has no history this week."
        assert s.coverage == "No history this week." and not s.history and s.top == []
    for body in _bodies(report):
        assert "Top 0" not in body and "whole week" not in body, body
        assert "Statements by total time" in body and "No history this week." in body
        # Nothing is known of what ran: neither "none ran" nor "none slowed down".
        assert "No statement ran this week" not in body and "No statement slowed down" not in body


def test_a_server_added_mid_week_is_counted_from_when_its_history_begins():
    org = Organization.objects.create(name="sent-late")
    week = week_of(datetime.now(UTC) - timedelta(days=14), time_zone="UTC")
    begins = week.window.start + timedelta(days=3, hours=5)
    outage = (begins + timedelta(days=1), begins + timedelta(days=1, hours=4))
    late = build("sent-late-db", n=6, start=begins, end=week.window.end + timedelta(hours=1), step=STEP, outage=outage)
    before, after = week.window.start - timedelta(hours=1), week.window.end + timedelta(hours=1)
    whole = build("sent-whole-db", n=6, start=before, end=after, step=STEP, seed=3)
    Server.objects.filter(pk__in=[late.pk, whole.pk]).update(organization=org)
    report = weekly_report(organization_id=org.pk, week=week, charts=False)
    cov = collection_coverage(server_id=late.pk, window=week.window)
    assert cov.history_from is not None and begins <= cov.history_from < begins + STEP
    since = f.when_text(cov.history_from, UTC_ZONE)
    by = {s.name: s for s in report.servers}
    assert by["sent-late-db"].coverage == (
        f"Collected {f.share_text(cov.share)} of the time since {since}, when its history begins: 1 gap, "
        f"{f.hours_text(cov.gap_hours)} in all."
    )
    assert by["sent-whole-db"].coverage == "Collected the whole week, with a snapshot in every hour."
    assert f"sent-late-db is counted from {since}, when its history begins." in report.highlights
    assert f"Collection gaps: sent-late-db ({f.hours_text(cov.gap_hours)}); the figures leave those hours out." in (
        report.highlights
    )
    assert "Every server was collected the whole week." not in report.highlights
    for s in report.servers:  # PostgreSQL 17 (the synthetic servers): deallocations are counted
        assert "needs PostgreSQL 14" not in s.dealloc and s.history


def test_without_an_outage_a_late_server_is_collected_since_it_began_and_no_one_says_the_whole_week():
    org = Organization.objects.create(name="sent-late-clean")
    week = week_of(datetime.now(UTC) - timedelta(days=14), time_zone="UTC")
    begins = week.window.start + timedelta(days=5)
    late = build("sent-clean-db", n=4, start=begins, end=week.window.end + timedelta(hours=1), step=STEP, seed=4)
    Server.objects.filter(pk=late.pk).update(organization=org)
    report = weekly_report(organization_id=org.pk, week=week, charts=False)
    since = f.when_text(collection_coverage(server_id=late.pk, window=week.window).history_from, UTC_ZONE)
    (section,) = report.servers
    assert section.coverage == f"Collected since {since}, when its history begins, with a snapshot in every hour."
    # No history the week before: nothing is "new" or "slower" (it may all have run before it was watched).
    assert f"sent-clean-db is counted from {since}, when its history begins." in report.highlights
    assert not [h for h in report.highlights if "whole week" in h or "first time" in h], report.highlights
    assert section.new_count == section.regression_count == 0 and not section.compared
    assert section.top and {line.change for line in section.top} == {"no week before"}
    for body in _bodies(report):
        assert "Nothing to compare with: no history the week before." in body
        assert "ran for the first time" not in body and "No statement slowed down" not in body


def test_before_its_first_whole_week_an_installation_previews_the_week_so_far(client):
    from django.contrib.auth.models import User
    from django.urls import reverse
    from django.utils import timezone

    from inventory.models import Membership
    from reports.selectors import preview_week

    now = timezone.now()
    week = week_of(now, time_zone="UTC")
    begins = max(week.window.start + timedelta(minutes=1), now - timedelta(hours=5))
    org = Organization.objects.create(name="sent-fresh")
    fresh = build("sent-fresh-db", n=5, start=begins, end=now, step=STEP, seed=9)
    Server.objects.filter(pk=fresh.pk).update(organization=org)
    shown = preview_week(organization_id=org.pk, now=now)
    assert (shown.label, shown.until, shown.window.end) == (week.label, now, now)
    assert shown.previous().window.end == now - timedelta(days=7)
    report = weekly_report(organization_id=org.pk, week=shown, charts=False)
    assert report.week == f"{week.label}, so far"
    assert report.previous_label == "same days and hours of the previous week"
    (section,) = report.servers
    assert "when its history begins" in section.coverage and "whole week" not in " ".join(report.highlights)
    # The console's page shows it by default, and says when the first report goes out.
    user = User.objects.create_user("sent-fresh-viewer", password="pw-fresh-1")
    Membership.objects.create(user=user, organization=org, role=Membership.Role.VIEWER)
    client.force_login(user)
    html = " ".join(client.get(reverse("organization-reports", args=[org.pk])).content.decode().split())
    assert f"Preview: week {week.label}, so far" in html and "none sent yet: the first one goes out" in html
    # Its frame asks for the week in progress by its label: the week so far, not an error.
    preview = client.get(reverse("organization-reports-preview", args=[org.pk]), {"week": week.label})
    assert preview.status_code == 200 and f"{week.label}, so far" in preview.content.decode()
