"""Celery tasks of the alerts: thin wrappers that take primary keys and call services."""

from celery import shared_task

from alerts.lifecycle import evaluate_all
from alerts.models import Delivery
from alerts.services import deliveries_lost, delivery_attempt, retry_delay_s


@shared_task(bind=True, acks_late=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """One attempt of a delivery; another later while it is worth one (a 5xx, a timeout), waiting longer each
    time (ALERTS_RETRY_BASE_S, doubled per attempt). A hanging receiver holds a thread ALERTS_TIMEOUT_S at most."""
    outcome = delivery_attempt(delivery_id=delivery_id)
    if outcome == "retry":
        attempts = Delivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=retry_delay_s(attempts))
    return outcome


@shared_task
def resend_lost_deliveries() -> list[int]:
    """Beat's, every ALERTS_TIDY_S: deliveries whose message was lost, sent to a worker again."""
    lost = deliveries_lost()
    for delivery_id in lost:
        deliver.delay(delivery_id)
    return lost


@shared_task
def evaluate_alerts() -> dict[str, int]:
    """Beat's, every ALERTS_EVALUATE_S: every organization's rules; what opens, resolves or reminds goes to the
    workers (deliver). A run that overlaps the next (a slow history) sends nothing twice: each notification
    is claimed (alerts/lifecycle.py)."""
    return evaluate_all(enqueue=deliver.delay)
