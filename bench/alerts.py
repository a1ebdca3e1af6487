"""Alert evaluation at fleet scale: every rule of an organization of S servers, evaluated as the workers do
(alerts.tasks.evaluate_alert_group, one group of ALERTS_SERVERS_PER_TASK servers after the other, as one worker
thread would run them all), timed in this process; beside it, in the same run, the regression rule's baselines
read as they were before hourly_sums (readtier.server.statements_in for each previous day), with
both readings checked to agree.

History (bench/fleet.py, the read-tier benchmark's fleet): S servers of N synthetic statements, a snapshot every
Size.step_s seconds for D days (baselines through server_collect, deltas by the bulk writer, one rollups.roll_up
building every hour), so that each server has the hours the regression rule compares on each previous day. A
FAILING share of the servers have their last collections failing, so that the server-down rule opens alerts and
their deliveries are made (to an email channel; nothing is sent: the workers' part is measured by
tests/alerts/test_tasks.py).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import fleet as fleet_history
from bench.stats import median, pct

LAST_TAKEN_AT = datetime(2025, 3, 10, 12, 37, tzinfo=UTC)  # not on the hour: two hours a baseline day
EVALUATE_AT = LAST_TAKEN_AT + timedelta(seconds=30)
FAILING = 0.05
TARGET_SHARE = 0.5  # the whole fleet evaluated by one worker thread in at most half of ALERTS_EVALUATE_S


@dataclass(frozen=True)
class Size:
    servers: int = 500
    statements: int = 200
    days: int = 8
    step_s: int = 300
    runs: int = 5


FULL = Size()
QUICK = Size(servers=20, statements=50, days=3, step_s=600, runs=2)


@dataclass
class Timed:
    """One thing timed over the whole fleet: seconds per run, queries of one run."""

    label: str
    seconds: list[float] = field(default_factory=list)
    queries: int = 0

    @property
    def median_s(self) -> float:
        return median(self.seconds)

    @property
    def p95_s(self) -> float:
        return pct(self.seconds, 95)


@dataclass
class AlertsRun:
    size: Size
    servers: int
    groups: int
    group_size: int
    evaluate_s: int
    history_s: float
    snapshots: int
    first: Timed  # the first evaluation: default rules made, the failing servers' alerts opened
    steady: Timed  # the evaluations after it
    group_s: list[float]  # every group of every steady run
    rules: list[Timed]  # each rule alone over the fleet, steady
    baselines_before: Timed
    baselines_now: Timed
    baseline_days: int
    agree: bool
    alerts_open: int
    deliveries: int
    seconds_total: float

    @property
    def target_s(self) -> float:
        return TARGET_SHARE * self.evaluate_s

    @property
    def passed(self) -> bool:
        return self.steady.p95_s <= self.target_s


def _counted(fn: Callable[[], object]) -> tuple[float, int, object]:
    """Seconds and queries (the ORM's and the selectors' own) of one call."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from readtier import db

    with CaptureQueriesContext(connection) as orm, db.counting() as raw:
        t0 = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t0
    return seconds, len(orm.captured_queries) + raw.queries, result


def _baselines_per_day(server_id: int, ids: list[int], windows) -> dict[int, list[float]]:
    """The regression rule's baselines read as before hourly_sums: statements_in for each day."""
    from readtier.server import statements_in

    out: dict[int, list[float]] = {}
    for day in windows:
        for sid, totals in statements_in(server_id=server_id, window=day, statement_ids=ids).items():
            if totals.calls:
                out.setdefault(sid, []).append(totals.total_ms / totals.calls)
    return out


def _baselines_at_once(server_id: int, ids: list[int], windows) -> dict[int, list[float]]:
    """The same, as the rule reads them now (alerts.evidence): every day in one query."""
    from alerts.evidence import regression_baselines

    return regression_baselines(server_id=server_id, statement_ids=ids, windows=windows)


def _same(a: dict[int, list[float]], b: dict[int, list[float]]) -> bool:
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(a[k], b[k], strict=True))
        for k in a
    )


def run(*, size: Size = FULL, log=print) -> AlertsRun:
    from django.conf import settings
    from django.db import connection

    from alerts.evidence import baseline_windows, conditions_now, regression_candidates
    from alerts.lifecycle import evaluate_organization, evaluation_groups
    from alerts.models import Alert, Delivery, Rule
    from alerts.services import channel_create
    from bench.footprint import HISTORY_TABLES
    from inventory.models import Organization, Server

    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("TRUNCATE " + ", ".join(HISTORY_TABLES))
    log(
        f"  history: {size.servers} servers x {size.statements} statements, {size.days} days, "
        f"a snapshot every {size.step_s} s"
    )
    with tempfile.TemporaryDirectory(prefix="bench-alerts-") as workdir:
        pending = fleet_history.start(
            servers=size.servers,
            statements=size.statements,
            days=size.days,
            last_taken_at=LAST_TAKEN_AT,
            workdir=Path(workdir),
            step_s=size.step_s,
            prefix="bench-alerts",
            log=log,
        )
        # The periodic rollup builds each hour as it comes; one roll_up over old snapshots builds the hours of the
        # raw retention only. Here every day has its hours, as it would in production after a week.
        raw_days = settings.HISTORY["RAW_RETENTION_DAYS"]
        settings.HISTORY["RAW_RETENTION_DAYS"] = size.days + 1
        try:
            fl = fleet_history.finish(pending, log=log)
        finally:
            settings.HISTORY["RAW_RETENTION_DAYS"] = raw_days
    history_s = time.perf_counter() - started
    log(f"    written in {history_s:.0f}s: " + ", ".join(f"{k} {v:.0f}s" for k, v in fl.seconds.items()))
    with connection.cursor() as cur:
        cur.execute("ANALYZE")  # as autovacuum would have by now
    servers = Server.objects.filter(pk__in=fl.server_ids)
    servers.update(last_attempt_at=LAST_TAKEN_AT, last_success_at=LAST_TAKEN_AT, consecutive_failures=0)
    failing = fl.server_ids[:: round(1 / FAILING)]
    Server.objects.filter(pk__in=failing).update(
        consecutive_failures=12, last_success_at=LAST_TAKEN_AT - timedelta(minutes=40), last_error_class="unreachable"
    )
    # An organization of their own: the read-tier benchmark's fleet, in the same database, is not evaluated.
    organization = Organization.objects.create(name=f"bench-alerts-{int(time.time())}")
    servers.update(organization=organization)
    channel_create(organization=organization, name="dba", kind="email", addresses=["dba@example.com"])
    size_per_task = settings.ALERTS_SERVERS_PER_TASK
    groups = [g for g in evaluation_groups(size=size_per_task) if g[0] == organization.pk]
    log(f"  evaluation: {len(groups)} group(s) of at most {size_per_task} servers, {size.runs} runs")

    def evaluate_fleet(at: datetime, group_s: list[float] | None = None) -> int:
        made: list[int] = []
        for _, ids in groups:
            t0 = time.perf_counter()
            evaluate_organization(organization=organization, enqueue=made.append, now=at, server_ids=ids)
            if group_s is not None:
                group_s.append(time.perf_counter() - t0)
        return len(made)

    first = Timed("first evaluation")
    s, first.queries, _ = _counted(lambda: evaluate_fleet(EVALUATE_AT))
    first.seconds.append(s)
    steady, group_s = Timed("evaluation"), []
    for i in range(size.runs):
        at = EVALUATE_AT + timedelta(seconds=i + 1)
        s, q, _ = _counted(lambda at=at: evaluate_fleet(at, group_s))
        steady.seconds.append(s)
        steady.queries = q
    log(f"    first {first.seconds[0]:.1f} s, then median {steady.median_s:.1f} s ({steady.queries} queries)")

    rules = []
    fleet = list(servers.order_by("pk"))
    for rule in Rule.objects.filter(organization=organization).order_by("pk"):
        timed = Timed(f"{rule.kind}")
        for _ in range(size.runs):
            s, timed.queries, _ = _counted(lambda rule=rule: conditions_now(rule=rule, servers=fleet, now=EVALUATE_AT))
            timed.seconds.append(s)
        rules.append(timed)
        log(f"    rule {rule.kind}: median {timed.median_s:.2f} s, {timed.queries} queries")

    regression = Rule.objects.get(organization=organization, kind=Rule.Kind.REGRESSION)
    # The statements whose baselines the rule reads, read once per server: both ways are timed without it.
    candidates = {
        sid: [r.statement_id for r in regression_candidates(rule=regression, server_id=sid, now=EVALUATE_AT).rows]
        for sid in fl.server_ids
    }
    windows = baseline_windows(now=EVALUATE_AT, days=regression.regression_days)
    before, now_ = Timed("baselines, a query set per day"), Timed("baselines, hourly_sums")
    agree = True
    for _ in range(size.runs):
        for timed, read in ((before, _baselines_per_day), (now_, _baselines_at_once)):
            s, timed.queries, got = _counted(
                lambda read=read: {sid: read(sid, candidates[sid], windows) for sid in fl.server_ids}
            )
            timed.seconds.append(s)
            if timed is before:
                old = got
            else:
                differ = [sid for sid in fl.server_ids if not _same(old[sid], got[sid])]
                if differ and agree:
                    log(f"    baselines differ on {len(differ)} servers, e.g. {old[differ[0]]} / {got[differ[0]]}")
                agree = agree and not differ
    log(f"    baselines: before {before.median_s:.2f} s, now {now_.median_s:.2f} s, agree: {agree}")
    return AlertsRun(
        size=size,
        servers=len(fl.server_ids),
        groups=len(groups),
        group_size=size_per_task,
        evaluate_s=settings.ALERTS_EVALUATE_S,
        history_s=history_s,
        snapshots=fl.snapshots,
        first=first,
        steady=steady,
        group_s=group_s,
        rules=rules,
        baselines_before=before,
        baselines_now=now_,
        baseline_days=regression.regression_days,
        agree=agree,
        alerts_open=Alert.objects.filter(rule__organization=organization, state=Alert.State.OPEN).count(),
        deliveries=Delivery.objects.filter(channel__organization=organization).count(),
        seconds_total=time.perf_counter() - started,
    )
