"""A normalized statement's generic plan, from the monitored server, without running the statement.

pg_stat_statements keeps texts with `$1` for constants, and PostgreSQL plans exactly those: `EXPLAIN (GENERIC_PLAN)`
from 16; before 16, `PREPARE` with parameters of unknown type and `EXPLAIN EXECUTE` with NULLs under
`plan_cache_mode = force_generic_plan`. No extension, no logs, never `ANALYZE`.

The monitored server is a customer's production. Every EXPLAIN runs in its own read-only transaction (PostgreSQL
plans DML there and never executes it) under statement_timeout and lock_timeout (planning DML takes a
row-exclusive lock on its target), with the search path of the statement's role, so that a name resolves as it did
for the application. Only a text that statement.classify accepts is sent: one statement of a kind EXPLAIN plans.
Whatever cannot be explained gets its reason, never a blank.

Where the DBA installed the EXPLAIN helper in the statement's database (explain_helper.sql: a SECURITY DEFINER
function of a role that may read and write the tables, never a superuser), the plan is asked of it instead, within
the same transaction and timeouts: the statements the monitoring role may not read, and DML, get their plans
without the role holding those privileges.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from readings.errors import OutOfTime, ServerSilent
from readings.plans.statement import NotExplainable, Statement, classify
from readings.sql_names import quote_ident

GENERIC_PLAN_FROM = 160000
HELPER = "pgconsole.explain_generic"
HELPER_SQL = Path(__file__).with_name("explain_helper.sql")
DEFAULT_SEARCH_PATH = '"$user", public'
_names = itertools.count(1)


@dataclass(frozen=True)
class Plan:
    plan: dict  # EXPLAIN (FORMAT JSON)'s one plan: {"Plan": {...}, ...}
    method: str  # generic_plan (16+) or prepare (13-15)
    search_path: str  # as the statement's role resolves names
    via_helper: bool = False  # planned by the EXPLAIN helper (explain_helper.sql) rather than the role itself


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
# rather than answer.
HELPER_USABLE_SQL = """EXISTS (
    SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'pgconsole' AND p.proname = 'explain_generic' AND p.proargtypes = '25 25'::oidvector
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
) -> Plan | Unexplained:
    """The generic plan of the statement `text` (as pg_stat_statements keeps it, not redacted) as `role` would have it
    planned, or why there is none. `conn` is an autocommit connection to the statement's database."""
    statement = classify(text, server_version_num)
    if isinstance(statement, NotExplainable):
        return Unexplained(statement.code, statement.reason)
    search_path = role_search_path(conn, role)
    name = f"pgconsole_plan_{os.getpid()}_{next(_names)}"
    method = "generic_plan" if server_version_num >= GENERIC_PLAN_FROM else "prepare"
    via_helper = False
    try:
        via_helper = helper_usable(conn)
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(
                "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true), "
                "set_config('search_path', %s, true), set_config('plan_cache_mode', 'force_generic_plan', true)",
                (f"{statement_timeout_ms}ms", f"{lock_timeout_ms}ms", search_path),
            )
            if via_helper:
                query = sql.SQL("SELECT {}(%s, %s)").format(sql.Identifier(*HELPER.split(".")))
                plan = conn.execute(query, (statement.text, search_path), prepare=False).fetchone()[0][0]
            elif method == "generic_plan":
                plan = _generic_plan(conn, statement)
            else:
                plan = _prepared_plan(conn, statement, name)
    except psycopg.Error as exc:
        return _unexplained(exc)
    finally:
        if method == "prepare" and not via_helper and not conn.closed:
            _deallocate(conn, name)
    return Plan(plan=plan, method=method, search_path=search_path, via_helper=via_helper)


def _generic_plan(conn: psycopg.Connection, statement: Statement) -> dict:
    # No parameters given: psycopg sends the text as it is, in the simple protocol, so that $1 stays a placeholder
    # of the text (the extended protocol would take it for a parameter of its own, never bound).
    query = sql.SQL("EXPLAIN (GENERIC_PLAN, FORMAT JSON) ") + sql.SQL(statement.text)
    return conn.execute(query, prepare=False).fetchone()[0][0]


def _prepared_plan(conn: psycopg.Connection, statement: Statement, name: str) -> dict:
    conn.execute(sql.SQL("PREPARE {} AS ").format(sql.Identifier(name)) + sql.SQL(statement.text), prepare=False)
    nulls = sql.SQL(", ").join([sql.SQL("NULL")] * statement.parameters)
    execute = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}").format(sql.Identifier(name))
    if statement.parameters:
        execute += sql.SQL("(") + nulls + sql.SQL(")")
    return conn.execute(execute, prepare=False).fetchone()[0][0]


def _deallocate(conn: psycopg.Connection, name: str) -> None:
    """Prepared statements outlive a rolled-back transaction: the session's one is dropped either way."""
    try:
        conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)), prepare=False)
    except psycopg.Error:
        pass  # PREPARE itself failed, or the connection is gone and the prepared statement with it


def _unexplained(exc: psycopg.Error) -> Unexplained:
    first = (exc.diag.message_primary or str(exc)).splitlines()[0]
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
    else:
        code = "error"
    return Unexplained(code, f"{REASONS[code]}: {first}")
