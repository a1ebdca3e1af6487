"""A known history for the weekly reports and the audit exports: two full ISO weeks (W-1 and W) of 30-minute
snapshots of 30 synthetic statements on one server of organization "rep-acme", with a 3-hour outage inside
week W, and a second server of another organization over the same weeks (an organization's report never
shows it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from console.services import server_delete
from inventory.models import Organization, Server
from reports.weeks import ReportWeek, week_of

STEP = timedelta(minutes=30)


@dataclass(frozen=True)
class KnownHistory:
    organization: Organization
    server: Server
    other: Server  # another organization's
    week: ReportWeek  # the report's week (UTC)
    outage: tuple[datetime, datetime]


@pytest.fixture(scope="session")
def known_history(django_db_setup, django_db_blocker):
    from tests.history_world import build

    # The last complete week is at least a week old: its raw snapshots are past their retention in
    # production, but the test keeps them, so they are the ground truth next to the tiers.
    week = week_of(datetime.now(UTC) - timedelta(days=14), time_zone="UTC")
    start = week.previous().window.start
    end = week.window.end + timedelta(hours=1)
    outage = (week.window.start + timedelta(days=2, hours=3), week.window.start + timedelta(days=2, hours=6))
    with django_db_blocker.unblock():
        organization, _ = Organization.objects.get_or_create(name="rep-acme")
        other_org, _ = Organization.objects.get_or_create(name="rep-other")
        server = build("rep-main", n=30, start=start, end=end, step=STEP, outage=outage, seed=5)
        Server.objects.filter(pk=server.pk).update(organization=organization)
        other = build("rep-elsewhere", n=10, start=start, end=end, step=STEP, seed=6)
        Server.objects.filter(pk=other.pk).update(organization=other_org)
        server.refresh_from_db()
        other.refresh_from_db()
        yield KnownHistory(organization, server, other, week, outage)
        server_delete(server=server)
        server_delete(server=other)
