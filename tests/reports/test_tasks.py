"""reports.tasks: send_due_reports queues one send_weekly_report (expiring) per organization whose report is due
and not claimed yet; send_weekly_report claims and mails a week once and returns what happened; waits double
from a minute. Queued messages are read off the broker (no worker runs); mail goes to a real SMTP server."""

from datetime import UTC, datetime, timedelta

import pytest

from inventory.models import Organization
from reports.models import ReportSchedule, WeeklySend
from reports.services import MAX_ATTEMPTS
from reports.tasks import RETRY_BASE_S, SEND_EXPIRES_S, retry_delay_s, send_due_reports, send_weekly_report
from reports.weeks import WeekError
from tests.broker import emptied

pytestmark = pytest.mark.django_db
MONDAY_EIGHT = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # 2026-W47 is over, its report due at 07:00 UTC
NOW = MONDAY_EIGHT.isoformat()
QUEUE = "reports"  # console/settings.py routes reports.tasks.* there


@pytest.fixture
def broker():
    with emptied(QUEUE) as queue:
        yield queue


def test_each_wait_doubles_from_a_minute_and_all_of_them_fit_before_a_send_expires():
    assert retry_delay_s(0) == RETRY_BASE_S == 60
    assert all(retry_delay_s(n + 1) == 2 * retry_delay_s(n) for n in range(MAX_ATTEMPTS))
    assert sum(retry_delay_s(n) for n in range(MAX_ATTEMPTS)) < SEND_EXPIRES_S


def test_only_the_organizations_due_and_unclaimed_get_a_send(broker):
    due, off, later, claimed = (Organization.objects.create(name=f"tasks-{n}") for n in ("due", "off", "later", "sent"))
    ReportSchedule.objects.create(organization=off, enabled=False)
    ReportSchedule.objects.create(organization=later, weekday=0, hour=10, time_zone="Europe/Paris")  # 09:00 UTC
    start, end = MONDAY_EIGHT - timedelta(days=7, hours=8), MONDAY_EIGHT - timedelta(hours=8)
    WeeklySend.objects.create(organization=claimed, week="2026-W47", window_start=start, window_end=end, claimed_at=end)
    queued = send_due_reports(now=NOW)
    waiting = broker.waiting()
    assert len(waiting) == queued and {q.task for q in waiting} <= {"reports.tasks.send_weekly_report"}
    chosen = {q.args[0]: (q.args[1], q.kwargs) for q in waiting}
    assert chosen[due.pk] == ("2026-W47", {"now": NOW})
    assert not {off.pk, later.pk, claimed.pk} & set(chosen)
    for q in waiting:
        expires = q.expires - datetime.now(UTC)
        assert timedelta(seconds=SEND_EXPIRES_S - 60) < expires <= timedelta(seconds=SEND_EXPIRES_S)
    broker.clear()
    assert send_due_reports(now=(MONDAY_EIGHT + timedelta(hours=1)).isoformat()) >= 1
    assert later.pk in {q.args[0] for q in broker.waiting()}


def test_a_week_with_nobody_to_send_to_is_claimed_as_empty():
    org = Organization.objects.create(name="tasks-nobody")
    out = send_weekly_report.apply((org.pk, "2026-W47"), {"now": NOW}).get()
    send = WeeklySend.objects.get(organization=org)
    assert out == {
        "send_id": send.pk,
        "claimed": True,
        "status": "empty",
        "sent": 0,
        "failed": 0,
        "pending": 0,
        "busy": False,
        "errors": {},
    }


def test_a_week_is_mailed_once_and_a_refused_address_is_in_the_outcome(smtp):
    org = Organization.objects.create(name="tasks-mail")
    ReportSchedule.objects.create(organization=org, extra_recipients=["cto@client.example", "nobody@client.example"])
    smtp.inbox.refuse["nobody@client.example"] = ("550 5.1.1 no such user", None)
    first = send_weekly_report.apply((org.pk, "2026-W47"), {"now": NOW}).get()
    assert (first["claimed"], first["status"], first["sent"], first["failed"], first["pending"]) == (
        True,
        "partial",
        1,
        1,
        0,
    )
    assert first["errors"] == {"nobody@client.example": "550 5.1.1 no such user"}
    again = send_weekly_report.apply((org.pk, "2026-W47"), {"now": NOW}).get()
    assert (again["claimed"], again["send_id"], again["status"]) == (False, first["send_id"], "partial")
    assert smtp.inbox.count("cto@client.example") == 1 and smtp.inbox.count() == 1


def test_a_week_not_over_yet_is_never_claimed():
    org = Organization.objects.create(name="tasks-early")
    result = send_weekly_report.apply((org.pk, "2026-W48"), {"now": NOW})
    assert isinstance(result.result, WeekError) and "is not over yet" in str(result.result)
    assert not WeeklySend.objects.filter(organization=org).exists()
