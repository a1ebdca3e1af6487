"""The history store's own Celery tasks, run by beat: the read tier's rollups, the partitions kept ahead and
dropped past retention, and stored texts redacted again after a new redaction."""

import logging
import time
from dataclasses import asdict

from celery import shared_task
from django.conf import settings

from history import backfill, partitions, prune, redact, rollups, store

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


@shared_task
def redact_texts_again(budget_s: float = 60.0) -> int:
    """Beat's: the stored texts an older redaction left (history.redact.VERSION), redacted again in batches
    for up to `budget_s`; the next run goes on. How many."""
    started, done = time.monotonic(), 0
    strict = settings.COLLECTOR["REDACT_STRICT"]
    while time.monotonic() - started < budget_s:
        batch = store.statements_redact_again(strict=strict)
        done += batch
        if not batch:
            break
    if done:
        log.info("redaction version %s: %d stored texts redacted again", redact.VERSION, done)
    return done
