"""One statement's plan, read from its monitored server and stored: what the statement page and the API will ask for.

The text is the one pg_stat_statements keeps (read again from the server, never the stored and redacted one), in
the server's monitored database where the extension is; the EXPLAIN runs in the statement's own database as the
statement's role resolves names (explain.py). Two short connections within one deadline, as a snapshot's, the
second to the address the first dialed; the text is read only within PLANS_MAX_TEXT_BYTES, the plan only within
PLANS_MAX_PLAN_BYTES (explain.py). Whatever keeps a plan from being read is stored as the statement's reason; its
earlier plans stay. A plan job on the plans worker holds a slot of its organization's share of that worker's
threads (plans_slot), as a collection does.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
from django.conf import settings
from django.utils import timezone
from psycopg import sql

from collectors import connection as monitored
from collectors import redact, shares
from collectors.errors import CollectionError, from_query_error, summary
from collectors.plans import hypothetical, shape
from collectors.plans.explain import TOO_LARGE, Trust, Unexplained, explain
from collectors.settings import instance
from history.public import (
    ATTEMPT_OVER_BUDGET,
    ATTEMPT_SERVER_DOWN,
    PLANNED,
    Grant,
    NewPlan,
    PlanBudget,
    PlanRefused,
    Statement,
    budget_reserve,
    budget_settle,
    record_candidates,
    record_plan,
    record_unexplained,
)
from inventory.models import Organization, Server

OVER_SHARE = "over_share"  # a plan job not run: its organization's share of the plans worker was in use


@dataclass(frozen=True)
class PlanOutcome:
    planned: bool
    code: str  # history.plans.PLANNED, or why not
    reason: str = ""
    shape_id: int | None = None
    access_paths: list[str] = field(default_factory=list)
    fingerprint: str = ""

    @property
    def server_failed(self) -> bool:
        """The server itself could not be read (its connection, its pg_stat_statements): every other statement of
        it would fail the same way, so a round stops there."""
        return self.code == ATTEMPT_SERVER_DOWN


def _text_sql(schema: str, has_toplevel: bool) -> sql.Composed:
    """The role's name, and the statement's text with its size in bytes: the text only within the size asked."""
    toplevel = sql.SQL(" AND toplevel = %s") if has_toplevel else sql.SQL("")
    return sql.SQL(
        "SELECT (SELECT rolname FROM pg_roles WHERE oid = %s), s.text, s.bytes "
        "FROM (VALUES (1)) AS one(x) LEFT JOIN LATERAL ("
        "SELECT CASE WHEN octet_length(query) <= %s THEN query END AS text, octet_length(query) AS bytes "
        "FROM {}.pg_stat_statements(true) WHERE userid = %s AND dbid = %s AND queryid = %s{} LIMIT 1"
        ") s ON true"
    ).format(sql.Identifier(schema), toplevel)


@dataclass(frozen=True)
class _Read:
    meta: instance.ServerMeta
    role: str | None
    text: str | None  # None: pg_stat_statements no longer holds it, or it is over PLANS_MAX_TEXT_BYTES
    text_bytes: int | None  # its size (None: not held)
    address: str  # the address the connection dialed: the statement's database's is dialed there too


def _text_and_role(conn: psycopg.Connection, statement: Statement) -> _Read:
    meta = instance.read_meta(conn)
    max_bytes = settings.PLANS["MAX_TEXT_BYTES"]
    params = [statement.userid, max_bytes, statement.userid, statement.dbid, statement.queryid]
    if meta.has_info_view:  # toplevel is in the key from 1.9 (PostgreSQL 14)
        params.append(statement.toplevel)
    try:
        role, text, size = conn.execute(_text_sql(meta.extension_schema, meta.has_info_view), params).fetchone()
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading the statement's text") from exc
    if text is not None:  # what was sent, whatever the server said of it
        size = max(size or 0, len(text.encode()))
    if size is not None and size > max_bytes:
        text = None
    return _Read(meta, role, text, size, conn.info.hostaddr)


def _too_long(size_bytes: int) -> Unexplained:
    return Unexplained(
        TOO_LARGE,
        f"the statement's text is {size_bytes:,} bytes, longer than the {settings.PLANS['MAX_TEXT_BYTES']:,} bytes "
        "the console sends to EXPLAIN (PLANS_MAX_TEXT_BYTES)",
    )


def plan_budget() -> PlanBudget:
    cfg = settings.PLANS
    return PlanBudget(
        explains_per_hour=cfg["EXPLAINS_PER_HOUR"],
        planning_ms_per_hour=cfg["PLANNING_S_PER_HOUR"] * 1000.0,
        bytes_per_day=cfg["BYTES_PER_DAY"],
    )


def statement_plan(*, server_id: int, statement_id: int) -> PlanOutcome:
    """EXPLAIN one statement of one server now, within the server's plan budget, and store its plan (or why there
    is none). The EXPLAIN's statement_timeout is what the budget grants: PLANS_STATEMENT_TIMEOUT_MS, or less when
    less is left of the hour's planning time."""
    server = Server.objects.get(pk=server_id)
    statement = Statement.objects.get(server_id=server_id, pk=statement_id)
    at = timezone.now()
    grant = budget_reserve(server_id, plan_budget(), at=at, want_ms=settings.PLANS["STATEMENT_TIMEOUT_MS"])
    if isinstance(grant, PlanRefused):
        return _unexplained(server_id, statement_id, Unexplained(ATTEMPT_OVER_BUDGET, grant.reason), at)
    spent = _Spent()
    try:
        return _plan(server, statement, at, grant, spent)
    finally:
        budget_settle(server_id, grant, used_ms=spent.ms, new_bytes=spent.bytes)


@contextlib.contextmanager
def plans_slot(server_id: int) -> Iterator[str]:
    """A slot of the server's organization's share of the plans workers' threads (ORG_MAX_PLANNING, collectors.shares)
    held for the block: yields "" when it is this job's (or there is no limit, or no such server: the job finds
    that out itself), else the sentence saying why not. One slot a job, a round of top statements as one EXPLAIN:
    what it holds is a thread, up to its connection's deadline when the server fails."""
    organization = Organization.objects.filter(servers__pk=server_id).first()
    limit = organization.planning_limit() if organization is not None else 0
    jobs = f"{limit} plan job{'s' if limit != 1 else ''} of {organization}"
    with shares.held(organization.pk if organization else 0, limit, namespace=shares.PLANS_NAMESPACE) as mine:
        yield "" if mine else f"the plans worker was running {jobs}, its share (ORG_MAX_PLANNING)"


def statement_plan_in_share(*, server_id: int, statement_id: int) -> PlanOutcome:
    """statement_plan for a job of its own on the plans worker (an EXPLAIN asked for): within its organization's
    share of the worker; when the share is in use, Outcome(False, OVER_SHARE, why), nothing stored nor spent
    (the task puts it off)."""
    with plans_slot(server_id) as refused:
        if refused:
            return PlanOutcome(False, OVER_SHARE, refused)
        return statement_plan(server_id=server_id, statement_id=statement_id)


@dataclass
class _Spent:
    ms: float = 0.0  # the EXPLAIN's time, measured around it
    bytes: int = 0


def _plan(server: Server, statement: Statement, at, grant: Grant, spent: _Spent) -> PlanOutcome:
    server_id, statement_id = server.pk, statement.pk
    indexes = None
    try:
        target = monitored.monitoring_target(server)
        budget_s = target.limits().snapshot_s
        deadline = time.monotonic() + budget_s
        try:
            with monitored.connected(target, deadline, budget_s) as conn:
                read = _text_and_role(conn, statement)
        except CollectionError as exc:
            # The console's sentence for the failure, not libpq's words: the reason is shown to every member of the
            # organization, who may not see connection detail (collectors.errors.shown).
            down = Unexplained(ATTEMPT_SERVER_DOWN, f"the server could not be read: {summary(exc.code)}")
            return _unexplained(server_id, statement_id, down, at)
        meta, role, text = read.meta, read.role, read.text
        if text is None and read.text_bytes is not None:
            return _unexplained(server_id, statement_id, _too_long(read.text_bytes), at)
        if text is None or role is None:
            missing = Unexplained(
                "text",
                "pg_stat_statements no longer holds this statement (evicted or reset): it is planned when it is back"
                if text is None
                else "the statement's role no longer exists",
            )
            return _unexplained(server_id, statement_id, missing, at)
        # Where the first connection went: a host name switched meanwhile to another address is not followed.
        there = target.in_database(statement.database_name or target.endpoint.database).pinned(read.address)
        with monitored.connected(there, deadline, budget_s) as conn:
            started = time.monotonic()
            explaining = {  # explain()'s keywords, for the plan and for each candidate costed with hypopg
                "statement_timeout_ms": grant.timeout_ms,
                "lock_timeout_ms": settings.PLANS["LOCK_TIMEOUT_MS"],
                "trust": Trust(tuple(server.plans_trusted_roles), tuple(server.plans_trusted_schemas)),
            }
            try:
                found = explain(conn, text, server_version_num=meta.server_version_num, role=role, **explaining)
                if not isinstance(found, Unexplained):
                    indexes = _candidates(conn, text, found, meta.server_version_num, role, explaining)
            finally:
                spent.ms = (time.monotonic() - started) * 1000.0
    except CollectionError as exc:
        return _unexplained(server_id, statement_id, Unexplained(exc.code, summary(exc.code)), at)
    if isinstance(found, Unexplained):
        if found.code == "timeout":
            found = Unexplained(found.code, f"{found.reason} ({_allowed(grant)})")
        return _unexplained(server_id, statement_id, found, at)
    paths = shape.access_paths(found.plan)
    new = NewPlan(
        plan=found.plan,
        fingerprint=shape.fingerprint(found.plan),
        access_paths=paths,
        node_count=shape.node_count(found.plan),
        method=found.method,
    )
    again = functools.partial(redact.redact, strict=settings.COLLECTOR["REDACT_STRICT"])
    stored = record_plan(server_id, statement_id, new, at=at, redact=again)
    spent.bytes = stored.new_bytes
    if indexes is not None:
        record_candidates(server_id, statement_id, there.endpoint.database, indexes, at=at)
    return PlanOutcome(True, PLANNED, shape_id=stored.shape_id, access_paths=paths, fingerprint=new.fingerprint)


def _candidates(conn, text: str, plan, version: int, role: str, explaining: dict) -> list | None:
    """The indexes the plan's filtered scans ask for, judged on the same connection and within the same grant
    (hypopg's EXPLAINs count as planning); None when they could not be judged (the plan is stored regardless)."""
    try:
        return hypothetical.statement_candidates(
            conn, text, plan, server_version_num=version, role=role, explaining=explaining
        )
    except psycopg.Error:
        return None


def _allowed(grant: Grant) -> str:
    if grant.timeout_ms < settings.PLANS["STATEMENT_TIMEOUT_MS"]:
        return f"{grant.timeout_ms} ms allowed: what was left of the server's planning budget for the hour"
    return (
        f"{grant.timeout_ms} ms allowed (PLANS_STATEMENT_TIMEOUT_MS), {settings.PLANS['LOCK_TIMEOUT_MS']} ms for a lock"
    )


def _unexplained(server_id: int, statement_id: int, found: Unexplained, at) -> PlanOutcome:
    record_unexplained(server_id, statement_id, code=found.code, reason=found.reason, at=at)
    return PlanOutcome(False, found.code, found.reason)
