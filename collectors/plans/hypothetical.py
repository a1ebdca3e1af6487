"""Candidate indexes for a statement's filtered scans (candidates.py), judged on its server: with hypopg where the
statement's database has it (the plan's cost with and without the hypothetical index, as the planner itself
weighs it: "cost-verified"), else from pg_stats alone ("estimated", PgHero's way).

A candidate's columns: the filter's equality columns, the most selective first by pg_stats (the share of rows one
value keeps: (1 − null_frac) / distinct values), then its most selective range column, then the keys of a sort
right above the scan (ORDER BY) where the index can hand the rows over in that order: with no range column, or
the range on the sort's first key (after another range, an index's order serves nothing). A table smaller than
MIN_ROWS rows, or a filter that keeps more than MAX_SELECTIVITY of the table's rows (a status of three values
spread evenly keeps a third), gets no index, and the candidate says why.

Estimated, an index reads the rows its filter keeps at RANDOM_PAGE_COST each, against the scan's cost now: a
sequential scan reads the whole table; an index scan that filters fetches the rows its own condition keeps, and
the new index fetches only those the whole filter keeps. A sort the index would spare is not counted (the
planner's own costing, with hypopg, counts it).

A partition's candidate names its partition tree (from pg_partition_tree, at most MAX_PARTITIONS relations): the
advisor makes one index of the partitioned table from its partitions' candidates.

Everything runs on the caller's connection to the statement's database, read-only: hypopg's hypothetical
indexes live in that session only (hypopg_reset() drops them before it returns, and closing the connection
would), and no DDL is ever sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import psycopg

from collectors.plans import candidates
from collectors.plans.explain import Plan, Unexplained, explain
from collectors.sql_names import quote_ident

MIN_ROWS = 10_000  # a smaller table is read whole in a moment: no index is advised for it
MAX_SELECTIVITY = 0.05  # a filter keeping more of the table than this is read as fast without an index
RANGE_SELECTIVITY = 1 / 3  # what the planner assumes of a range on an unknown value (DEFAULT_INEQ_SEL)
VERIFIED, ESTIMATED = "cost-verified", "estimated"
RANDOM_PAGE_COST = 4.0  # the planner's default: a row fetched through an index, against a page read in order

HYPOPG_SQL = """
SELECT n.nspname, e.extversion FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'hypopg'
"""
RESOLVE_SQL = "SELECT pg_catalog.to_regclass(%s::pg_catalog.text)::pg_catalog.oid"
TABLE_SQL = """
SELECT n.nspname, c.relname, c.reltuples::float8, CASE WHEN c.relispartition THEN pg_partition_root(c.oid)::oid END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = %s
"""
# A partitioned table's whole tree from its root, parents before their partitions: an index for all of it is made
# on the root only, then on each partition concurrently, then attached (PostgreSQL's "Partition Maintenance").
PARTITIONS_SQL = """
SELECT n.nspname, c.relname, pn.nspname, p.relname, c.relkind
FROM pg_partition_tree(%s::oid) t
JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class p ON p.oid = t.parentrelid LEFT JOIN pg_namespace pn ON pn.oid = p.relnamespace
ORDER BY t.level, n.nspname, c.relname
LIMIT %s
"""
MAX_PARTITIONS = 500  # a larger tree's script is not written: each partition's index is advised on its own
STATS_SQL = """
SELECT attname, null_frac, n_distinct, avg_width FROM pg_stats
WHERE schemaname = %s AND tablename = %s AND attname = ANY(%s::name[]) AND NOT inherited
"""


@dataclass(frozen=True)
class Candidate:
    """One index for one scan of one statement, or why none."""

    schema: str
    table: str
    columns: tuple[str, ...]  # in the index's order ((): none advised)
    method: str  # cost-verified | estimated
    reltuples: float
    selectivity: float | None  # the share of the table's rows the indexed filter keeps (None: not known)
    cost_before: float  # the statement's plan's total cost now
    cost_after: float | None  # with the index (the planner's, or the estimate's); None: no index advised
    size_bytes: int | None  # hypopg's estimate, or from pg_stats' widths
    reason: str = ""  # why no index, when none
    plan_after: dict | None = field(default=None, repr=False)  # the plan with the hypothetical index (hypopg)
    # The table is a partition: {"schema", "table" (its root), "tree": [[schema, table, parent schema, parent
    # table, relkind], ...] parents first (the root's parent None)}; None otherwise, or for a tree too large.
    partition_of: dict | None = None

    @property
    def advised(self) -> bool:
        return bool(self.columns) and self.cost_after is not None and self.cost_after < self.cost_before

    def ddl(self, name: str) -> str:
        cols = ", ".join(quote_ident(c) for c in self.columns)
        table = f"{quote_ident(self.schema)}.{quote_ident(self.table)}"
        return f"CREATE INDEX CONCURRENTLY {quote_ident(name)} ON {table} ({cols});"


def hypopg_installed(conn: psycopg.Connection) -> tuple[str, str] | None:
    """(the schema hypopg is installed in, its version) in this database; None: not installed here."""
    row = conn.execute(HYPOPG_SQL).fetchone()
    return None if row is None else (row[0], row[1])


def _selectivity(stats: dict, column: str, reltuples: float) -> float | None:
    found = stats.get(column)
    if found is None:
        return None
    null_frac, n_distinct = found
    distinct = n_distinct if n_distinct > 0 else -n_distinct * max(reltuples, 1.0)
    return (1.0 - null_frac) / max(distinct, 1.0)


def _table(conn, scan: candidates.Scan, search_path: str):
    """The scanned table, its name resolved as the statement's role resolves it: under that role's search path, the
    one call is PostgreSQL's to_regclass, named with its schema, whose argument and result are cast to PostgreSQL's
    own types (a function or type of that name in a schema of the path is never looked up); the rest is read
    under the console's own path."""
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("SELECT pg_catalog.set_config('search_path', %s, true)", (search_path,))
        oid = conn.execute(RESOLVE_SQL, (quote_ident(scan.relation),)).fetchone()[0]
    return None if oid is None else conn.execute(TABLE_SQL, (oid,)).fetchone()


def partition_tree(conn: psycopg.Connection, root: int) -> dict | None:
    """The partition tree of the partitioned table `root` (Candidate.partition_of); None beyond MAX_PARTITIONS
    relations."""
    rows = conn.execute(PARTITIONS_SQL, (root, MAX_PARTITIONS + 1)).fetchall()
    if not rows or len(rows) > MAX_PARTITIONS:
        return None
    root = rows[0]
    return {"schema": root[0], "table": root[1], "tree": [list(r) for r in rows]}


def _tree(conn: psycopg.Connection, root: int, trees: dict) -> dict | None:
    if root not in trees:
        trees[root] = partition_tree(conn, root)
    return trees[root]


def candidate(conn: psycopg.Connection, scan: candidates.Scan, plan: Plan, trees: dict | None = None) -> Candidate:
    """The index this scan asks for, judged from pg_stats (without cost: the caller costs it). `trees` keeps the
    partition trees read, by root: a plan scanning a table's 500 partitions reads its tree once."""
    cost_before = float(plan.plan["Plan"]["Total Cost"])
    found = _table(conn, scan, plan.search_path)
    if found is None:
        return Candidate("", scan.relation, (), ESTIMATED, 0.0, None, cost_before, None, None, "the table is gone")
    schema, table, reltuples, root = found

    def refused(reason: str, selectivity: float | None = None) -> Candidate:
        return Candidate(schema, table, (), ESTIMATED, reltuples, selectivity, cost_before, None, None, reason)

    if reltuples < 0:
        return refused("the table was never analyzed: without its statistics no index can be judged")
    if reltuples < MIN_ROWS:
        return refused(f"the table holds about {reltuples:,.0f} rows (under {MIN_ROWS:,}): read whole in a moment")
    wanted = list(dict.fromkeys([*scan.equality, *scan.ranges, *scan.order]))
    rows = conn.execute(STATS_SQL, (schema, table, wanted)).fetchall()
    stats = {name: (float(null_frac), float(n_distinct)) for name, null_frac, n_distinct, _ in rows}
    widths = {name: int(width or 8) for name, _, _, width in rows}
    if not stats:
        return refused(
            "pg_stats has no row for its columns: the table was never analyzed, or the monitoring role may not "
            "read them (pg_stats shows only the columns a role may select)"
        )
    equality = sorted((c for c in scan.equality if c in stats), key=lambda c: _selectivity(stats, c, reltuples) or 1.0)
    ranges = [c for c in scan.ranges if c in stats]
    selectivity = 1.0
    for c in equality:
        selectivity *= _selectivity(stats, c, reltuples) or 1.0
    columns = list(equality)
    if ranges:
        columns.append(ranges[0])
        selectivity *= RANGE_SELECTIVITY
    order = [c for c in scan.order if c not in equality]  # a column held to one value is in order already
    if order and (not ranges or order[0] == ranges[0]):
        columns.extend(c for c in order if c not in columns)
    if selectivity > MAX_SELECTIVITY:
        described = ", ".join(
            f"{c} ({(_selectivity(stats, c, reltuples) or 1.0):.0%} of the rows per value)" for c in equality
        )
        return refused(
            f"the filter keeps about {selectivity:.0%} of the table's {reltuples:,.0f} rows"
            + (f" ({described})" if described else "")
            + f": above {MAX_SELECTIVITY:.0%}, the table read in order is as fast as an index",
            selectivity,
        )
    width = sum(widths.get(c, 8) for c in columns)
    size = int(reltuples * (width + 16) / 0.9)  # a leaf tuple per row: its keys, header and pointer; 90% full
    scan_cost = min(scan.total_cost, cost_before)  # under a LIMIT the plan pays for part of the scan only
    kept = min(1.0, selectivity * RANDOM_PAGE_COST)
    if scan.node_type != "Seq Scan":  # it fetches what its index keeps; the new index, what the filter keeps
        fetched = 1.0
        for c in scan.indexed:
            fetched *= (_selectivity(stats, c, reltuples) or 1.0) if c in equality else RANGE_SELECTIVITY
        kept = min(1.0, selectivity / fetched) if fetched > 0 else 1.0
    estimate = cost_before - scan_cost * (1 - kept)
    return Candidate(
        schema,
        table,
        tuple(columns),
        ESTIMATED,
        reltuples,
        selectivity,
        cost_before,
        estimate,
        size,
        partition_of=None if root is None else _tree(conn, root, {} if trees is None else trees),
    )


def verify(
    conn: psycopg.Connection,
    found: Candidate,
    text: str,
    *,
    server_version_num: int,
    role: str,
    explaining: dict,
    hypopg: str,
    version: str = "",
) -> Candidate:
    """The candidate costed by the planner with a hypothetical index (hypopg in schema `hypopg`), in this session
    only; the estimate kept, and why, when the statement cannot be planned again."""
    columns = ", ".join(quote_ident(c) for c in found.columns)
    create = f"CREATE INDEX ON {quote_ident(found.schema)}.{quote_ident(found.table)} ({columns})"
    schema = quote_ident(hypopg)
    try:
        # Arguments cast to the types of hypopg's own functions: an overload a user added in its schema (public, as
        # often as not) is never the better match.
        create_sql = f"SELECT indexrelid FROM {schema}.hypopg_create_index(%s::pg_catalog.text)"
        oid = conn.execute(create_sql, (create,)).fetchone()[0]
        try:
            after = explain(conn, text, server_version_num=server_version_num, role=role, **explaining)
            size = conn.execute(f"SELECT {schema}.hypopg_relation_size(%s::pg_catalog.oid)", (oid,)).fetchone()[0]
        finally:
            conn.execute(f"SELECT {schema}.hypopg_reset()")
    except psycopg.Error as exc:
        # Another version's functions, a privilege revoked: the statistics' estimate stands, and says why.
        named = f"hypopg {version}".strip()
        return replace(found, reason=f"{named} could not cost it ({str(exc).splitlines()[0]}): estimated")
    if isinstance(after, Unexplained):
        return replace(found, reason=f"not planned again with the index ({after.reason}): estimated")
    return replace(
        found,
        method=VERIFIED,
        cost_after=float(after.plan["Plan"]["Total Cost"]),
        size_bytes=int(size),
        plan_after=after.plan,
    )


def statement_candidates(
    conn: psycopg.Connection, text: str, plan: Plan, *, server_version_num: int, role: str, explaining: dict
) -> list[Candidate]:
    """Each filtered scan of the statement's plan, its candidate index judged, and costed with hypopg where the
    database has it."""
    hypopg, version = hypopg_installed(conn) or (None, "")
    trees: dict[int, dict | None] = {}
    out = []
    for scan in candidates.scans(plan.plan):
        found = candidate(conn, scan, plan, trees)
        if found.columns and hypopg is not None:
            found = verify(
                conn,
                found,
                text,
                server_version_num=server_version_num,
                role=role,
                explaining=explaining,
                hypopg=hypopg,
                version=version,
            )
        out.append(found)
    return out
