"""Reads of the weekly reports: an organization's schedule (the defaults where none was saved), who gets
its report, which organizations are due, the send history and the recipients that keep failing."""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model

from accounts.access import organization_readers
from inventory.models import Organization, Server
from readtier import history_coverage
from reports.models import ReportDelivery, ReportOptIn, ReportSchedule, Unsubscribed, WeeklySend
from reports.weeks import ReportWeek, WeekError, last_complete_week, parse_week, week_of

FAILING_AFTER = 3  # an address whose last this many deliveries failed "keeps failing"
HISTORY = 20  # sends listed in the console


def report_schedule(*, organization_id: int) -> ReportSchedule:
    """The saved schedule, or the default one (enabled, Monday 07:00 UTC), unsaved."""
    found = ReportSchedule.objects.filter(organization_id=organization_id).first()
    return found or ReportSchedule(organization_id=organization_id)


def report_week(*, organization_id: int, label: str | None = None, now: datetime) -> ReportWeek:
    """`label` (2026-W47) or the last complete week, in the organization's report time zone (WeekError: a
    label that is not a week)."""
    tz = report_schedule(organization_id=organization_id).time_zone
    last = last_complete_week(now, time_zone=tz)
    if not label:
        return last
    week = parse_week(label, time_zone=tz)
    if week.window.end > now:
        # Its figures would compare part of a week with a whole one, and its future hours count as gaps.
        raise WeekError(
            f"week {label} is not over yet: a report covers a whole week (the last complete one is {last.label})"
        )
    return week


def preview_week(*, organization_id: int, now: datetime) -> ReportWeek:
    """The week a preview shows by default: the last complete one, or, where every server's history begins
    after it (a new installation, before its first whole week), the week in progress so far."""
    last = report_week(organization_id=organization_id, now=now)
    servers = Server.objects.filter(organization_id=organization_id).values_list("pk", flat=True)
    starts = [b for b in (history_coverage(pk).data_from for pk in servers) if b is not None]
    if starts and min(starts) >= last.window.end:
        return week_of(now, time_zone=last.time_zone).so_far(now)
    return last


def report_recipients(*, organization_id: int) -> list[str]:
    """The members who opted in (still members, active, with an address) and the extra addresses, lower-cased,
    without the addresses that unsubscribed."""
    schedule = report_schedule(organization_id=organization_id)
    users = (
        get_user_model()
        .objects.filter(report_opt_ins__organization_id=organization_id, is_active=True)
        .filter(pk__in=organization_readers(organization_id).values("pk"))
        .exclude(email="")
    )
    addresses = [u.email for u in users.distinct()] + list(schedule.extra_recipients or [])
    gone = set(Unsubscribed.objects.filter(organization_id=organization_id).values_list("address", flat=True))
    out: list[str] = []
    for a in (a.strip().lower() for a in addresses):
        if a and a not in gone and a not in out:
            out.append(a)
    return out


def unsubscribed(*, organization_id: int) -> list[Unsubscribed]:
    """The addresses that used their unsubscribe link, by address."""
    return list(Unsubscribed.objects.filter(organization_id=organization_id).order_by("address"))


def is_opted_in(*, organization_id: int, user) -> bool:
    if (
        not user.email
        or Unsubscribed.objects.filter(organization_id=organization_id, address=user.email.strip().lower()).exists()
    ):
        return False
    return ReportOptIn.objects.filter(organization_id=organization_id, user=user).exists()


def due_at(schedule: ReportSchedule, week: ReportWeek) -> datetime:
    """When the report of `week` is due: the schedule's weekday and hour of the following week, in its zone."""
    tz = zoneinfo.ZoneInfo(schedule.time_zone)
    day = week.first_day + timedelta(days=7 + schedule.weekday)
    return datetime(day.year, day.month, day.day, schedule.hour, tzinfo=tz)


def next_due(schedule: ReportSchedule, *, now: datetime) -> datetime:
    """When the next report goes out: the last complete week's, if its time has not come yet, else next week's."""
    week = last_complete_week(now, time_zone=schedule.time_zone)
    at = due_at(schedule, week)
    if at <= now:
        following = week_of(now, time_zone=schedule.time_zone)
        at = due_at(schedule, following)
    return at


@dataclass(frozen=True)
class Due:
    organization_id: int
    week: ReportWeek


def reports_due(*, now: datetime) -> list[Due]:
    """Organizations whose report of the last complete week is due by `now` and not claimed yet."""
    saved = {s.organization_id: s for s in ReportSchedule.objects.all()}
    candidates = []
    for organization_id in Organization.objects.order_by("pk").values_list("pk", flat=True):
        schedule = saved.get(organization_id) or ReportSchedule(organization_id=organization_id)
        if not schedule.enabled:
            continue
        week = last_complete_week(now, time_zone=schedule.time_zone)
        if now >= due_at(schedule, week):
            candidates.append(Due(organization_id, week))
    sends = WeeklySend.objects.filter(
        kind=WeeklySend.Kind.WEEKLY,
        week__in={c.week.label for c in candidates},
        organization_id__in=[c.organization_id for c in candidates],
    )
    claimed = set(sends.values_list("organization_id", "week"))
    return [c for c in candidates if (c.organization_id, c.week.label) not in claimed]


@dataclass(frozen=True)
class SendRow:
    send: WeeklySend
    requested_by: str | None
    sent: int
    failed: int
    pending: int
    deliveries: list[ReportDelivery]


def send_history(*, organization_id: int, limit: int = HISTORY) -> list[SendRow]:
    """The latest sends (weekly and tests), newest first, with their deliveries."""
    sends = (
        WeeklySend.objects.filter(organization_id=organization_id)
        .select_related("requested_by")
        .prefetch_related("deliveries")
        .order_by("-claimed_at", "-id")[:limit]
    )
    rows = []
    for s in sends:
        deliveries = sorted(s.deliveries.all(), key=lambda d: d.address)
        count = {status: sum(1 for d in deliveries if d.status == status) for status in ReportDelivery.Status.values}
        rows.append(
            SendRow(
                s,
                s.requested_by.get_username() if s.requested_by else None,
                count["sent"],
                count["failed"],
                count["pending"],
                deliveries,
            )
        )
    return rows


@dataclass(frozen=True)
class FailingRecipient:
    address: str
    failures: int  # consecutive, newest first
    last_error: str
    last_attempt: datetime | None


def failing_recipients(*, organization_id: int, after: int = FAILING_AFTER) -> list[FailingRecipient]:
    """Addresses whose last `after` deliveries (weekly or test) all failed."""
    recent = (
        ReportDelivery.objects.filter(send__organization_id=organization_id)
        .exclude(status=ReportDelivery.Status.PENDING)
        .select_related("send")
        .order_by("address", "-send__claimed_at", "-id")
    )
    streak: dict[str, list[ReportDelivery]] = {}
    done: set[str] = set()
    for d in recent.iterator():
        if d.address in done:
            continue
        if d.status == ReportDelivery.Status.FAILED:
            streak.setdefault(d.address, []).append(d)
        else:
            done.add(d.address)
    out = [
        FailingRecipient(a, len(ds), ds[0].last_error, ds[0].send.finished_at or ds[0].send.claimed_at)
        for a, ds in streak.items()
        if len(ds) >= after
    ]
    return sorted(out, key=lambda r: r.address)
