"""The audit exports' Celery tasks: the build (it takes the export's primary key and calls the service) and
beat's tidy. Registered by reports.apps.ReportsConfig.ready() (Celery's autodiscovery looks at each app's
tasks.py only).

Their names were reports.* until 2026-11-28: a build queued under the old name before an upgrade is refused by
the new worker (an unregistered task), and the tidy sends that export again once RESEND_QUEUED_AFTER has passed."""

import logging

from celery import shared_task
from django.conf import settings

from exports.services import HARD_LIMIT_AFTER_S, RESEND_QUEUED_AFTER, audit_export_build, audit_exports_tidy

logger = logging.getLogger(__name__)

# Past the soft limit the build fails cleanly (its row says so); the hard limit kills one stuck where the soft
# limit cannot reach it, well before a "running" export counts as abandoned (STALE_RUNNING_AFTER).
SOFT_TIME_LIMIT_S = settings.EXPORT_TIME_LIMIT_S
TIME_LIMIT_S = SOFT_TIME_LIMIT_S + HARD_LIMIT_AFTER_S


@shared_task(name="exports.audit_export_build", soft_time_limit=SOFT_TIME_LIMIT_S, time_limit=TIME_LIMIT_S)
def audit_export_build_task(export_id: int) -> None:
    audit_export_build(export_id=export_id)


@shared_task(name="exports.tidy_audit_exports")
def tidy_audit_exports() -> dict:
    """Beat's: expire old bundles, give up on exports never built, and send again those whose broker message
    was lost (the build's claim makes a second delivery harmless)."""
    outcome = audit_exports_tidy()
    for export_id in outcome.resend:
        logger.warning("audit export %s not built yet: sent to a worker again", export_id)
        audit_export_build_task.apply_async((export_id,), expires=RESEND_QUEUED_AFTER.total_seconds())
    for path in outcome.swept:
        logger.warning("audit exports: %s was left by a build that died or was superseded: deleted", path)
    return {"expired": outcome.expired, "resent": outcome.resend, "given_up": outcome.given_up, "swept": outcome.swept}
