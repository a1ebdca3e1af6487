"""A normalized statement's generic plan, from the monitored server, without running the statement.

pg_stat_statements keeps texts with `$1` for constants, and PostgreSQL plans exactly those: the text is made a
prepared statement with parameters of unknown type, in one Parse message of the extended protocol, and
`EXPLAIN (FORMAT JSON) EXECUTE` plans it with NULLs under `plan_cache_mode = force_generic_plan`, on every version.
No extension, no logs, never `ANALYZE`. A Parse message holds one statement: the server refuses a text holding a
second one, whatever the console's own reading of it (statement.py), and the prepared statement is only ever
planned, never executed. (`EXPLAIN (GENERIC_PLAN)` of 16 is not used: sent in the simple protocol it would run
whatever follows a semicolon, and in the extended protocol its parameters must be bound, and the planner folds
the values bound.)

The monitored server is a customer's production. Every EXPLAIN runs in its own read-only transaction (PostgreSQL
plans DML there and never executes it) under statement_timeout and lock_timeout (planning DML takes a
row-exclusive lock on its target), with the search path of the statement's role, so that a name resolves as it did
for the application; while that path is in effect, the console sends nothing of its own but the Parse and the
EXPLAIN EXECUTE of its prepared statement, whose name it chose. Only a text that statement.classify accepts is
sent: one statement of a kind EXPLAIN plans. Whatever cannot be explained gets its reason, never a blank.

Where the DBA installed the EXPLAIN helper in the statement's database (explain_helper.sql: a SECURITY DEFINER
function of a role that may read and write the tables, never a superuser), the plan is asked of it instead, within
the same transaction and timeouts: the statements the monitoring role may not read, and DML, get their plans
without the role holding those privileges.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.conf import settings as django_settings
from psycopg import errors as pgerrors
from psycopg import generators, pq, sql

from collectors.errors import OutOfTime, ServerSilent
from collectors.plans import user_code
from collectors.plans.statement import NotExplainable, classify
from collectors.sql_names import quote_ident

TEXT_OID = 25  # the type given to a parameter nothing in the text constrains
METHOD = "prepare"  # a prepared statement's generic plan; "generic_plan", EXPLAIN (GENERIC_PLAN), before issue 52
HELPER = "pgconsole.explain_generic"
HELPER_SQL = Path(__file__).with_name("explain_helper.sql")
DEFAULT_SEARCH_PATH = '"$user", public'
SEVERAL_STATEMENTS = "cannot insert multiple commands into a prepared statement"  # the server refuses the Parse
_names = itertools.count(1)


@dataclass(frozen=True)
class Plan:
    plan: dict  # EXPLAIN (FORMAT JSON)'s one plan: {"Plan": {...}, ...}
    method: str  # prepare (METHOD); generic_plan in plans read before issue 52
    search_path: str  # as the statement's role resolves names
    via_helper: bool = False  # planned by the EXPLAIN helper (explain_helper.sql) rather than the role itself


@dataclass(frozen=True)
class Trust:
    """What a server's DBA trusts to run while the console plans, besides PostgreSQL's and the superusers' code."""

    roles: tuple[str, ...] = ()
    schemas: tuple[str, ...] = ()


NO_TRUST = Trust()


@dataclass(frozen=True)
class Unexplained:
    code: str  # one of REASONS, or statement.NotExplainable's code
    reason: str


REASONS = {
    "permission": "the monitoring role may not read a table the statement uses",
    "gone": "a table, column or function the statement uses no longer exists",
    "timeout": "planning took longer than its timeout, or waited for a lock",
    "parameters": "the type of a parameter cannot be inferred from the text",
    "syntax": "the text is not valid SQL for this server",
    "too_large": "the server's plan is larger than the console stores",
    "error": "the server refused to plan it",
}


def role_search_path(conn: psycopg.Connection, role: str) -> str:
    """The search path the role's sessions start with in this database: its own setting for this database, else its
    own, else the database's, else "$user", public; "$user" made the role's name, so that the monitoring role's
    session resolves the names as the role's would."""
    row = conn.execute(
        """
        SELECT substr(s, length('search_path=') + 1)
        FROM pg_db_role_setting d
        JOIN LATERAL unnest(d.setconfig) AS s ON s LIKE 'search_path=%%'
        LEFT JOIN pg_roles r ON r.oid = d.setrole
        WHERE (r.rolname = %s OR d.setrole = 0)
          AND d.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
        ORDER BY d.setrole = 0, d.setdatabase = 0
        LIMIT 1
        """,
        (role,),
    ).fetchone()
    path = row[0] if row else DEFAULT_SEARCH_PATH
    return ", ".join(quote_ident(role) if part in ("$user", '"$user"') else part for part in _split(path))


# Whether this database has the EXPLAIN helper and the session's role may call it, as a SQL expression ("test
# connection" asks it too): looked up in the catalogs, as a schema the role may not use makes to_regprocedure fail
# rather than answer. Only the helper explain_helper.sql installs: SECURITY DEFINER, in a schema a superuser owns
# (a schema named pgconsole that a user made, and a function of theirs in it, would otherwise run as the monitoring
# role with whatever text the console hands it).
HELPER_USABLE_SQL = """EXISTS (
    SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_roles o ON o.oid = n.nspowner
    WHERE n.nspname = 'pgconsole' AND p.proname = 'explain_generic' AND p.proargtypes = '25 25'::oidvector
      AND p.prosecdef AND o.rolsuper
      AND has_schema_privilege(n.oid, 'USAGE') AND has_function_privilege(p.oid, 'EXECUTE'))"""


def helper_usable(conn: psycopg.Connection) -> bool:
    """Whether this database has the EXPLAIN helper and the session's role may call it."""
    return conn.execute(f"SELECT {HELPER_USABLE_SQL}").fetchone()[0]


def _split(path: str) -> list[str]:
    """A search_path's elements, split at the commas outside double quotes."""
    parts, current, quoted = [], [], False
    for c in path:
        if c == '"':
            quoted = not quoted
        if c == "," and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def explain(
    conn: psycopg.Connection,
    text: str,
    *,
    server_version_num: int,
    role: str,
    statement_timeout_ms: int,
    lock_timeout_ms: int,
    trust: Trust = NO_TRUST,
) -> Plan | Unexplained:
    """The generic plan of the statement `text` (as pg_stat_statements keeps it, not redacted) as `role` would have it
    planned, or why there is none: never when planning it could run code a user of the server wrote, but for the
    roles and schemas `trust` names (user_code.py). `conn` is an autocommit connection to the statement's
    database."""
    statement = classify(text, server_version_num)
    if isinstance(statement, NotExplainable):
        return Unexplained(statement.code, statement.reason)
    settings = ()
    via_helper = False
    types: list[int] = [0] * statement.parameters  # what Parse is told of each parameter's type; 0: infer it
    try:
        search_path = role_search_path(conn, role)
        settings = (f"{statement_timeout_ms}ms", f"{lock_timeout_ms}ms", search_path)
        found = user_code.census(
            conn, trusted_roles=list(trust.roles), trusted_schemas=list(trust.schemas), timeout_ms=statement_timeout_ms
        )
        untrusted = user_code.planning_could_call(found, statement, search_path)
        if untrusted is not None:
            return Unexplained(
                "user_code",
                f"planning it could run {untrusted.said()} with the console's privileges: it is planned once the "
                "server's settings trust that role or schema",
            )
        via_helper = helper_usable(conn)
        while True:
            try:
                plan = _planned(conn, statement.text, settings, via_helper, types)
                break
            except pgerrors.IndeterminateDatatype as exc:
                if via_helper or not _typed_as_text(types, exc):
                    raise
    except psycopg.Error as exc:
        return _unexplained(exc)
    return Plan(plan=plan, method=METHOD, search_path=search_path, via_helper=via_helper)


def _planned(conn: psycopg.Connection, text: str, settings: tuple[str, str, str], via_helper: bool, types: list[int]):
    """The plan, in a read-only transaction of its own under the timeouts and the search path of `settings`."""
    name, parsed = f"pgconsole_plan_{os.getpid()}_{next(_names)}", False
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(
                "SELECT pg_catalog.set_config('statement_timeout', %s, true), "
                "pg_catalog.set_config('lock_timeout', %s, true), "
                "pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true), "
                "pg_catalog.set_config('search_path', %s, true)",
                settings,
            )
            if via_helper:
                return _helper_plan(conn, text, settings[2])
            parameters = _parse_one(conn, name, text, types)
            parsed = True
            return _prepared_plan(conn, name, parameters)
    finally:
        if parsed and not conn.closed:
            _deallocate(conn, name)  # prepared statements outlive the transaction


def _typed_as_text(types: list[int], exc: psycopg.Error) -> bool:
    """Whether the parameter whose type the server could not determine ("could not determine data type of
    parameter $2": nothing in the text constrains it, as in `$1 IS NULL`) was given the type text, for another Parse;
    False when it cannot be told which, or it was already."""
    found = re.search(r"\$(\d+)", exc.diag.message_primary or "")
    number = int(found[1]) if found else 0
    if not 1 <= number <= len(types) or types[number - 1]:
        return False
    types[number - 1] = TEXT_OID
    return True


def _parse_one(conn: psycopg.Connection, name: str, text: str, types: list[int]) -> int:
    """`text` made the prepared statement `name` by one Parse message of the extended protocol, which the server
    refuses for a text holding more than one statement; its number of parameters, as the server counts them."""
    encoding = conn.info.encoding
    with conn.lock:
        conn.pgconn.send_prepare(name.encode(), text.encode(encoding), param_types=types or None)
        _succeeded(conn.wait(generators.execute(conn.pgconn)), encoding)
        conn.pgconn.send_describe_prepared(name.encode())
        (described,) = _succeeded(conn.wait(generators.execute(conn.pgconn)), encoding)
    return described.nparams


def _succeeded(results: list, encoding: str) -> list:
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise pgerrors.error_from_result(result, encoding=encoding)
    return results


TOO_LARGE = "too_large"  # a plan over PLANS_MAX_PLAN_BYTES (and, in service.py, a text over PLANS_MAX_TEXT_BYTES)


class PlanTooLarge(psycopg.DataError):
    """The server's plan is larger than the console reads (PLANS_MAX_PLAN_BYTES): not parsed, not stored."""

    def __init__(self, size_bytes: int, max_bytes: int):
        super().__init__(
            f"{_size_text(size_bytes)} of EXPLAIN output, over the {_size_text(max_bytes)} a plan may take "
            "(PLANS_MAX_PLAN_BYTES)"
        )


def _size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 / 10 else f"{n:,} bytes"


def _bounded_plan(raw: bytes | str | None, size_bytes: int) -> dict:
    """EXPLAIN (FORMAT JSON)'s one plan from its text, parsed only when no larger than PLANS_MAX_PLAN_BYTES (the
    size the reply says, and the text's own: a server may send more than it says)."""
    max_bytes = django_settings.PLANS["MAX_PLAN_BYTES"]
    if raw is not None:
        size_bytes = max(size_bytes, len(raw.encode() if isinstance(raw, str) else raw))
    if raw is None or size_bytes > max_bytes:
        raise PlanTooLarge(size_bytes, max_bytes)
    return json.loads(raw)[0]


def _helper_plan(conn: psycopg.Connection, text: str, search_path: str) -> dict:
    """The EXPLAIN helper's plan, measured on the server, which sends it only within PLANS_MAX_PLAN_BYTES. Sent
    under the role's search path: every name in it is qualified."""
    size = "pg_catalog.octet_length(p.plan::pg_catalog.text)"
    query = sql.SQL(
        f"SELECT {size}, CASE WHEN {size} OPERATOR(pg_catalog.<=) %s::pg_catalog.int4 THEN p.plan::pg_catalog.text END "
        "FROM {}(%s::pg_catalog.text, %s::pg_catalog.text) AS p(plan)"
    ).format(sql.Identifier(*HELPER.split(".")))
    max_bytes = django_settings.PLANS["MAX_PLAN_BYTES"]
    size_bytes, raw = conn.execute(query, (max_bytes, text, search_path), prepare=False).fetchone()
    return _bounded_plan(raw, size_bytes)


def _prepared_plan(conn: psycopg.Connection, name: str, parameters: int) -> dict:
    """The prepared statement's generic plan. An EXPLAIN cannot be measured in SQL: its reply is taken as the
    bytes libpq received (psycopg's json loader never runs), and measured before it is parsed."""
    execute = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}").format(sql.Identifier(name))
    if parameters:
        execute += sql.SQL("(") + sql.SQL(", ").join([sql.SQL("NULL")] * parameters) + sql.SQL(")")
    with conn.cursor() as cur:
        cur.execute(execute, prepare=False)
        result = cur.pgresult
        if result is None or result.ntuples != 1 or result.nfields != 1:
            raise psycopg.DataError("EXPLAIN answered otherwise than with one plan")
        raw = result.get_value(0, 0)
        return _bounded_plan(raw, 0 if raw is None else len(raw))


def _deallocate(conn: psycopg.Connection, name: str) -> None:
    """Prepared statements outlive a rolled-back transaction: the session's one is dropped either way."""
    try:
        conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)), prepare=False)
    except psycopg.Error:
        pass  # PREPARE itself failed, or the connection is gone and the prepared statement with it


def _unexplained(exc: psycopg.Error) -> Unexplained:
    first = (exc.diag.message_primary or str(exc)).splitlines()[0]
    if first.startswith(SEVERAL_STATEMENTS):  # the server's own reading of the text: more than one statement
        return Unexplained("several", f"the text holds more than one statement: {first}")
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        code = "permission"
    elif isinstance(exc, pgerrors.UndefinedTable | pgerrors.UndefinedColumn | pgerrors.UndefinedFunction):
        code = "gone"
    elif isinstance(exc, pgerrors.QueryCanceled | pgerrors.LockNotAvailable | OutOfTime | ServerSilent):
        code = "timeout"
    elif isinstance(exc, pgerrors.IndeterminateDatatype | pgerrors.AmbiguousParameter):
        code = "parameters"
    elif isinstance(exc, pgerrors.SyntaxError):
        code = "syntax"
    elif isinstance(exc, PlanTooLarge):
        code = TOO_LARGE
    else:
        code = "error"
    return Unexplained(code, f"{REASONS[code]}: {first}")
