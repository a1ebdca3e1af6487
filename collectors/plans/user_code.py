"""Whether planning a statement could run code that an ordinary user of the monitored server wrote, with the console's
privileges: then it is not planned, and its reason names the code and its owner.

PostgreSQL's planner runs code while it plans: it folds calls of immutable functions on constants, evaluates stable
ones to estimate selectivity, inlines SQL functions, and folds the expressions a table carries (its defaults, the
expressions and predicates of its indexes, its row security policies, its views' queries, its extended statistics'
expressions). A function a user of the server wrote would run as the monitoring role, or as the EXPLAIN helper's
owner, who may read every table: a read-only transaction stops writes, not NOTIFY, advisory locks, set_config or
dblink. So the console plans a statement only when nothing of the kind can be reached:

* Trusted code is PostgreSQL's own, an extension's (both owned by a superuser), and what the DBA names trusted on
  the server (its roles, or its schemas whole). Everything else is untrusted: a function, and an operator, cast or
  domain check implemented by one.
* A statement is refused when its text names an untrusted function, or a domain or type an untrusted cast or check
  belongs to; when an operator run of its text holds the symbol of an untrusted operator; when it names a relation
  that is built on untrusted code (the relation's own expressions, its partitions', the relations its views and
  policies read, its foreign server's owner; its defaults only for a statement that may write); and whatever it
  names, when an untrusted function or operator has the
  name of a trusted one in a schema of the statement role's search path (an overload that matches better wins:
  PostgreSQL's own SQL functions and every implicit `=` would call it), or an untrusted cast applies implicitly.

Names are matched as the text spells them, not as PostgreSQL resolves them: a statement naming `lower` is refused
when any schema holds an untrusted `lower`, even one the path never reaches. The catalogs are read once per
statement, in a read-only transaction under the plans' statement timeout, under the console's own search path."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from collectors.plans.statement import Explainable

# The census: every untrusted routine, operator and cast, the relations built on one, the untrusted names that
# shadow trusted ones. %(roles)s and %(schemas)s: what the DBA trusts besides the superusers.
CENSUS_SQL = """
WITH RECURSIVE trusted_role AS (
    SELECT oid FROM pg_roles WHERE rolsuper OR rolname = ANY(%(roles)s::text[])
), untrusted_function AS (
    SELECT p.oid, p.proname::text AS name, n.nspname::text AS schema, pg_get_userbyid(p.proowner)::text AS owner
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE p.proowner NOT IN (SELECT oid FROM trusted_role) AND n.nspname::text <> ALL(%(schemas)s::text[])
), untrusted_operator AS (
    SELECT o.oid, o.oprname::text AS name, n.nspname::text AS schema, f.owner, f.schema || '.' || f.name AS function
    FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace JOIN untrusted_function f ON f.oid = o.oprcode
), untrusted_domain AS (
    SELECT DISTINCT t.oid, t.typname::text AS name, f.owner, f.schema || '.' || f.name AS function
    FROM pg_constraint c JOIN pg_type t ON t.oid = c.contypid
    JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass AND d.objid = c.oid
    JOIN untrusted_function f ON d.refclassid = 'pg_proc'::regclass AND f.oid = d.refobjid
), base AS (
    -- A relation whose own objects call untrusted code: what the planner folds of it. A default (or a stored
    -- generated column) is folded only when a statement writes the relation.
    SELECT CASE d.classid
               WHEN 'pg_class'::regclass
                   THEN coalesce((SELECT i.indrelid FROM pg_index i WHERE i.indexrelid = d.objid), d.objid)
               WHEN 'pg_attrdef'::regclass THEN (SELECT a.adrelid FROM pg_attrdef a WHERE a.oid = d.objid)
               WHEN 'pg_constraint'::regclass
                   THEN (SELECT nullif(c.conrelid, 0) FROM pg_constraint c WHERE c.oid = d.objid)
               WHEN 'pg_policy'::regclass THEN (SELECT p.polrelid FROM pg_policy p WHERE p.oid = d.objid)
               WHEN 'pg_rewrite'::regclass THEN (SELECT r.ev_class FROM pg_rewrite r WHERE r.oid = d.objid)
               WHEN 'pg_statistic_ext'::regclass THEN (SELECT s.stxrelid FROM pg_statistic_ext s WHERE s.oid = d.objid)
           END AS relid,
           coalesce(f.schema || '.' || f.name, o.function, t.function) AS function,
           coalesce(f.owner, o.owner, t.owner) AS owner,
           d.classid = 'pg_attrdef'::regclass AND NOT EXISTS (
               SELECT FROM pg_attrdef a JOIN pg_attribute c ON c.attrelid = a.adrelid AND c.attnum = a.adnum
               WHERE a.oid = d.objid AND c.attgenerated = 'v'
           ) AS on_write
    FROM pg_depend d
    LEFT JOIN untrusted_function f ON d.refclassid = 'pg_proc'::regclass AND f.oid = d.refobjid
    LEFT JOIN untrusted_operator o ON d.refclassid = 'pg_operator'::regclass AND o.oid = d.refobjid
    LEFT JOIN untrusted_domain t ON d.refclassid = 'pg_type'::regclass AND t.oid = d.refobjid
    WHERE d.classid <> 'pg_trigger'::regclass  -- a trigger runs when the statement does, never while it is planned
      AND (f.oid IS NOT NULL OR o.oid IS NOT NULL OR t.oid IS NOT NULL)
    UNION
    SELECT ft.ftrelid, 'foreign server ' || s.srvname, pg_get_userbyid(s.srvowner)::text, false
    FROM pg_foreign_table ft JOIN pg_foreign_server s ON s.oid = ft.ftserver
    WHERE s.srvowner NOT IN (SELECT oid FROM trusted_role)
), tainted (relid, origin) AS (
    SELECT relid, relid FROM base WHERE relid IS NOT NULL
    UNION
    -- What reads a tainted relation: its views and rules, the policies that read it, its parents (a query of a
    -- partitioned or inherited table plans its children).
    SELECT r.relid, t.origin
    FROM tainted t
    CROSS JOIN LATERAL (
        SELECT CASE d.classid
                   WHEN 'pg_rewrite'::regclass THEN (SELECT w.ev_class FROM pg_rewrite w WHERE w.oid = d.objid)
                   WHEN 'pg_policy'::regclass THEN (SELECT p.polrelid FROM pg_policy p WHERE p.oid = d.objid)
               END AS relid
        FROM pg_depend d
        WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid
          AND d.classid IN ('pg_rewrite'::regclass, 'pg_policy'::regclass)
        UNION ALL
        SELECT i.inhparent FROM pg_inherits i WHERE i.inhrelid = t.relid
    ) r
    WHERE r.relid IS NOT NULL AND r.relid <> t.relid
)
SELECT 'function', name, schema, owner, '' FROM untrusted_function
UNION ALL
SELECT 'operator', name, schema, owner, function FROM untrusted_operator
UNION ALL
SELECT 'shadow', f.name, f.schema, f.owner, ''
FROM untrusted_function f
WHERE EXISTS (SELECT FROM pg_proc p WHERE p.proname = f.name AND p.oid NOT IN (SELECT oid FROM untrusted_function))
UNION ALL
SELECT 'shadow', o.name, o.schema, o.owner, o.function
FROM untrusted_operator o
WHERE EXISTS (SELECT FROM pg_operator p WHERE p.oprname = o.name AND p.oid NOT IN (SELECT oid FROM untrusted_operator))
UNION ALL
SELECT CASE WHEN c.castcontext IN ('i', 'a') THEN 'implicit cast' ELSE 'cast' END,
       format_type(c.castsource, NULL) || ' AS ' || format_type(c.casttarget, NULL),
       st.typname::text || ' ' || tt.typname::text, f.owner, f.schema || '.' || f.name
FROM pg_cast c JOIN untrusted_function f ON f.oid = c.castfunc
JOIN pg_type st ON st.oid = c.castsource JOIN pg_type tt ON tt.oid = c.casttarget
UNION ALL
SELECT 'domain', name, '', owner, function FROM untrusted_domain
UNION ALL
SELECT CASE WHEN bool_and(b.on_write) THEN 'written relation' ELSE 'relation' END, c.relname::text,
       n.nspname::text, min(b.owner), min(b.function)
FROM tainted t JOIN base b ON b.relid = t.origin
JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
GROUP BY t.relid, c.relname, n.nspname
LIMIT %(limit)s
"""
WRITES = frozenset({"insert", "update", "merge", "with"})  # the kinds that may write a table (WITH may hold DML)
# Whether the database holds anything the census could find: a routine or a foreign server of a role not trusted.
# Most databases hold none, and this look costs a tenth of the census on a new connection (catalog caches cold).
ANY_UNTRUSTED_SQL = """
WITH trusted_role AS (SELECT oid FROM pg_roles WHERE rolsuper OR rolname = ANY(%(roles)s::text[]))
SELECT EXISTS (
           SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.proowner NOT IN (SELECT oid FROM trusted_role) AND n.nspname::text <> ALL(%(schemas)s::text[]))
       OR EXISTS (SELECT FROM pg_foreign_server s WHERE s.srvowner NOT IN (SELECT oid FROM trusted_role))
"""
LIMIT = 100_000  # rows of the census: past it a database is read as holding untrusted code everywhere

# Operators the grammar applies without their symbol in the text: IN, ANY, BETWEEN, CASE, NULLIF, IS DISTINCT FROM,
# LIKE, ILIKE, SIMILAR TO, ORDER BY, GROUP BY and DISTINCT. An untrusted operator of these names reached by the
# path is a shadow; named with its schema (OPERATOR(s.=)) its symbol is in the text.


@dataclass(frozen=True)
class Untrusted:
    kind: str  # function | operator | shadow | cast | implicit cast | domain | relation | written relation
    name: str
    schema: str  # for a cast: the source and target types' names
    owner: str
    function: str = ""  # the untrusted function it runs, where it is not the object itself

    def said(self) -> str:
        implemented = f", which runs {self.function}()" if self.function else ""
        if self.kind == "function":
            return f"function {self.schema}.{self.name}() of role {self.owner}"
        if self.kind == "operator":
            return f"operator {self.schema}.{self.name}{implemented} of role {self.owner}"
        if self.kind in ("relation", "written relation"):
            return f"{self.schema}.{self.name}, built on code of role {self.owner} ({self.function})"
        if self.kind in ("cast", "implicit cast"):
            return f"the {self.kind} {self.name}{implemented} of role {self.owner}"
        if self.kind == "domain":
            return f"domain {self.name}, whose check{implemented} of role {self.owner}"
        what = f"operator {self.schema}.{self.name}" if self.function else f"function {self.schema}.{self.name}()"
        return f"{what}{implemented} of role {self.owner}, named like a trusted one"


@dataclass(frozen=True)
class Census:
    """The untrusted code of one database, as the console sees it."""

    found: tuple[Untrusted, ...]
    complete: bool = True  # False: cut at LIMIT rows, so that anything may be untrusted


def census(
    conn: psycopg.Connection, *, trusted_roles: list[str], trusted_schemas: list[str], timeout_ms: int
) -> Census:
    """The untrusted code of the database `conn` is connected to, read in a read-only transaction of its own."""
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        # No JIT, even on a session that did not pin it off: compiling this query costs seconds of the server's CPU.
        conn.execute(
            "SELECT pg_catalog.set_config('statement_timeout', %s, true), pg_catalog.set_config('jit', 'off', true)",
            (f"{timeout_ms}ms",),
        )
        params = {"roles": trusted_roles, "schemas": trusted_schemas, "limit": LIMIT + 1}
        if not conn.execute(ANY_UNTRUSTED_SQL, params).fetchone()[0]:
            return Census(())
        rows = conn.execute(CENSUS_SQL, params).fetchall()
    return Census(tuple(Untrusted(*row) for row in rows[:LIMIT]), complete=len(rows) <= LIMIT)


def _path_schemas(search_path: str) -> set[str]:
    """The schemas of a search path as the server reads them (quoted elements unquoted, others folded)."""
    schemas = set()
    for part in search_path.split(","):
        part = part.strip()
        quoted = len(part) >= 2 and part[0] == part[-1] == '"'
        schemas.add(part[1:-1].replace('""', '"') if quoted else part.lower())
    return schemas | {"pg_catalog"}


def _in_operators(symbol: str, operators: tuple[str, ...]) -> bool:
    runs = [*operators, *("<>" for run in operators if "!=" in run)]  # the lexer reads != as <>
    return any(symbol in run for run in runs)


def planning_could_call(found: Census, statement: Explainable, search_path: str) -> Untrusted | None:
    """The first untrusted code that planning `statement` under `search_path` could run, or None."""
    if not found.complete:
        return Untrusted("relation", "every relation", "", "an untrusted role", "the database holds too much to read")
    path = _path_schemas(search_path)
    names = statement.names
    for untrusted in found.found:
        if untrusted.kind in ("shadow", "implicit cast"):
            if untrusted.kind == "implicit cast" or untrusted.schema in path:
                return untrusted
            continue
        if untrusted.kind == "operator":
            if _in_operators(untrusted.name, statement.operators):
                return untrusted
            continue
        named = untrusted.name in names or statement.unicode_names
        if untrusted.kind == "written relation":
            named = named and statement.kind in WRITES
        if untrusted.kind == "cast":
            named = statement.unicode_names or bool(set(untrusted.schema.split(" ")) & names)
        if named:
            return untrusted
    return None
