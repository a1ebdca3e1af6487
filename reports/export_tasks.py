"""The audit export's Celery task: it takes the export's primary key and calls the service. Registered by
reports.apps.ReportsConfig.ready() (Celery's autodiscovery looks at each app's tasks.py only)."""

from celery import shared_task

from reports.export_services import STALE_RUNNING_AFTER, audit_export_build

# Past the soft limit the build fails cleanly (its row says so); the hard limit stops a stuck one, well before
# a "running" export counts as abandoned.
TIME_LIMIT_S = int(STALE_RUNNING_AFTER.total_seconds()) - 5 * 60
SOFT_TIME_LIMIT_S = TIME_LIMIT_S - 60


@shared_task(name="reports.audit_export_build", soft_time_limit=SOFT_TIME_LIMIT_S, time_limit=TIME_LIMIT_S)
def audit_export_build_task(export_id: int) -> None:
    audit_export_build(export_id=export_id)
