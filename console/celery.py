"""The Celery application; the beat schedule lives in console/schedule.py."""

import os
import time

from celery import Celery, signals
from django.conf import settings
from django.db import close_old_connections, connection

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["collectors", "history", "advisor", "reports", "exports", "alerts"])


@app.on_after_finalize.connect
def _install_schedule(sender: Celery, **_: object) -> None:
    from console.schedule import beat_schedule

    sender.conf.beat_schedule = beat_schedule()


@signals.worker_init.connect
@signals.beat_init.connect
def _limit_history_statements(**_: object) -> None:
    """A worker's (and beat's) every session on the history store stops a statement after
    WORKER_STATEMENT_TIMEOUT_MS, so that one stuck on a lock or a slow plan never holds a thread for ever; set before
    the first task, in the worker's main process (a prefork pool's children inherit it, a thread pool shares it)."""
    from history.public import limit_statements  # the apps are loaded by now, not when this module is imported

    limit_statements(settings.WORKER_STATEMENT_TIMEOUT_MS)


@signals.task_prerun.connect
@signals.task_postrun.connect
def _fresh_connections(sender=None, **_: object) -> None:
    """Around every task, drop the database connections that are broken or past CONN_MAX_AGE, as Django does
    around a request, and keep the others (settings.CELERY_DB_REUSE_MAX stops Celery closing them all). Not
    for a task run eagerly nor inside a transaction (a test's): that connection is not the task's to close."""
    if getattr(getattr(sender, "request", None), "is_eager", False) or connection.in_atomic_block:
        return
    close_old_connections()


# A header every task carries from its publisher: when it was sent. /metrics reads it off the oldest message
# waiting in each queue (console/queues.py): how long the queue's head has waited.
SENT_AT_HEADER = "pgconsole_sent_at"


@signals.before_task_publish.connect
def _stamp_sent_at(headers=None, **_: object) -> None:
    if headers is not None:
        headers.setdefault(SENT_AT_HEADER, time.time())
