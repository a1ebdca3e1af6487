"""/metrics: the fleet's figures for Prometheus, in the OpenMetrics text format (or Prometheus' text format 0.0.4,
as the scraper's Accept header asks), written by prometheus_client from the selectors the pages read (the families:
console/views/metrics_families.py).

A token is needed (`Authorization: Bearer pgc_…`): a metrics token sees its one organization's servers; a
personal API token the servers of its user's organizations, an operator's (who sees every organization) every
server and the console's own health besides: the tasks waiting in each queue and the oldest one's age, the
collections overdue, when beat last had them dispatched, the alert deliveries failing by channel kind, the
history store's size.

Per server, as counters: calls, execution and planning seconds and deallocations counted since its first snapshot
(readtier.running_totals, kept by every collection), for PromQL's rate(). Per server, over the last
METRICS["WINDOW_S"] seconds (the fleet page's selector, fleet_summary, over that
window): up, the age of its last snapshot and how long its last collection took, calls, execution and planning
time and deallocations per second, its entries against pg_stat_statements.max, average active sessions by wait
event type, its open alerts and recommendations by severity. A figure the server does not give is an absent
series, never 0: planning time where track_planning is off, deallocations before PostgreSQL 14, rates before any
snapshot in the window. Per statement only on request (`?statements=N`, N at most METRICS["STATEMENTS_TOP_N"]):
each server's top N by total time, for at most METRICS["STATEMENTS_MAX_SERVERS"] servers, the others counted as
left out.

What it costs is bounded per token. The figures are read at most once per METRICS["CACHE_S"] seconds for each scope
(the token's user and organization) and kind (with or without statements), whatever the encoding or the N asked, by
one web process at a time: a scrape that comes while another reads them gets the previous figures, or waits up to
METRICS["COMPUTE_WAIT_S"] for these (console.single_flight). Each token's scrapes of each kind are rated
(METRICS["RATE"]); past the rate, a 429 with Retry-After, which Prometheus records as a failed scrape (`up` 0):
enough for an HA pair scraping every 5 s, so a 429 is a runaway scraper's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from accounts.access import sees_every_organization, visible_servers
from accounts.tokens import token_check, token_used
from advisor.selectors import recommendation_counts
from alerts.selectors import failing_deliveries, open_alert_counts
from collectors.public import last_dispatched_at
from console.queues import queue_depths
from console.single_flight import NotInTime, computed_once
from console.throttling import scrape_wait_s
from console.views.metrics_families import FleetCollector, StatementFamilies
from readtier import (
    FleetRow,
    Page,
    StatementFilters,
    Window,
    collections_behind,
    fleet_summary,
    fleet_waits,
    history_store_bytes,
    running_totals,
    top_statements,
)

logger = logging.getLogger(__name__)


def _top_statements(rows: list[FleetRow], n: int, window: Window) -> tuple[dict[int, list], int]:
    """Each server's top `n` statements by total time (those with snapshots in the window), at most
    STATEMENTS_MAX_SERVERS servers; and how many servers were left out."""
    with_data = [row for row in rows if row.span_s]
    kept = with_data[: settings.METRICS["STATEMENTS_MAX_SERVERS"]]
    top = {
        row.server_id: top_statements(
            server_id=row.server_id, window=window, filters=StatementFilters(hide_own=True), page=Page(1, n)
        ).rows
        for row in kept
    }
    return top, len(with_data) - len(kept)


def _unauthorized(reason: str) -> HttpResponse:
    response = HttpResponse(reason + "\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _queues(now) -> list | None:
    """The queues' depths; None when the broker does not answer (said by pgconsole_broker_up, never a 500)."""
    try:
        return queue_depths(now=now.timestamp())
    except redis.RedisError as exc:
        logger.warning("metrics: the broker did not answer: %s", exc)
        return None


def _health(now) -> dict:
    return {
        "history_bytes": history_store_bytes(),
        "queues": _queues(now),
        "behind": collections_behind(now=now),
        "dispatched_at": last_dispatched_at(),
        "failing": failing_deliveries(since=now - timedelta(days=1)),
    }


@dataclass(frozen=True)
class Figures:
    """What one answer is written from, read once per scope and kind and kept in the cache (plain data): the
    fleet's rows and what goes with them; with `top`, each server's top STATEMENTS_TOP_N statements (an answer
    asking fewer shows the first of them)."""

    rows: list[FleetRow]
    recommendations: dict
    alerts: dict
    waits: dict
    now: datetime
    health: dict | None
    totals: dict
    top: dict[int, list] | None = None
    left_out: int = 0


def figures(user, *, now=None, statements: bool = False, organization_id: int | None = None) -> Figures:
    """The figures of what `user` may see (with each server's top statements when asked); of one organization's
    servers only for a metrics token (`organization_id`), without the console's health."""
    now = now or timezone.now()
    operator = sees_every_organization(user) and organization_id is None
    visible = visible_servers(user)
    if organization_id is not None:
        visible = visible.filter(organization_id=organization_id)
    servers = list(visible.order_by("organization__name", "name").values_list("pk", flat=True))
    window = Window(now - timedelta(seconds=settings.METRICS["WINDOW_S"]), now)
    rows = fleet_summary(server_ids=servers, window=window, now=now)
    top, left_out = _top_statements(rows, settings.METRICS["STATEMENTS_TOP_N"], window) if statements else (None, 0)
    return Figures(
        rows,
        recommendation_counts(server_ids=servers),
        open_alert_counts(server_ids=servers),
        fleet_waits(server_ids=servers, window=window),
        now,
        health=_health(now) if operator else None,
        totals=running_totals(server_ids=servers),
        top=top,
        left_out=left_out,
    )


def registry_of(found: Figures, statements: int = 0) -> CollectorRegistry:
    """The registry of one answer: the fleet's families, and each server's top `statements` when asked."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        FleetCollector(
            found.rows,
            found.recommendations,
            found.alerts,
            found.waits,
            found.now,
            health=found.health,
            totals=found.totals,
        )
    )
    if statements and found.top is not None:
        top = {server_id: rows[:statements] for server_id, rows in found.top.items()}
        registry.register(StatementFamilies(found.rows, top, found.left_out))
    return registry


def scrape(user, *, now=None, statements: int = 0, organization_id: int | None = None) -> CollectorRegistry:
    """The registry of one scrape of what `user` may see, read now (no cache; the benchmark's and the tests')."""
    found = figures(user, now=now, statements=bool(statements), organization_id=organization_id)
    return registry_of(found, statements)


def _statements_asked(request: HttpRequest) -> int:
    """?statements=N: 0 when absent; ValueError with what to send otherwise."""
    asked = request.GET.get("statements")
    if asked is None:
        return 0
    cap = settings.METRICS["STATEMENTS_TOP_N"]
    if not asked.isdigit() or not 1 <= int(asked) <= cap:
        raise ValueError(f"statements must be a whole number from 1 to {cap} (each server's top statements by time)")
    return int(asked)


def _text(status: int, text: str, retry_after_s: int | None = None) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    if retry_after_s is not None:
        response["Retry-After"] = str(retry_after_s)
    return response


def _cache_key(token, statements: int) -> str:
    """One key per scope and kind, whatever the token, the encoding or the number of statements asked: the same
    user's tokens of the same scope (an organization's, or all they see) see the same figures, an answer's format
    is written from them, and an answer asking N statements shows the first N of the top STATEMENTS_TOP_N. So a
    user has at most two keys per scope (with and without statements), however many tokens and variants."""
    scope = f"user-{token.user_id}" + (f"-org-{token.organization_id}" if token.organization_id is not None else "")
    return f"metrics:{scope}:{'statements' if statements else 'fleet'}"


def _read(token, statements: int) -> Figures:
    started = time.perf_counter()
    found = figures(token.user, statements=bool(statements), organization_id=token.organization_id)
    logger.debug("metrics: figures of %s read in %.0f ms", _cache_key(token, statements), _ms_since(started))
    return found


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


@login_not_required
@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    header = request.headers.get("Authorization", "").split()
    if len(header) != 2 or header[0] != "Bearer":
        return _unauthorized("a token is needed: Authorization: Bearer pgc_…")
    token = token_check(header[1])
    if token is None:
        return _unauthorized("invalid, revoked or expired token")
    token_used(token)
    try:
        statements = _statements_asked(request)
    except ValueError as exc:
        return _text(400, str(exc))
    if wait := scrape_wait_s(token.prefix, "statements" if statements else "fleet"):
        return _text(429, f"too many scrapes with this token: at most {settings.METRICS['RATE']}", wait)
    try:
        found = computed_once(
            _cache_key(token, statements),
            lambda: _read(token, statements),
            fresh_s=settings.METRICS["CACHE_S"],
            wait_s=settings.METRICS["COMPUTE_WAIT_S"],
        )
    except NotInTime:
        return _text(503, "the figures are being read for another scrape of this token's scope: try again", 1)
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry_of(found, statements)), content_type=content_type)


urlpatterns = [path("metrics", metrics, name="metrics")]
