"""Writes of the weekly reports: the schedule, opt-ins and unsubscriptions, and sending. A weekly send is
claimed by inserting its WeeklySend row (unique per organization and week) together with one ReportDelivery per
recipient, before anything is mailed, so re-running the task or restarting beat never sends twice. Each pass
over the pending deliveries holds an advisory lock on the send, so two workers never mail the same one."""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.core.mail import get_connection
from django.core.validators import validate_email
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from accounts.access import role_in
from inventory.models import Organization
from reports.mail import weekly_message
from reports.models import ReportDelivery, ReportOptIn, ReportSchedule, Unsubscribed, WeeklySend
from reports.selectors import report_recipients, report_schedule
from reports.unsubscribe import unsubscribe_url
from reports.weekly import WeeklyReport, weekly_report
from reports.weeks import ReportWeek, parse_week

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # per delivery; the task waits longer before each (reports/tasks.py)
MAX_EXTRA_RECIPIENTS = 50
LOCK_NAMESPACE = 0x7265  # advisory lock (namespace, send id) held while a send's deliveries are mailed


# -- settings, opt-ins, unsubscriptions -----------------------------------------------------------


def clean_addresses(addresses: list[str]) -> list[str]:
    """Lower-cased, without duplicates; ValidationError naming every address that is not one."""
    out, wrong = [], []
    for a in (a.strip().lower() for a in addresses):
        if not a:
            continue
        try:
            validate_email(a)
        except ValidationError:
            wrong.append(a)
            continue
        if a not in out:
            out.append(a)
    if wrong:
        raise ValidationError(f"not an email address: {', '.join(wrong)}")
    if len(out) > MAX_EXTRA_RECIPIENTS:
        raise ValidationError(f"at most {MAX_EXTRA_RECIPIENTS} extra recipients ({len(out)} given)")
    return out


def report_schedule_update(
    *, organization_id: int, enabled: bool, weekday: int, hour: int, time_zone: str, extra_recipients: list[str]
) -> ReportSchedule:
    schedule = report_schedule(organization_id=organization_id)
    schedule.enabled, schedule.weekday, schedule.hour, schedule.time_zone = enabled, weekday, hour, time_zone
    schedule.extra_recipients = clean_addresses(extra_recipients)
    schedule.full_clean()
    schedule.save()
    return schedule


def report_opt_in_set(*, organization_id: int, user, opted_in: bool) -> None:
    """A member asks for the weekly report (which undoes an earlier unsubscription of their address) or not."""
    if not opted_in:
        ReportOptIn.objects.filter(organization_id=organization_id, user=user).delete()
        return
    if not user.email:
        raise ValidationError("your account has no email address: set one first")
    if role_in(user, organization_id) is None:
        raise ValidationError("only members of the organization receive its report")
    with transaction.atomic():
        ReportOptIn.objects.get_or_create(organization_id=organization_id, user=user)
        Unsubscribed.objects.filter(organization_id=organization_id, address=user.email.strip().lower()).delete()


def report_unsubscribe(*, organization_id: int, address: str, now: datetime | None = None) -> bool:
    """The address no longer gets the organization's report (members who opted in with it are opted out);
    False where it had already unsubscribed. LookupError: the organization is gone."""
    address = address.strip().lower()
    if not Organization.objects.filter(pk=organization_id).exists():
        raise LookupError("no such organization")
    with transaction.atomic():
        _, created = Unsubscribed.objects.get_or_create(
            organization_id=organization_id, address=address, defaults={"at": now or timezone.now()}
        )
        ReportOptIn.objects.filter(organization_id=organization_id, user__email__iexact=address).delete()
    return created


# -- sending --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendResult:
    send_id: int | None
    claimed: bool  # this call claimed the week (False: it was claimed before)
    status: str
    sent: int
    failed: int
    pending: int  # to be tried again later
    busy: bool = False  # another worker was mailing this send
    errors: dict[str, str] = field(default_factory=dict)  # address -> the mail server's last answer

    def as_dict(self) -> dict:
        return asdict(self)


def _result(send: WeeklySend, *, claimed: bool, busy: bool = False) -> SendResult:
    counts = {s: 0 for s in ReportDelivery.Status.values}
    errors = {}
    for address, status, error in send.deliveries.values_list("address", "status", "last_error"):
        counts[status] += 1
        if error and status != ReportDelivery.Status.SENT:
            errors[address] = error
    return SendResult(send.pk, claimed, send.status, counts["sent"], counts["failed"], counts["pending"], busy, errors)


def report_send_weekly(*, organization_id: int, week: ReportWeek, now: datetime | None = None) -> SendResult:
    """The organization's report of `week`, once: claims the week, then mails every recipient (what fails for a
    while stays pending, for report_send_retry). Where the week was claimed before, resumes its pending
    deliveries if it is still sending (a worker that died half-way), else does nothing."""
    now = now or timezone.now()
    addresses = report_recipients(organization_id=organization_id)
    try:
        with transaction.atomic():
            send = WeeklySend.objects.create(
                organization_id=organization_id,
                kind=WeeklySend.Kind.WEEKLY,
                week=week.label,
                window_start=week.window.start,
                window_end=week.window.end,
                claimed_at=now,
                status=WeeklySend.Status.SENDING if addresses else WeeklySend.Status.EMPTY,
                finished_at=None if addresses else now,
            )
            ReportDelivery.objects.bulk_create([ReportDelivery(send=send, address=a) for a in addresses])
    except IntegrityError:
        send = WeeklySend.objects.get(organization_id=organization_id, kind=WeeklySend.Kind.WEEKLY, week=week.label)
        if send.status != WeeklySend.Status.SENDING:
            return _result(send, claimed=False)
        return _deliver(send, week=week, now=now, claimed=False)
    if not addresses:
        return _result(send, claimed=True)
    return _deliver(send, week=week, now=now, claimed=True)


def report_send_retry(*, send_id: int, now: datetime | None = None, final: bool = False) -> SendResult:
    """Another attempt at a send's pending deliveries (`final`: the last one; what fails then has failed)."""
    send = WeeklySend.objects.get(pk=send_id)
    if send.status != WeeklySend.Status.SENDING:
        return _result(send, claimed=False)
    week = parse_week(send.week, time_zone=report_schedule(organization_id=send.organization_id).time_zone)
    return _deliver(send, week=week, now=now or timezone.now(), claimed=False, final=final)


def report_send_test(
    *, organization_id: int, week: ReportWeek, address: str, requested_by=None, now: datetime | None = None
) -> SendResult:
    """The report of `week` to one address at once ("send me a test now", `reports send --to`): recorded as a
    test send, one attempt, and the week stays unclaimed."""
    now = now or timezone.now()
    address = clean_addresses([address])[0] if address.strip() else ""
    if not address:
        raise ValidationError("no address to send the test to")
    with transaction.atomic():
        send = WeeklySend.objects.create(
            organization_id=organization_id,
            kind=WeeklySend.Kind.TEST,
            week=week.label,
            window_start=week.window.start,
            window_end=week.window.end,
            claimed_at=now,
            requested_by=requested_by,
        )
        ReportDelivery.objects.create(send=send, address=address)
    return _deliver(send, week=week, now=now, claimed=True, final=True)


@contextmanager
def _send_lock(send_id: int) -> Iterator[bool]:
    """Whether this session holds the send's lock (a session lock: it goes with a worker that dies)."""
    key = [LOCK_NAMESPACE, send_id & 0x7FFFFFFF]
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", key)
        held = cur.fetchone()[0]
    try:
        yield held
    finally:
        if held:
            try:
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s, %s)", key)
            except DatabaseError:
                pass  # the session is gone, and its lock with it


def _deliver(send: WeeklySend, *, week: ReportWeek, now: datetime, claimed: bool, final: bool = False) -> SendResult:
    with _send_lock(send.pk) as held:
        if not held:
            return _result(send, claimed=claimed, busy=True)
        # Read under the lock: another worker may have mailed some since.
        pending = list(send.deliveries.filter(status=ReportDelivery.Status.PENDING).order_by("address"))
        if send.kind == WeeklySend.Kind.WEEKLY:
            # Unsubscribed between the claim and this attempt: not sent, and not a failure either.
            unsubscribed = Unsubscribed.objects.filter(
                organization_id=send.organization_id, address__in=[d.address for d in pending]
            )
            gone = set(unsubscribed.values_list("address", flat=True))
            ReportDelivery.objects.filter(pk__in=[d.pk for d in pending if d.address in gone]).delete()
            pending = [d for d in pending if d.address not in gone]
        if pending:
            report = weekly_report(organization_id=send.organization_id, week=week, now=now)
            _mail(send, report, pending, final=final)
        _finish(send, now=now)
    return _result(send, claimed=claimed)


@dataclass(frozen=True)
class _Failure:
    text: str  # the mail server's answer, or what went wrong reaching it
    server_wide: bool  # the mail server failed (down, refusing us), not this recipient
    permanent: bool  # a 5xx answer about the recipient: trying again will not help


def _failure(exc: Exception) -> _Failure:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        answers = list(exc.recipients.values())
        text = "; ".join(f"{code} {_decoded(message)}" for code, message in answers)
        return _Failure(text, False, all(500 <= code < 600 for code, _ in answers))
    if isinstance(exc, smtplib.SMTPDataError):  # the message refused after its recipient was accepted
        return _Failure(f"{exc.smtp_code} {_decoded(exc.smtp_error)}", False, 500 <= exc.smtp_code < 600)
    if isinstance(exc, smtplib.SMTPResponseException):
        return _Failure(f"{exc.smtp_code} {_decoded(exc.smtp_error)}", True, False)
    return _Failure(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, True, False)


def _decoded(message: bytes | str) -> str:
    return message.decode(errors="replace") if isinstance(message, bytes) else message


def _send_one(backend, message) -> _Failure | None:
    try:
        if backend.connection is None:
            backend.open()
        backend.send_messages([message])
    except (smtplib.SMTPException, OSError) as exc:
        failure = _failure(exc)
        if failure.server_wide:
            _close(backend)  # reopened for the next attempt
        return failure
    return None


def _mail(send: WeeklySend, report: WeeklyReport, pending: list[ReportDelivery], *, final: bool) -> None:
    """One attempt per pending delivery, over one connection. Where the mail server itself fails, the rest of
    the pass fails with it rather than wait on it once per recipient."""
    backend = get_connection(fail_silently=False)
    down: _Failure | None = None
    try:
        for d in pending:
            d.attempts += 1
            link = unsubscribe_url(organization_id=send.organization_id, address=d.address)
            test = send.kind == WeeklySend.Kind.TEST
            failure = down or _send_one(backend, weekly_message(report, to=d.address, unsubscribe_url=link, test=test))
            if failure is None:
                d.status, d.sent_at, d.last_error = ReportDelivery.Status.SENT, timezone.now(), ""
            else:
                down = failure if failure.server_wide else None
                done = failure.permanent or final or d.attempts >= MAX_ATTEMPTS
                d.status = ReportDelivery.Status.FAILED if done else ReportDelivery.Status.PENDING
                d.last_error = failure.text[:2000]
                log.warning(
                    "weekly report %s to %s: attempt %d failed: %s", send.pk, d.address, d.attempts, d.last_error
                )
            d.save(update_fields=["attempts", "status", "last_error", "sent_at"])
    finally:
        _close(backend)


def _close(backend) -> None:
    try:
        backend.close()
    except (smtplib.SMTPException, OSError):
        pass  # already broken: nothing to close cleanly


def _finish(send: WeeklySend, *, now: datetime) -> None:
    statuses = list(send.deliveries.values_list("status", flat=True))
    if ReportDelivery.Status.PENDING in statuses:
        return  # still sending: the task tries again later
    failed = statuses.count(ReportDelivery.Status.FAILED)
    if not statuses:
        send.status = WeeklySend.Status.EMPTY
    elif not failed:
        send.status = WeeklySend.Status.SENT
    else:
        send.status = WeeklySend.Status.FAILED if failed == len(statuses) else WeeklySend.Status.PARTIAL
    send.error = f"{failed} of {len(statuses)} recipients failed" if failed else ""
    send.finished_at = now
    send.save(update_fields=["status", "error", "finished_at"])
