"""Celery tasks: thin wrappers that take primary keys and call services."""

import functools
import logging
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ObjectDoesNotExist

from collectors import redact
from collectors.errors import HistoryUnavailable
from collectors.plans.auto import plan_fresh, plan_top_statements
from collectors.plans.service import OVER_SHARE, statement_plan_in_share
from collectors.queued_checks import QUEUE_WAIT_S, check_run
from collectors.scheduling import servers_dispatch_due
from collectors.services import server_collect
from history.public import statements_redact_again
from inventory.models import Server

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 120
DISPATCHED_AT_KEY = "pgconsole:dispatched_at"  # the collection dispatcher's last run (Unix time), for /metrics
PUT_OFF_S = (1.0, 3.0)  # a collection over its organization's share runs again this many seconds later
# A plan job over its organization's share runs again 1 s later, then twice as long each time it is put off again,
# up to 15 s: a tick's many rounds of one organization wait their turn without churning the plans queue.
PLAN_PUT_OFF_S = (1.0, 15.0)


TRACK_TTL_S = 3600  # how long a tracked collection's status stays readable


def _tracked_key(task_id: str) -> str:
    return f"collect-task:{task_id}"


def track(task_id: str | None, server_id: int, status: str, result: dict | None = None) -> None:
    if task_id:
        cache.set(_tracked_key(task_id), {"server_id": server_id, "status": status, "result": result}, TRACK_TTL_S)


def tracked(task_id: str) -> dict | None:
    """A tracked collection's server_id, status and result (None when unknown or more than an hour old)."""
    return cache.get(_tracked_key(task_id))


def collect_tracked(server_id: int, *, expires_s: float) -> str:
    """A collection asked for now (the API's collect), its status kept for whoever polls `tracked`: the task id."""
    task_id = str(uuid.uuid4())
    track(task_id, server_id, "queued")
    collect_server.apply_async((server_id,), {"tracked": True}, task_id=task_id, expires=expires_s)
    return task_id


@shared_task(bind=True, max_retries=6, acks_late=True)
def collect_server(self, server_id: int, tracked: bool = False) -> dict:
    """One collection; `tracked`: its status is kept in the cache for whoever asked (the API's collect now)."""
    task_id = self.request.id if tracked else None
    track(task_id, server_id, "running")
    try:
        result = server_collect(server_id=server_id)
    except HistoryUnavailable as exc:
        countdown = min(2**self.request.retries, MAX_BACKOFF_S)
        log.warning("history store unavailable, retrying collection of server %s in %ss", server_id, countdown)
        raise self.retry(exc=exc, countdown=countdown) from exc
    except Exception as exc:
        track(task_id, server_id, "failed", {"ok": False, "kind": "error", "error_code": type(exc).__name__})
        raise
    if result.kind == "over_share" and _put_off(self, server_id, tracked):
        track(task_id, server_id, "queued")
        return {"ok": False, "kind": "over_share", "error_code": "over_share", "put_off": True}
    log.info(result.summary())
    out = {"ok": result.ok, "kind": result.kind, "error_code": result.error_code}
    track(task_id, server_id, "succeeded" if result.ok else "failed", out)
    return out


def _put_off(task, server_id: int, tracked: bool) -> bool:
    """A collection over its organization's share (collectors.shares), sent again to run in a second or two while
    that is before its message expires (the server's next collection is due then): True. Else it is skipped, and
    the log says why (the server's history shows the interval missed)."""
    return _sent_again(
        collect_server,
        task,
        ((server_id,), {"tracked": tracked}),
        random.uniform(*PUT_OFF_S),
        f"collection of server {server_id} skipped: its organization's share of the collection workers stayed in "
        "use until its next collection was due (ORG_MAX_COLLECTING)",
    )


def _sent_again(sender, task, call: tuple[tuple, dict], countdown: float, skipped: str) -> bool:
    """The task's job sent again (`call`: its arguments) to run in `countdown` seconds, as the same task id, if that is
    before its message expires: True. Else nothing is sent, and the log says `skipped`."""
    expires = _expires_at(task)
    if expires is not None and expires <= datetime.now(UTC) + timedelta(seconds=countdown):
        log.warning(skipped)
        return False
    sender.apply_async(*call, task_id=task.request.id, expires=expires, countdown=countdown)
    return True


def _expires_at(task) -> datetime | None:
    """When the task's message expires (Celery hands it over as a string or a datetime, naive meaning UTC)."""
    expires = task.request.expires
    if isinstance(expires, str):
        expires = datetime.fromisoformat(expires)
    if expires is not None and expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return expires


def _plan_put_off(task, args: tuple, kwargs: dict, what: str) -> bool:
    """A plan job over its organization's share of the plans worker (collectors.plans.service.plans_slot), sent again
    (PLAN_PUT_OFF_S, each wait spread by half either way so that one tick's rounds do not all come back at once)
    while that is before its message expires: True. Else it is skipped, and the log says why."""
    first, most = PLAN_PUT_OFF_S
    put_off = kwargs.get("put_off", 0)
    return _sent_again(
        task,
        task,
        (args, {**kwargs, "put_off": put_off + 1}),
        min(first * 2**put_off, most) * random.uniform(0.5, 1.5),
        f"{what} skipped: its organization's share of the plans worker stayed in use until it expired "
        "(ORG_MAX_PLANNING)",
    )


@shared_task(acks_late=True)
def check_connection(check_id: str) -> str | None:
    """A "test connection" asked for by a page or the API (collectors.queued_checks): its state is polled there."""
    return check_run(check_id)


def check_enqueue(check_id: str) -> None:
    """What collectors.queued_checks.check_queue is handed to send a check to a worker (its message expires with it)."""
    check_connection.apply_async((check_id,), task_id=check_id, expires=QUEUE_WAIT_S)


def _enqueue(server_id: int, expires_s: float, countdown_s: float) -> None:
    collect_server.apply_async((server_id,), expires=expires_s, countdown=countdown_s or None)


@shared_task
def dispatch_due_collections() -> int:
    """Beat's, every DISPATCH_TICK_S: the servers due before the next tick, each sent to run at its due time. Its
    last run is kept (DISPATCHED_AT_KEY, in the cache): /metrics says when beat last had it run."""
    sent = len(servers_dispatch_due(enqueue=_enqueue, horizon_s=settings.DISPATCH_TICK_S))
    cache.set(DISPATCHED_AT_KEY, time.time(), None)
    return sent


def last_dispatched_at() -> float | None:
    """When the collection dispatcher last ran (Unix time; None: never since the cache was emptied)."""
    return cache.get(DISPATCHED_AT_KEY)


@shared_task
def plan_fleet() -> int:
    """Beat's, every PLANS_TICK_S: one plan round per enabled server, on the `plans` queue (never the collections'),
    each expiring before the next tick sends another. How many sent."""
    if not settings.PLANS["ENABLED"]:
        return 0
    tick = settings.PLANS["TICK_S"]
    server_ids = list(Server.objects.filter(enabled=True).values_list("pk", flat=True))
    for server_id in server_ids:
        plan_server.apply_async((server_id,), expires=tick * 0.9)
    return len(server_ids)


@shared_task(bind=True, acks_late=True)
def plan_server(self, server_id: int, put_off: int = 0) -> dict:
    """A server's due top statements planned, within its budget (collectors/plans/auto.py); put off while its
    organization's share of the plans worker is in use (`put_off`: how many times it was)."""
    done = plan_top_statements(server_id)
    if done.over_share:
        again = _plan_put_off(self, (server_id,), {"put_off": put_off}, f"plan round of server {server_id}")
        return {"code": OVER_SHARE, "put_off": again}
    codes = [o.code for o in done.outcomes.values()]
    log.info(
        "plans of server %s: %d top statements, %d planned now (%s)%s",
        server_id,
        done.candidates,
        len(codes),
        ", ".join(sorted(set(codes))) or "none due",
        "; stopped by the server's plan budget" if done.stopped_by_budget else "",
    )
    return {"candidates": done.candidates, "codes": codes}


FRESH_S = 600  # a statement EXPLAINed this recently is not asked again on the regression alert's account


@shared_task(bind=True, acks_late=True)
def plan_statement(
    self, server_id: int, statement_id: int, fresh_s: float = 0, tracked: bool = False, put_off: int = 0
) -> dict:
    """One statement's plan now, within its server's budget; not when it was EXPLAINed less than `fresh_s` ago
    (a refusal of the budget does not count), nor when its server or statement is gone. `tracked`: its status is
    kept for whoever asked (the API's fresh EXPLAIN), as a tracked collection's. Put off while its organization's
    share of the plans worker is in use (`put_off`: how many times it was), and whoever asked is told so."""
    task_id = self.request.id if tracked else None
    if fresh_s and plan_fresh(server_id, statement_id, fresh_s):
        return {"code": "fresh"}
    track(task_id, server_id, "running")
    try:
        outcome = statement_plan_in_share(server_id=server_id, statement_id=statement_id)
    except ObjectDoesNotExist:
        track(task_id, server_id, "failed", {"ok": False, "kind": "plan", "error_code": "gone"})
        return {"code": "gone"}
    if outcome.code == OVER_SHARE:
        return _plan_over_share(self, server_id, statement_id, fresh_s, tracked, put_off, outcome.reason)
    log.info("plan of statement %s of server %s: %s %s", statement_id, server_id, outcome.code, outcome.reason)
    result = {
        "ok": outcome.planned,
        "kind": "plan",
        "error_code": None if outcome.planned else outcome.code,
        "reason": outcome.reason,
        "fingerprint": outcome.fingerprint or None,
    }
    track(task_id, server_id, "succeeded" if outcome.planned else "failed", result)
    return {"code": outcome.code, "shape_id": outcome.shape_id}


def _plan_over_share(task, server_id, statement_id, fresh_s, tracked, put_off, reason: str) -> dict:
    """An EXPLAIN over its organization's share: put off, its status "queued" with why; or, once it would be past
    its message's expiry, skipped, its status "failed" with why."""
    task_id = task.request.id if tracked else None
    waiting = {"ok": False, "kind": "plan", "error_code": OVER_SHARE}
    what = f"EXPLAIN of statement {statement_id} of server {server_id}"
    if _plan_put_off(task, (server_id, statement_id, fresh_s), {"tracked": tracked, "put_off": put_off}, what):
        track(task_id, server_id, "queued", {**waiting, "put_off": True, "reason": reason})
        return {"code": OVER_SHARE, "put_off": True}
    expired = "its organization's share of the plans worker (ORG_MAX_PLANNING) stayed in use until the request expired"
    track(task_id, server_id, "failed", {**waiting, "put_off": False, "reason": f"{expired}: ask again later"})
    return {"code": OVER_SHARE, "put_off": False}


def plan_tracked(server_id: int, statement_id: int) -> str:
    """A statement's plan asked for now (the API's fresh EXPLAIN), its status kept for whoever polls `tracked`."""
    task_id = str(uuid.uuid4())
    track(task_id, server_id, "queued")
    plan_statement.apply_async((server_id, statement_id), {"tracked": True}, task_id=task_id, expires=FRESH_S)
    return task_id


def plan_soon(server_id: int, statement_id: int) -> None:
    """A statement's plan asked for by the regression rule: read by the plans worker unless it is fresh."""
    plan_statement.apply_async((server_id, statement_id, FRESH_S), expires=FRESH_S)


@shared_task
def redact_texts_again(budget_s: float = 60.0) -> int:
    """Beat's: the stored texts an older redaction left (redact.VERSION), redacted again in batches for up to
    `budget_s`; the next run goes on. How many."""
    started, done = time.monotonic(), 0
    again = functools.partial(redact.redact, strict=settings.COLLECTOR["REDACT_STRICT"])
    while time.monotonic() - started < budget_s:
        batch = statements_redact_again(version=redact.VERSION, redact=again)
        done += batch
        if not batch:
            break
    if done:
        log.info("redaction version %s: %d stored texts redacted again", redact.VERSION, done)
    return done
