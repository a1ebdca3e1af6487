"""Sending exactly once per organization and week (the service twice, the beat task twice: counted at the SMTP
server), when a report is due in the organization's time zone, and what happens when the mail server fails:
retried with backoff, recorded, and a recipient that keeps failing reported."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reports.models import ReportDelivery, ReportSchedule, WeeklySend
from reports.selectors import due_at, failing_recipients, next_due, reports_due
from reports.services import MAX_ATTEMPTS, report_send_retry, report_send_test, report_send_weekly
from reports.tasks import retry_delay_s, send_due_reports
from reports.weeks import parse_week
from tests.reports.weekly_world import eager_tasks, monday_after, week_after

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_celery():
    with eager_tasks():
        yield


def test_the_service_twice_sends_once(known_history, readers, smtp):
    org, week = known_history.organization.pk, known_history.week
    first = report_send_weekly(organization_id=org, week=week)
    second = report_send_weekly(organization_id=org, week=week)
    assert (first.claimed, first.sent) == (True, 3)
    assert (second.claimed, second.send_id, second.status, second.sent) == (False, first.send_id, "sent", 3)
    assert smtp.inbox.count() == 3
    assert WeeklySend.objects.filter(organization_id=org, kind="weekly").count() == 1


def test_the_beat_task_twice_sends_once(known_history, readers, smtp, eager_celery):
    org = known_history.organization
    before_seven = monday_after(known_history, hours=6.5)
    assert send_due_reports(now=before_seven) == 0  # due Monday 07:00 in its zone (UTC)
    assert smtp.inbox.count() == 0
    now = monday_after(known_history, hours=8)
    queued = send_due_reports(now=now)
    assert queued >= 1  # this organization, and any other whose week is due (with nobody to send to)
    assert send_due_reports(now=now) == 0
    assert send_due_reports(now=monday_after(known_history, hours=30)) == 0  # Tuesday: still the same week
    assert smtp.inbox.count() == 3
    send = WeeklySend.objects.get(organization=org, kind="weekly")
    assert (send.week, send.status) == (known_history.week.label, "sent")
    # An organization with nobody to send to is recorded as such, once.
    other = WeeklySend.objects.get(organization__name="rep-other", week=known_history.week.label)
    assert (other.status, other.deliveries.count()) == ("empty", 0)


def test_due_in_the_organizations_time_zone(known_history):
    org = known_history.organization
    ReportSchedule.objects.create(organization=org, weekday=2, hour=9, time_zone="Europe/Paris")
    week = parse_week("2026-W47", time_zone="Europe/Paris")  # 16-22 Nov 2026; due Wednesday 25 Nov 09:00 Paris
    schedule = ReportSchedule.objects.get(organization=org)
    assert due_at(schedule, week) == datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
    assert org.pk not in {d.organization_id for d in reports_due(now=datetime(2026, 11, 25, 7, 59, tzinfo=UTC))}
    due = [d for d in reports_due(now=datetime(2026, 11, 25, 8, 0, tzinfo=UTC)) if d.organization_id == org.pk]
    assert [d.week.label for d in due] == ["2026-W47"]
    assert next_due(schedule, now=datetime(2026, 11, 24, tzinfo=UTC)) == datetime(2026, 11, 25, 8, tzinfo=UTC)
    assert next_due(schedule, now=datetime(2026, 11, 26, tzinfo=UTC)) == datetime(2026, 12, 2, 8, tzinfo=UTC)
    schedule.enabled = False
    schedule.save()
    assert org.pk not in {d.organization_id for d in reports_due(now=datetime(2026, 11, 25, 8, 0, tzinfo=UTC))}


def test_a_mail_server_down_then_up(known_history, readers, smtp):
    smtp.stop()
    first = report_send_weekly(organization_id=known_history.organization.pk, week=known_history.week)
    assert (first.status, first.sent, first.pending) == ("sending", 0, 3)
    errors = set(ReportDelivery.objects.filter(send_id=first.send_id).values_list("attempts", "last_error"))
    assert len(errors) == 1 and next(iter(errors))[0] == 1 and "Connection refused" in next(iter(errors))[1]
    # Sending again in the meantime (beat, a re-run) neither claims again nor sends twice.
    assert not report_send_weekly(organization_id=known_history.organization.pk, week=known_history.week).claimed
    smtp.start()
    again = report_send_retry(send_id=first.send_id)
    assert (again.status, again.sent, again.pending) == ("sent", 3, 0)
    assert set(ReportDelivery.objects.filter(send_id=first.send_id).values_list("attempts", "status")) == {(3, "sent")}
    assert smtp.inbox.count() == 3
    assert report_send_retry(send_id=first.send_id).sent == 3 and smtp.inbox.count() == 3


def test_the_task_retries_with_backoff_until_it_goes_through(known_history, readers, smtp, eager_celery):
    smtp.inbox.refuse["bob@acme.example"] = ("451 4.3.0 greylisted, try again later", 2)
    send_due_reports(now=monday_after(known_history))
    bob = ReportDelivery.objects.get(send__organization=known_history.organization, address="bob@acme.example")
    assert (bob.status, bob.attempts) == ("sent", 3)
    assert smtp.inbox.count("bob@acme.example") == 1 and smtp.inbox.refused == ["bob@acme.example"] * 2
    assert [retry_delay_s(n) for n in range(4)] == [60, 120, 240, 480]


def test_a_temporary_failure_that_never_ends_fails_after_the_last_attempt(known_history, readers, smtp, eager_celery):
    smtp.inbox.refuse["bob@acme.example"] = ("452 4.2.2 mailbox full", None)
    send_due_reports(now=monday_after(known_history))
    bob = ReportDelivery.objects.get(send__organization=known_history.organization, address="bob@acme.example")
    assert (bob.status, bob.attempts, bob.last_error) == ("failed", MAX_ATTEMPTS, "452 4.2.2 mailbox full")
    assert WeeklySend.objects.get(organization=known_history.organization).status == "partial"


def test_a_recipient_that_keeps_failing_is_reported(known_history, readers, smtp):
    org, week = known_history.organization.pk, known_history.week
    smtp.inbox.refuse["cto@client.example"] = ("550 5.1.1 no such user", None)
    for n in range(3):
        report_send_weekly(organization_id=org, week=week_after(week, n))  # this week and the two after
        assert [r.address for r in failing_recipients(organization_id=org)] == (
            ["cto@client.example"] if n == 2 else []
        )
    (row,) = failing_recipients(organization_id=org)
    assert (row.failures, row.last_error) == (3, "550 5.1.1 no such user")
    # One delivery that goes through ends the streak.
    smtp.inbox.refuse.clear()
    report_send_test(organization_id=org, week=week, address="cto@client.example")
    assert failing_recipients(organization_id=org) == []
