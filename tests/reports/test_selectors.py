"""reports.selectors: an organization's schedule (the unsaved default where none was saved), the report's week in
its time zone (a week not over yet refused), who gets the report (members who opted in, still readers, active,
with an address, and the extra addresses, lower-cased, once, without the unsubscribed) and the send history."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from inventory.connection import parse_dsn
from inventory.models import Membership, Organization
from inventory.services import server_create
from reports.models import ReportDelivery, ReportOptIn, ReportSchedule, Unsubscribed, WeeklySend
from reports.selectors import (
    is_opted_in,
    preview_week,
    report_recipients,
    report_schedule,
    report_week,
    send_history,
    unsubscribed,
)
from reports.weeks import WeekError

pytestmark = pytest.mark.django_db
SUNDAY_NOON = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)  # the last day of 2026-W47; Monday 01:00 in Auckland


@pytest.fixture
def org():
    return Organization.objects.create(name="sel-reports")


def member(org, name, email, *, opted_in=True, role="viewer"):
    user = get_user_model().objects.create_user(f"sel-{name}", email=email)
    Membership.objects.create(organization=org, user=user, role=role)
    if opted_in:
        ReportOptIn.objects.create(organization=org, user=user)
    return user


def test_without_a_saved_schedule_the_default_is_monday_seven_utc_unsaved(org):
    default = report_schedule(organization_id=org.pk)
    assert (default.enabled, default.weekday, default.hour, default.time_zone) == (True, 0, 7, "UTC")
    assert default.extra_recipients == [] and not ReportSchedule.objects.filter(organization=org).exists()
    ReportSchedule.objects.create(organization=org, weekday=4, hour=18, time_zone="Asia/Tokyo")
    saved = report_schedule(organization_id=org.pk)
    assert (saved.weekday, saved.hour, saved.time_zone, saved._state.adding) == (4, 18, "Asia/Tokyo", False)


def test_the_reports_week_is_the_last_complete_one_in_the_organizations_zone(org):
    assert report_week(organization_id=org.pk, now=SUNDAY_NOON).label == "2026-W46"
    with pytest.raises(WeekError) as early:
        report_week(organization_id=org.pk, label="2026-W47", now=SUNDAY_NOON)
    assert str(early.value) == (
        "week 2026-W47 is not over yet: a report covers a whole week (the last complete one is 2026-W46)"
    )
    assert report_week(organization_id=org.pk, label="2026-W10", now=SUNDAY_NOON).window.start == datetime(
        2026, 3, 2, tzinfo=UTC
    )
    with pytest.raises(WeekError, match="write it as an ISO week"):
        report_week(organization_id=org.pk, label="2026-47", now=SUNDAY_NOON)
    ReportSchedule.objects.create(organization=org, time_zone="Pacific/Auckland")  # UTC+13: Monday already
    week = report_week(organization_id=org.pk, label="2026-W47", now=SUNDAY_NOON)
    assert (week.label, week.time_zone, week.window.end) == (
        "2026-W47",
        "Pacific/Auckland",
        SUNDAY_NOON - timedelta(hours=1),
    )
    assert report_week(organization_id=org.pk, now=SUNDAY_NOON).label == "2026-W47"


def test_an_organization_without_history_previews_its_last_complete_week(org):
    assert preview_week(organization_id=org.pk, now=SUNDAY_NOON) == report_week(organization_id=org.pk, now=SUNDAY_NOON)
    server_create(
        name="sel-new", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name=org.name
    )  # no history
    shown = preview_week(organization_id=org.pk, now=SUNDAY_NOON)
    assert (shown.label, shown.until) == ("2026-W46", None)


def test_recipients_are_the_readers_who_opted_in_and_the_extra_addresses_once(org):
    member(org, "alice", "alice@acme.example")
    bob = member(org, "bob", "bob@acme.example", role="dba")
    get_user_model().objects.filter(pk=bob.pk).update(email=" Bob@Acme.Example ")  # as typed: read lower-cased
    member(org, "carol", "carol@acme.example", opted_in=False)
    member(org, "nomail", "")  # opted in without an address: nothing to send to
    asleep = member(org, "asleep", "asleep@acme.example")
    get_user_model().objects.filter(pk=asleep.pk).update(is_active=False)
    left = member(org, "left", "left@acme.example")
    Membership.objects.filter(user=left).delete()  # opted in, then left the organization
    admin = get_user_model().objects.create_superuser("sel-root", email="root@console.example")
    ReportOptIn.objects.create(organization=org, user=admin)  # a console administrator reads every organization
    member(org, "gone", "gone@acme.example")
    Unsubscribed.objects.create(organization=org, address="gone@acme.example", at=SUNDAY_NOON)
    Unsubscribed.objects.create(organization=org, address="old@client.example", at=SUNDAY_NOON)
    extras = ["CTO@client.example", "alice@acme.example", " ", "old@client.example", "cto@client.example"]
    ReportSchedule.objects.create(organization=org, extra_recipients=extras)
    got = report_recipients(organization_id=org.pk)
    assert sorted(got) == ["alice@acme.example", "bob@acme.example", "cto@client.example", "root@console.example"]
    assert got[-1] == "cto@client.example"  # members first, then the extra addresses
    assert report_recipients(organization_id=Organization.objects.create(name="sel-empty").pk) == []


def test_opted_in_means_an_address_an_opt_in_and_no_unsubscription(org):
    alice, nomail = member(org, "alice", "Alice@acme.example"), member(org, "nomail", "")
    carol = member(org, "carol", "carol@acme.example", opted_in=False)
    assert is_opted_in(organization_id=org.pk, user=alice) and not is_opted_in(organization_id=org.pk, user=carol)
    assert not is_opted_in(organization_id=org.pk, user=nomail)
    Unsubscribed.objects.create(organization=org, address="alice@acme.example", at=SUNDAY_NOON)
    assert not is_opted_in(organization_id=org.pk, user=alice)


def test_unsubscribed_addresses_are_the_organizations_own_by_address(org):
    other = Organization.objects.create(name="sel-other")
    for address in ("zed@x.example", "amy@x.example", "mid@x.example"):
        Unsubscribed.objects.create(organization=org, address=address, at=SUNDAY_NOON)
    Unsubscribed.objects.create(organization=other, address="also@x.example", at=SUNDAY_NOON)
    listed = [u.address for u in unsubscribed(organization_id=org.pk)]
    assert listed == ["amy@x.example", "mid@x.example", "zed@x.example"]
    assert unsubscribed(organization_id=Organization.objects.create(name="sel-none").pk) == []


DELIVERIES = [("b@x.example", "sent"), ("a@x.example", "failed"), ("c@x.example", "pending")]


def test_the_send_history_is_newest_first_with_its_deliveries_counted(org):
    asker = get_user_model().objects.create_user("sel-asker")
    window = {"window_start": SUNDAY_NOON - timedelta(days=7), "window_end": SUNDAY_NOON}
    for n in range(3):
        send = WeeklySend.objects.create(
            organization=org, week=f"2026-W4{n}", claimed_at=SUNDAY_NOON + timedelta(hours=n), **window
        )
        for address, status in DELIVERIES[: n + 1]:
            ReportDelivery.objects.create(send=send, address=address, status=status)
    WeeklySend.objects.create(
        organization=org, kind="test", week="2026-W45", claimed_at=SUNDAY_NOON, requested_by=asker, **window
    )
    rows = send_history(organization_id=org.pk)
    assert [(r.send.week, r.sent, r.failed, r.pending) for r in rows] == [
        ("2026-W42", 1, 1, 1),
        ("2026-W41", 1, 1, 0),
        ("2026-W45", 0, 0, 0),  # claimed at the same time as W40, later: the greater id first
        ("2026-W40", 1, 0, 0),
    ]
    assert [d.address for d in rows[0].deliveries] == ["a@x.example", "b@x.example", "c@x.example"]
    assert (rows[2].requested_by, rows[0].requested_by) == ("sel-asker", None)
    assert [r.send.week for r in send_history(organization_id=org.pk, limit=1)] == ["2026-W42"]
