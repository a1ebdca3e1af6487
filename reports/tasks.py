"""Celery tasks of the weekly reports: beat runs send_due_reports every few minutes (safe to run any number of
times: a week is claimed once), which queues one send_weekly_report per organization that is due. What the
mail server refuses for a while is tried again with growing waits (1, 2, 4, 8 minutes...)."""

from __future__ import annotations

import logging
from datetime import datetime

from celery import shared_task
from django.utils import timezone

from reports.selectors import report_week, reports_due
from reports.services import MAX_ATTEMPTS, report_send_retry, report_send_weekly

log = logging.getLogger(__name__)

RETRY_BASE_S = 60
# A queued send older than this is dropped: the next beat tick queues it again if it is still due.
SEND_EXPIRES_S = 6 * 3600


def retry_delay_s(retries: int) -> int:
    return RETRY_BASE_S * 2**retries


@shared_task
def send_due_reports(now: str | None = None) -> int:
    """Queue the report of every organization that is due and not claimed yet (`now`: ISO time, for tests)."""
    at = datetime.fromisoformat(now) if now else timezone.now()
    due = reports_due(now=at)
    for d in due:
        send_weekly_report.apply_async((d.organization_id, d.week.label), {"now": now}, expires=SEND_EXPIRES_S)
    return len(due)


@shared_task(bind=True, max_retries=MAX_ATTEMPTS, acks_late=True)
def send_weekly_report(
    self, organization_id: int, week: str, now: str | None = None, send_id: int | None = None
) -> dict:
    """Claim and send the organization's report of `week`; then, while deliveries are pending, try them again."""
    at = datetime.fromisoformat(now) if now else timezone.now()
    last = self.request.retries >= self.max_retries
    try:
        if send_id is None:
            report = report_week(organization_id=organization_id, label=week, now=at)
            result = report_send_weekly(organization_id=organization_id, week=report, now=at)
        else:
            result = report_send_retry(send_id=send_id, now=None if now is None else at, final=last)
    except Exception as exc:  # the history store or a render failed: the whole pass again, later
        if last:
            raise
        log.warning("weekly report of organization %s, %s: %s; trying again", organization_id, week, exc)
        raise self.retry(exc=exc, countdown=retry_delay_s(self.request.retries)) from exc
    if result.pending and not last:
        kwargs = {"organization_id": organization_id, "week": week, "now": now, "send_id": result.send_id}
        raise self.retry(kwargs=kwargs, countdown=retry_delay_s(self.request.retries))
    return result.as_dict()
