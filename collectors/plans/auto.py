"""Which statements of a server are planned without anyone asking: its top statements by total time over the last
PLANS_INTERVAL_S (the page's own selector and ranking, the console's own statements left out, so the plans are of
the statements the page shows first), the costliest first, each at most once per interval, within the server's plan
budget (history.plans.budget_reserve), which stops the round at its first refusal; the next tick goes on. A server
that cannot be read (down, refusing the monitoring role) stops the round at its first statement too, rather than
waiting out a connection timeout for each of its top statements; neither counts as an attempt. A round holds a
slot of its organization's share of the plans worker (collectors.plans.service.plans_slot) from its start to its
end; when none is free it does not start (Round.over_share), and the task puts it off."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from collectors.plans.service import PlanOutcome, plans_slot, statement_plan
from history.public import ATTEMPT_OVER_BUDGET, NOT_ATTEMPTS, PlanAttempt
from readtier import Page, StatementFilters, Window, top_statements


@dataclass(frozen=True)
class Round:
    server_id: int
    candidates: int  # top statements considered
    outcomes: dict[int, PlanOutcome]  # statement id -> what its EXPLAIN gave, in the order they were planned
    over_share: str = ""  # why the round did not start: its organization's share of the plans worker was in use

    @property
    def stopped_by_budget(self) -> bool:
        return any(o.code == ATTEMPT_OVER_BUDGET for o in self.outcomes.values())

    @property
    def stopped_by_server(self) -> bool:
        return any(o.server_failed for o in self.outcomes.values())


def due_statements(server_id: int, *, now: datetime | None = None) -> tuple[int, list[int]]:
    """(how many top statements, the ids of those without an attempt in the last interval, costliest first). An
    attempt the budget refused, or one that could not read the server, does not count: that statement is due again
    at once."""
    cfg = settings.PLANS
    now = now or timezone.now()
    interval = timedelta(seconds=cfg["INTERVAL_S"])
    top = top_statements(
        server_id=server_id,
        window=Window.last(interval, now=now),
        order="total",
        filters=StatementFilters(hide_own=True),  # the console's own collections: as the pages rank them
        page=Page(1, cfg["TOP_N"]),
    )
    ids = [row.statement_id for row in top.rows]
    recent = set(
        PlanAttempt.objects.filter(server_id=server_id, statement_id__in=ids, at__gt=now - interval)
        .exclude(code__in=NOT_ATTEMPTS)
        .values_list("statement_id", flat=True)
    )
    return len(ids), [sid for sid in ids if sid not in recent]


def plan_fresh(server_id: int, statement_id: int, fresh_s: float) -> bool:
    """Whether the statement was EXPLAINed (a plan or a reason; the budget's refusals and a server that could not be
    read not counted) in the last `fresh_s` seconds."""
    since = timezone.now() - timedelta(seconds=fresh_s)
    return (
        PlanAttempt.objects.filter(server_id=server_id, statement_id=statement_id, at__gt=since)
        .exclude(code__in=NOT_ATTEMPTS)
        .exists()
    )


class Pace:
    """At most `per_s` EXPLAINs a second in this process, whichever of its threads asks: each waits its turn. The
    plans worker shares the console's host with the collection workers; paced, its rounds never take the CPU the
    collections need, however many servers' rounds a tick sends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self, per_s: float) -> None:
        if per_s <= 0:
            return
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next)
            self._next = turn + 1.0 / per_s
        time.sleep(turn - now)


PACE = Pace()


def plan_top_statements(server_id: int, *, now: datetime | None = None) -> Round:
    """Plan the server's due top statements, one after the other at the worker's pace (PLANS_WORKER_EXPLAINS_PER_S),
    until they are done or the budget refuses; within its organization's share of the plans worker (none free:
    nothing done, Round.over_share says why)."""
    with plans_slot(server_id) as refused:
        if refused:
            return Round(server_id, 0, {}, over_share=refused)
        candidates, due = due_statements(server_id, now=now)
        outcomes: dict[int, PlanOutcome] = {}
        for statement_id in due:
            PACE.wait(settings.PLANS["WORKER_EXPLAINS_PER_S"])
            outcomes[statement_id] = outcome = statement_plan(server_id=server_id, statement_id=statement_id)
            if outcome.code == ATTEMPT_OVER_BUDGET or outcome.server_failed:
                break
        return Round(server_id, candidates, outcomes)
