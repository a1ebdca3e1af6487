"""Celery tasks of the alerts: thin wrappers that take primary keys and call services."""

from celery import shared_task
from django.conf import settings

from alerts.models import Delivery
from alerts.services import delivery_attempt

MAX_BACKOFF_S = 3600


@shared_task(bind=True, acks_late=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """One attempt of a delivery; another later while it is worth one (a 5xx, a timeout), waiting longer each
    time (ALERTS_RETRY_BASE_S, doubled per attempt). A hanging receiver holds a thread ALERTS_TIMEOUT_S at most."""
    outcome = delivery_attempt(delivery_id=delivery_id)
    if outcome == "retry":
        attempts = Delivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=min(settings.ALERTS_RETRY_BASE_S * 2 ** max(attempts - 1, 0), MAX_BACKOFF_S))
    return outcome
