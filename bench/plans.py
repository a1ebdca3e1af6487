"""Benchmark 8: what reading the plans of a server's top statements costs the monitored server and the history.

On the bench's monitored PostgreSQL 17, an application (bench/plans_workload.py: tables with indexes, joins,
reports and DML as an application role) runs its statements between two collections of a server registered
through the product, so that the read tier ranks them; then, at the settings' defaults (PLANS):

1. A day at the defaults: four rounds of `collectors.plans.auto.plan_top_statements`, as PLANS_INTERVAL_S (6 h)
   gives them in a day. Between rounds the server's attempts are moved back by the interval (so that each
   round plans its statements again without waiting) and the round's budget row (collectors_plan_spend) is
   moved to the hour of the day the round stands for (so that each round has its own hour's budget and the
   day's bytes add up as in a day); nothing else changes, so a shape seen again is not stored again.
2. A worst case for storage: another server whose top statements are SELECTs only, all indexes renamed between
   rounds, so that each round finds a new shape for every statement it plans.
3. The baseline in the same run: each round's statements EXPLAINed by hand, as a DBA would, as the same role
   (`EXPLAIN (GENERIC_PLAN, FORMAT JSON, SUMMARY)` of the same text: no read-only transaction, no lookup of the
   role's search path), on a kept connection and as the first statement of a new one, before the round or after
   it (alternating); and where a `statement_plan` call's time goes.
4. The timeout held: one statement planned while another session holds its table under ACCESS EXCLUSIVE.

The monitoring role has pg_monitor and pg_read_all_data (docs/monitoring-role.md), no write privilege: planning
the application's DML is refused ("permission"), as on a server set up by that page.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone
from psycopg import sql

from bench import env, phases
from bench import plans_workload as app
from bench.plans_report import Day, Explained, Locked, PlansRun, PlanTab, RoundCost
from collectors import connection as monitored
from collectors.plans import auto, service
from collectors.plans import explain as explaining
from collectors.plans.statement import NotExplainable, classify
from collectors.redact import redact
from collectors.services import server_collect
from history import plans as history_plans
from history.models import PlanAttempt, PlanShape, PlanSpend, ServerState, Statement
from history.own import is_own
from history.tables import TABLES
from inventory.connection import parse_dsn
from inventory.services import server_create

ROUNDS = 4  # rounds a day at the default PLANS_INTERVAL_S
PLAN_TABLES = tuple(
    t.name
    for t in (TABLES.PLAN_SHAPE, TABLES.STATEMENT_PLAN, TABLES.PLAN_ATTEMPT, TABLES.PLAN_CHANGE, TABLES.PLAN_SPEND)
)


@dataclass(frozen=True)
class Size:
    tables: int = 40
    rows: int = 3000
    hold_s: float = 1.0  # how long the lock holder keeps its lock while a DBA's EXPLAIN waits for it


FULL = Size()
QUICK = Size(tables=20, rows=1000, hold_s=0.5)


def round_hours(first: datetime, rounds: int = ROUNDS, interval: timedelta = timedelta(hours=6)) -> list[datetime]:
    """The hours of one UTC day that `rounds` rounds, `interval` apart, stand for: the last one is `first`'s own
    hour (the round runs now), the others the hours of the same day `interval`, 2 × `interval`... before it,
    counted round the day's clock, so that the budget's day (which adds the bytes of a UTC day) sees them all."""
    day = first.replace(hour=0, minute=0, second=0, microsecond=0)
    hour = first.hour
    step = int(interval.total_seconds() // 3600)
    return [day + timedelta(hours=(hour - step * (rounds - 1 - i)) % 24) for i in range(rounds)]


@contextlib.contextmanager
def _timed_explains():
    """Per statement id, statement_plan's time end to end and the EXPLAIN's as the budget measures it (the same
    span as service._plan's): by wrapping the names where plan_top_statements and statement_plan look them up."""
    call_ms: dict[int, float] = {}
    explain_ms: dict[int, float] = {}
    current: list[int] = []

    def statement_plan(*, server_id: int, statement_id: int, __fn=auto.statement_plan):
        current.append(statement_id)
        t0 = time.perf_counter()
        try:
            return __fn(server_id=server_id, statement_id=statement_id)
        finally:
            call_ms[statement_id] = (time.perf_counter() - t0) * 1000
            current.pop()

    @functools.wraps(service.explain)
    def explain(*a, __fn=service.explain, **kw):
        t0 = time.perf_counter()
        try:
            return __fn(*a, **kw)
        finally:
            explain_ms[current[-1]] = (time.perf_counter() - t0) * 1000

    saved = (auto.statement_plan, service.explain)
    auto.statement_plan, service.explain = statement_plan, explain
    try:
        yield call_ms, explain_ms
    finally:
        auto.statement_plan, service.explain = saved


def _steps() -> list[tuple[str, object, str]]:
    """(label, module, attribute): what statement_plan calls, wrapped where it looks the names up."""
    return [
        ("budget: reserve and settle (history)", history_plans, "budget_reserve"),
        ("budget: reserve and settle (history)", history_plans, "budget_settle"),
        ("two new connections (SCRAM)", monitored, "connect"),
        ("the text and role read (pg_stat_statements)", service, "_text_and_role"),
        ("EXPLAIN: the role's search path lookup", explaining, "role_search_path"),
        ("EXPLAIN: read-only transaction, settings, EXPLAIN, commit", service, "explain"),
        ("the store (history): plan or reason, attempt", history_plans, "record_plan"),
        ("the store (history): plan or reason, attempt", history_plans, "record_unexplained"),
    ]


def _breakdown(acc: dict[str, list[float]], call_ms: list[float]) -> list[tuple[str, float]]:
    """(step, mean ms per call) rows, the rest and the total last."""
    n = max(len(call_ms), 1)
    total = sum(call_ms) / n
    rows = []
    for label in dict.fromkeys(label for label, _, _ in _steps()):
        rows.append((label, sum(acc.get(label, [])) / n))
    rows.append(
        (
            "rest (server and statement rows, credentials, closing the connections, glue)",
            total - sum(ms for _, ms in rows),
        )
    )
    rows.append(("total", total))
    return rows


def _texts(conn: psycopg.Connection, server_id: int) -> dict[int, str]:
    """Statement id -> the text pg_stat_statements keeps (what the console EXPLAINs, not the stored redacted one)."""
    kept = {
        (userid, dbid, queryid, toplevel): query
        for userid, dbid, queryid, toplevel, query in conn.execute(
            "SELECT userid, dbid, queryid, toplevel, query FROM pg_stat_statements(true)"
        )
    }
    out = {}
    for s in Statement.objects.filter(server_id=server_id):
        text = kept.get((s.userid, s.dbid, s.queryid, s.toplevel))
        if text is not None:
            out[s.pk] = text
    return out


def _by_hand(conn: psycopg.Connection, text: str) -> tuple[float, float | None]:
    """A DBA's EXPLAIN of the text: (ms, the server's planning time, None when it was refused)."""
    statement = classify(text, conn.info.server_version)  # the text the console sends (no final semicolon)
    body = text if isinstance(statement, NotExplainable) else statement.text
    query = sql.SQL("EXPLAIN (GENERIC_PLAN, FORMAT JSON, SUMMARY) ") + sql.SQL(body)
    t0 = time.perf_counter()
    try:
        plan = conn.execute(query, prepare=False).fetchone()[0][0]
    except psycopg.Error:
        return (time.perf_counter() - t0) * 1000, None
    return (time.perf_counter() - t0) * 1000, plan.get("Planning Time")


def _by_hand_round(conn: psycopg.Connection, dsn: str, texts: dict[int, str], due: list[int]) -> dict[int, tuple]:
    """Statement id -> (ms, planning ms, ms on a new connection, its connection's ms): the round's statements by
    hand, on the kept connection and as the first statement of a new one."""
    out = {}
    for sid in due:
        if sid not in texts:
            continue
        ms, planning_ms = _by_hand(conn, texts[sid])
        t0 = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as fresh:
            connect_ms = (time.perf_counter() - t0) * 1000
            cold_ms, _ = _by_hand(fresh, texts[sid])
        out[sid] = (ms, planning_ms, cold_ms, connect_ms)
    return out


def _truncate_plan_tables() -> None:
    with connection.cursor() as cur:
        cur.execute("TRUNCATE " + ", ".join(PLAN_TABLES))


def _relation_sizes() -> dict[str, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT t, pg_total_relation_size(t::regclass) FROM unnest(%s::text[]) t", [list(PLAN_TABLES)])
        return dict(cur.fetchall())


def _row_bytes(server_id: int) -> dict[str, int]:
    out = {}
    with connection.cursor() as cur:
        for t in PLAN_TABLES:
            cur.execute(f"SELECT coalesce(sum(pg_column_size(p.*)), 0) FROM {t} p WHERE server_id = %s", [server_id])
            out[t] = int(cur.fetchone()[0])
    return out


def _move_spend(server_id: int, since: datetime, until: datetime, to: datetime) -> tuple[int, float, int]:
    """The round's budget rows (the real hours it ran in) made one row at the hour it stands for; its totals."""
    rows = list(PlanSpend.objects.filter(server_id=server_id, hour__gte=since, hour__lte=until))
    explains = sum(r.explains for r in rows)
    planning_ms = sum(r.planning_ms for r in rows)
    new_bytes = sum(r.bytes for r in rows)
    PlanSpend.objects.filter(pk__in=[r.pk for r in rows]).delete()
    PlanSpend.objects.create(server_id=server_id, hour=to, explains=explains, planning_ms=planning_ms, bytes=new_bytes)
    return explains, planning_ms, new_bytes


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _day(
    label: str, server_id: int, by_hand: psycopg.Connection, dsn: str, *, between=None, log=print
) -> tuple[Day, dict]:
    """Four rounds of plan_top_statements on the server, the same statements by hand in each (on `by_hand` and on
    new connections to `dsn`); `between(i)` runs before round i (from 1). Returns the day and the last round's
    outcomes (statement id -> Outcome)."""
    interval = timedelta(seconds=settings.PLANS["INTERVAL_S"])
    texts = _texts(by_hand, server_id)
    role_oid = ServerState.objects.filter(server_id=server_id).values_list("role_oid", flat=True).first()
    statements = Statement.objects.filter(server_id=server_id)
    own = {s.pk for s in statements if is_own(s.query, userid=s.userid, role_oid=role_oid)}
    _truncate_plan_tables()
    sizes_before = _relation_sizes()
    hours = round_hours(timezone.now(), interval=interval)
    rounds, outcomes, calls = [], {}, []
    with phases.timed_phases(_steps()) as acc:
        for i, hour in enumerate(hours):
            if i:
                PlanAttempt.objects.filter(server_id=server_id).update(at=F("at") - interval)
                if between is not None:
                    between(i)
            shapes_before = PlanShape.objects.filter(server_id=server_id).count()
            _, due = auto.due_statements(server_id)
            bare = _by_hand_round(by_hand, dsn, texts, due) if i % 2 == 0 else {}  # neither always warmer
            since = _hour(timezone.now())
            with _timed_explains() as (call_ms, explain_ms):
                done = auto.plan_top_statements(server_id)
            until = _hour(timezone.now())
            if i % 2 == 1:
                bare = _by_hand_round(by_hand, dsn, texts, due)
            explains, planning_ms, new_bytes = _move_spend(server_id, since, until, hour)
            explained = [
                Explained(sid, o.code, call_ms[sid], explain_ms.get(sid), *bare.get(sid, (None,) * 4), own=sid in own)
                for sid, o in done.outcomes.items()
            ]
            calls += call_ms.values()
            new_shapes = PlanShape.objects.filter(server_id=server_id).count() - shapes_before
            rounds.append(RoundCost(hour, explains, planning_ms, new_bytes, new_shapes, explained))
            outcomes = done.outcomes
            log(
                f"  {label}, round {i + 1} (as at {hour:%H:%M} UTC): {explains} EXPLAINs of {done.candidates} top "
                f"statements, {planning_ms:.0f} ms of planning, {new_shapes} new shapes ({new_bytes:,} bytes)"
                + ("; stopped by the budget" if done.stopped_by_budget else "")
            )
    sizes_after = _relation_sizes()
    day = Day(
        label,
        server_id,
        rounds,
        relation_growth={t: sizes_after[t] - sizes_before[t] for t in PLAN_TABLES},
        row_bytes=_row_bytes(server_id),
        shapes=PlanShape.objects.filter(server_id=server_id).count(),
        breakdown=_breakdown(acc, calls),
    )
    return day, outcomes


def _server(cluster, name: str, stmts: list[app.Statement], *, seed: int) -> int:
    """A server registered through the product, its baseline collection, the application's statements, a second
    collection: the read tier ranks exactly those statements."""
    app_dsn = cluster.dsn(env.APP_DB, app.APP_ROLE)
    monitor_dsn = cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD)
    cluster.execute("SELECT pg_stat_statements_reset()", dbname=env.APP_DB)
    server = server_create(name=name, connection=parse_dsn(monitor_dsn), organization_name="bench")
    for expected in ("baseline", None):
        result = server_collect(server_id=server.pk)
        if not result.ok or (expected and result.kind != expected):
            raise RuntimeError(f"collection of {name} failed: {result.summary()}")
        if expected:
            app.run(app_dsn, stmts, seed=seed)
    return server.pk


def _relation(paths: list[str]) -> str:
    """The first relation a plan reads ("Index Scan using x on plans_t03" -> plans_t03)."""
    return next(p.rsplit(" on ", 1)[1] for p in paths if not p.startswith("Bitmap Index Scan"))


def _locked(cluster, server_id: int, statement_id: int, relation: str, hold_s: float) -> Locked:
    """Plan the statement while another session holds its table under ACCESS EXCLUSIVE; then a DBA's EXPLAIN by
    hand under the same lock, which waits until the holder ends."""
    table = sql.Identifier(relation)
    watch = cluster.connect(env.APP_DB)
    holder = psycopg.connect(cluster.dsn(env.APP_DB))  # not autocommit: the lock lasts until its rollback
    by_hand = psycopg.connect(cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD), autocommit=True)
    count = sql.SQL("SELECT count(*) FROM {}").format(table)
    holding = (
        "SELECT a.pid, a.xact_start, a.state, l.granted FROM pg_stat_activity a "
        "JOIN pg_locks l ON l.pid = a.pid AND l.relation = %s::regclass AND l.mode = 'AccessExclusiveLock' "
        "WHERE a.pid = %s"
    )
    waiting = "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted"
    try:
        rows_before = watch.execute(count).fetchone()[0]
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
        pid = holder.info.backend_pid
        held = watch.execute(holding, (relation, pid)).fetchone()
        with _timed_explains() as (call_ms, explain_ms):
            outcome = auto.statement_plan(server_id=server_id, statement_id=statement_id)
        waiting_after = watch.execute(waiting, (relation,)).fetchone()[0]
        kept = watch.execute(holding, (relation, pid)).fetchone() == held and held[3]

        done: list[float] = []
        text = _texts(by_hand, server_id)[statement_id]
        thread = threading.Thread(target=lambda: done.append(_by_hand(by_hand, text)[0]), name="bench-by-hand")
        thread.start()
        deadline = time.monotonic() + 10
        while watch.execute(waiting, (relation,)).fetchone()[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # until the EXPLAIN by hand waits for the lock
        time.sleep(hold_s)
        holder.rollback()
        thread.join(timeout=30)
        rows_after = watch.execute(count).fetchone()[0]
    finally:
        for conn in (holder, by_hand, watch):
            conn.close()
    return Locked(
        relation=relation,
        lock_timeout_ms=settings.PLANS["LOCK_TIMEOUT_MS"],
        call_ms=call_ms[statement_id],
        explain_ms=explain_ms.get(statement_id, float("nan")),
        code=outcome.code,
        reason=outcome.reason,
        holder_kept=bool(kept),
        waiting_after=waiting_after,
        rows_before=rows_before,
        rows_after=rows_after,
        hold_s=hold_s,
        bare_ms=done[0] if done else float("nan"),
    )


TAB_NODES = 200
TAB_RUNS = 20


def _wide_plan(n: int) -> dict:
    """A plan of n nodes as a report over many tables gives one: an Append of n - 1 filtered scans."""
    scans = [
        {
            "Node Type": "Seq Scan",
            "Relation Name": f"part_{i}",
            "Alias": f"part_{i}",
            "Startup Cost": 0.0,
            "Total Cost": 10.0 + i,
            "Plan Rows": 100,
            "Plan Width": 16,
            "Filter": f"((customer = $1) AND (created_at >= $2) AND (region = 'r{i}'::text))",
        }
        for i in range(n - 1)
    ]
    total = sum(s["Total Cost"] for s in scans)
    return {
        "Plan": {
            "Node Type": "Append",
            "Startup Cost": 0.0,
            "Total Cost": total,
            "Plan Rows": 100 * (n - 1),
            "Plan Width": 16,
            "Plans": scans,
        }
    }


def _plan_tab(server_id: int, statement_id: int, runs: int) -> PlanTab:
    """The Plan tab of a statement whose current plan has TAB_NODES nodes, requested through the whole stack
    (middleware, view, selectors, template) as a superuser, beside its statement page."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from bench.pages import _collect_static
    from collectors.plans import shape

    plan = _wide_plan(TAB_NODES)
    new = history_plans.NewPlan(plan, shape.fingerprint(plan), shape.access_paths(plan), TAB_NODES, "generic_plan")
    history_plans.record_plan(server_id, statement_id, new, at=timezone.now(), redact=redact)
    _collect_static()
    user, _ = get_user_model().objects.update_or_create(username="bench-plans", defaults={"is_superuser": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    def timed(url: str) -> tuple[list[float], int]:
        out, size = [], 0
        for i in range(runs + 2):  # two to warm up
            t0 = time.perf_counter()
            response = client.get(url)
            ms = (time.perf_counter() - t0) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")
            size = len(response.content)
            if i >= 2:
                out.append(ms)
        return out, size

    tab_ms, size = timed(reverse("statement-plan", args=[statement_id]))
    page_ms, _ = timed(reverse("statement", args=[statement_id]))
    return PlanTab(TAB_NODES, tab_ms, page_ms, size)


def run(cluster, *, quick: bool = False, log=print) -> PlansRun:
    started = time.perf_counter()
    size = QUICK if quick else FULL
    cluster.execute(f"GRANT pg_read_all_data TO {env.MONITOR_USER}")
    t0 = time.perf_counter()
    app.create(cluster.dsn(env.APP_DB), tables=size.tables, rows=size.rows)
    stmts = app.statements(size.tables, size.rows)
    workload: dict[str, int] = {}
    for s in stmts:
        workload[s.kind] = workload.get(s.kind, 0) + 1
    log(
        f"  {size.tables} tables of {size.rows:,} rows created in {time.perf_counter() - t0:.1f}s; "
        f"{len(stmts)} statements ({', '.join(f'{n} {k}' for k, n in workload.items())})"
    )
    monitor_dsn = cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD)
    by_hand = psycopg.connect(monitor_dsn, autocommit=True, prepare_threshold=None)
    try:
        server_id = _server(cluster, "bench-plans", stmts, seed=1)
        defaults, outcomes = _day("defaults", server_id, by_hand, monitor_dsn, log=log)

        sid, planned = next((sid, o) for sid, o in outcomes.items() if o.planned)
        locked = _locked(cluster, server_id, sid, _relation(planned.access_paths), size.hold_s)
        log(
            f"  locked table {locked.relation}: the console's EXPLAIN gave up after {locked.explain_ms:.0f} ms "
            f"({locked.code}); by hand it waited {locked.bare_ms:.0f} ms, until the holder ended"
        )

        tab = _plan_tab(server_id, sid, runs=5 if quick else TAB_RUNS)
        log(f"  the Plan tab of a {tab.nodes}-node plan: median {sorted(tab.ms)[len(tab.ms) // 2]:.1f} ms")

        worst_id = _server(cluster, "bench-plans-worst", [s for s in stmts if s.reads_only], seed=2)
        app_dsn = cluster.dsn(env.APP_DB)
        names = [1]  # the indexes' version now

        def rename(i: int) -> None:
            app.rename_indexes(app_dsn, tables=size.tables, version=i + 1, previous=names[-1])
            names.append(i + 1)

        try:
            worst, _ = _day("worst case", worst_id, by_hand, monitor_dsn, between=rename, log=log)
        finally:
            if names[-1] != 1:
                app.rename_indexes(app_dsn, tables=size.tables, version=1, previous=names[-1])
    finally:
        by_hand.close()
    return PlansRun(
        quick=quick,
        tables=size.tables,
        rows=size.rows,
        workload=workload,
        plans_settings=dict(settings.PLANS),
        defaults=defaults,
        worst=worst,
        locked=locked,
        seconds=time.perf_counter() - started,
        tab=tab,
    )
