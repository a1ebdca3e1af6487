"""Celery tasks: the periodic evaluation fans out one task per enabled server (each with an expiry, so
a backlog never evaluates a server twice and one slow server never delays the others)."""

import logging

from celery import shared_task
from django.conf import settings

from advisor.services import server_advise
from inventory.models import Server

log = logging.getLogger(__name__)


# Processes (compose's tasks worker) honour these; the soft limit raises in the task, the hard one kills it.
@shared_task(
    acks_late=True, soft_time_limit=settings.ADVISOR_TIME_LIMIT_S, time_limit=settings.ADVISOR_TIME_LIMIT_S + 30
)
def advise_server(server_id: int) -> dict:
    try:
        out = server_advise(server_id=server_id)
    except Server.DoesNotExist:
        return {"server_id": server_id, "error": "deleted"}
    return {
        "server_id": server_id,
        "opened": len(out.opened),
        "reopened": len(out.reopened),
        "cleared": len(out.cleared),
        "error": out.error,
    }


@shared_task
def advise_fleet() -> int:
    expires = settings.ADVISOR_INTERVAL_S
    ids = list(Server.objects.filter(enabled=True).values_list("pk", flat=True))
    for server_id in ids:
        advise_server.apply_async((server_id,), expires=expires)
    return len(ids)
