"""What a rule reads, through the selectors only (readtier, advisor.selectors), handed to the pure
functions of alerts/conditions.py: per server in the rule's scope, the conditions true now. A server whose
history could not be read is left out of the answer (logged), so that its alerts are neither opened nor
resolved by a failed read."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from advisor.selectors import recommendations
from alerts import conditions
from alerts.conditions import Condition
from alerts.models import Rule
from collectors.public import shown
from inventory.models import Server
from readtier import (
    DAY,
    HOUR,
    MAX_PAGE_SIZE,
    Page,
    StatementFilters,
    TopStatements,
    Window,
    ceil_hour,
    config_changes,
    floor_hour,
    hourly_sums,
    plan_changes_by_statement,
    server_series,
    server_status,
    top_statements,
)

logger = logging.getLogger(__name__)


def conditions_now(*, rule: Rule, servers: Sequence[Server], now: datetime) -> dict[int, list[Condition]]:
    """server id -> the rule's conditions true on it now (an empty list: none), for every server read."""
    if rule.kind == Rule.Kind.ADVISOR:  # one query for every server of the scope
        out: dict[int, list[Condition]] = {s.pk: [] for s in servers}
        rows = recommendations(server_ids=[s.pk for s in servers])
        for c in conditions.advisor_open(rows=rows, min_severity=rule.min_severity):
            out[c.server_id].append(c)
        return out
    read = {Rule.Kind.SERVER_DOWN: _server_down, Rule.Kind.DEALLOC: _dealloc, Rule.Kind.REGRESSION: _regressions}
    out = {}
    for server in servers:
        try:
            out[server.pk] = read[rule.kind](rule, server, now)
        except Exception:  # one server's unreadable history never stops the others: logged, left as it was
            logger.exception("alerts: rule %s could not read server %s", rule.pk, server.pk)
    return out


def _server_down(rule: Rule, server: Server, now: datetime) -> list[Condition]:
    found = conditions.server_down(
        server_id=server.pk,
        status=server_status(server, now),
        last_success_at=server.last_success_at,
        registered_at=server.created_at,
        failures=server.consecutive_failures,
        error_class=server.last_error_class,
        # to channels anyone may receive: the console's sentence for the failure, never libpq's words
        error_message=shown(server.last_error_class, server.last_error_message, detail=False),
        down_minutes=rule.down_minutes,
        now=now,
    )
    return [found] if found else []


def _dealloc(rule: Rule, server: Server, now: datetime) -> list[Condition]:
    window = timedelta(minutes=rule.dealloc_minutes)
    # Snapshot by snapshot (raw): a burst and a storm differ by how much of the window they fill.
    series = server_series(server_id=server.pk, window=Window.last(window, now=now), resolution="raw", top_events=0)
    found = conditions.dealloc_storm(
        server_id=server.pk, points=series.points, rate_per_s=rule.dealloc_per_s, window=window
    )
    return [found] if found else []


def regression_candidates(*, rule: Rule, server_id: int, now: datetime) -> TopStatements:
    """The last hour's statements with at least the rule's share (they are the first 1/share by total time)."""
    share = rule.regression_min_share
    size = min(MAX_PAGE_SIZE, math.floor(1 / share)) if share > 0 else MAX_PAGE_SIZE  # at most 1/share have it
    return top_statements(
        server_id=server_id,
        window=Window.last(HOUR, now=now),
        order="total",
        filters=StatementFilters(min_time_share=share),
        page=Page(1, size),
    )


def baseline_windows(*, now: datetime, days: int) -> list[Window]:
    """The same clock hours as the last hour on each of the `days` previous days, newest first: whole hours (the
    two around the same time of day when now is not on the hour)."""
    start = floor_hour(now - HOUR)
    return [Window(start - back * DAY, ceil_hour(now) - back * DAY) for back in range(1, days + 1)]


def regression_baselines(*, server_id: int, statement_ids: list[int], windows: list[Window]) -> dict[int, list[float]]:
    """Each statement's mean time per call in each window it ran in: every day from the hourly tier in one query,
    so that a week of baselines costs no raw snapshot decoded."""
    baselines: dict[int, list[float]] = {}
    for day in hourly_sums(server_id=server_id, windows=windows, statement_ids=statement_ids):
        for sid, totals in day.items():
            if totals.calls:
                baselines.setdefault(sid, []).append(totals.mean_ms)
    return baselines


def _regressions(rule: Rule, server: Server, now: datetime) -> list[Condition]:
    """The candidates' mean time over the last hour against the same hours of the previous days."""
    top = regression_candidates(rule=rule, server_id=server.pk, now=now)
    if not top.rows:
        return []
    days = baseline_windows(now=now, days=rule.regression_days)
    ids = [r.statement_id for r in top.rows]
    baselines = regression_baselines(server_id=server.pk, statement_ids=ids, windows=days)
    first_start = days[-1].start

    def found(changes: list, planned: dict | None = None) -> list[Condition]:
        return conditions.regressions(
            server_id=server.pk,
            current=top.rows,
            server_total_ms=top.db_time_ms,
            baselines=baselines,
            factor=rule.regression_factor,
            min_share=rule.regression_min_share,
            min_days=math.ceil(rule.regression_days / 2),  # half the days at least: one odd day is no baseline
            changes=changes,
            baseline_from=first_start,
            now=now,
            plan_changes=planned,
        )

    regressed = found([])
    if not regressed:
        return []
    # Only for a server with a regression: what changed in its configuration, and in the plans of the statements
    # that regressed, since the baseline began.
    since = Window(first_start, now)
    ids = [c.statement_id for c in regressed]
    planned = plan_changes_by_statement(server_id=server.pk, window=since, statement_ids=ids)
    return found(config_changes(server_id=server.pk, window=since), planned)
