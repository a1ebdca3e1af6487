"""Celery tasks of the alerts: thin wrappers that take primary keys and call services."""

from dataclasses import asdict

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from alerts.lifecycle import evaluate_organization, evaluation_groups
from alerts.models import Delivery
from alerts.services import deliveries_fail_exhausted, deliveries_lost, delivery_attempt, retry_delay_s
from inventory.models import Organization


@shared_task(bind=True, acks_late=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """One attempt of a delivery; another later while it is worth one (a 5xx, a timeout), waiting longer each
    time (ALERTS_RETRY_BASE_S, doubled per attempt). A hanging or trickling receiver, or a name that resolves
    slowly, holds a thread ALERTS_TIMEOUT_S at most, one thread per channel and ALERTS_ORG_MAX_SENDING per
    organization at a time: a delivery whose channel is busy waits a second or two, one over its organization's
    share a few seconds, longer each time it waited (the message's retries)."""
    outcome = delivery_attempt(delivery_id=delivery_id, waited=self.request.retries or 0)
    if outcome == "retry":
        attempts = Delivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=retry_delay_s(attempts))
    if outcome in ("busy", "deferred"):
        due = Delivery.objects.values_list("next_attempt_at", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=max((due - timezone.now()).total_seconds(), 0.1))
    return outcome


@shared_task
def resend_lost_deliveries() -> list[int]:
    """Beat's, every ALERTS_TIDY_S: deliveries whose message was lost, sent to a worker again (those lost on their
    last attempt failed instead)."""
    deliveries_fail_exhausted()
    lost = deliveries_lost()
    for delivery_id in lost:
        deliver.delay(delivery_id)
    return lost


@shared_task
def evaluate_alerts() -> int:
    """Beat's, every ALERTS_EVALUATE_S: every organization's rules, as one task per group of servers
    (ALERTS_SERVERS_PER_TASK of one organization, alerts/lifecycle.evaluation_groups) for the workers to share; a
    group still queued when the next evaluation is due is dropped (it expires), not run late. On a queue of their
    own (`alert-rules`, settings.CELERY_TASK_ROUTES) apart from the deliveries, so that no receiver, however slow,
    keeps a group waiting until it expires. The groups sent."""
    groups = evaluation_groups(size=settings.ALERTS_SERVERS_PER_TASK)
    for organization_id, server_ids in groups:
        evaluate_alert_group.apply_async((organization_id, server_ids), expires=settings.ALERTS_EVALUATE_S * 0.9)
    return len(groups)


@shared_task
def evaluate_alert_group(organization_id: int, server_ids: list[int] | None) -> dict[str, int]:
    """One group's rules; what opens, resolves or reminds goes to the workers (deliver). A run that overlaps the
    next (a slow history) sends nothing twice: each notification is claimed (alerts/lifecycle.py)."""
    organization = Organization.objects.filter(pk=organization_id).first()
    if organization is None:  # deleted meanwhile
        return {}
    return asdict(evaluate_organization(organization=organization, enqueue=deliver.delay, server_ids=server_ids))
