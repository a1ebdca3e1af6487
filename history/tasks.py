"""The history store's own Celery tasks, run by beat: the read tier's rollups, and the partitions kept ahead and
dropped past retention. Stored texts are redacted again after a new redaction by collectors.tasks (the redaction
is the collectors')."""

import logging
from dataclasses import asdict

from celery import shared_task

from history import backfill, partitions, prune, rollups

log = logging.getLogger(__name__)


@shared_task
def roll_up_history() -> dict:
    if backfill.pending():  # history from before the read tier: convert it first (once)
        log.warning("history backfill: %s", backfill.history_backfill())
    result = rollups.roll_up()
    if result.failed:
        log.warning("rollups: %d failed (retried next run): %s", len(result.failed), "; ".join(result.failed))
    return asdict(result)


@shared_task
def maintain_partitions() -> dict:
    """Partitions created ahead and dropped past retention, then the statements nothing refers to any more."""
    out = {"created": partitions.ensure_ahead(), "dropped": partitions.drop_expired()}
    return {**out, **prune.statements_prune()}
