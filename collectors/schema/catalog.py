"""What the schema reading asks a monitored server: its databases, then each database's tables and indexes with
their statistics (pg_stat_user_tables, pg_stat_user_indexes, pg_index), per server version.

Sizes are the relations' main forks (pg_relation_size: one look at each file's length, no scan); pg_table_size
would add the TOAST, free-space and visibility maps at several times the cost (1.4 s against 0.07 s for 10,000
tables on PostgreSQL 15). The largest tables by the planner's page count are kept when a database holds more than
the reading's cap, and their indexes with them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb

from collectors.unit import Sql

# The snapshot's database first, then the others by name, at most %(limit)s of them (a server may hold thousands:
# the reading takes SCHEMA_MAX_DATABASES and names a few of the rest), each looked at (privilege, statistics) only
# once chosen; the count of all is in every row.
DATABASES_SQL = """
SELECT d.datname, d.datname = current_database(), has_database_privilege(d.oid, 'CONNECT'), s.stats_reset,
       pg_is_in_recovery(), (SELECT count(*) FROM pg_stat_replication), d.total
FROM (
    SELECT oid, datname, count(*) OVER () AS total FROM pg_database
    WHERE NOT datistemplate AND datallowconn
    ORDER BY datname <> current_database(), datname
    LIMIT %(limit)s
) d
LEFT JOIN pg_stat_database s ON s.datid = d.oid
ORDER BY d.datname <> current_database(), d.datname
"""

# The largest tables first (the planner's page count: no file is looked at to order them), at most %(limit)s of
# them; the count of all is in every row, so that a cap reached is said.
TABLES_SQL = """
SELECT s.relid, s.schemaname, s.relname, c.relkind, c.relispartition,
       coalesce(s.seq_scan, 0), coalesce(s.seq_tup_read, 0), coalesce(s.idx_scan, 0), coalesce(s.idx_tup_fetch, 0),
       s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del, s.n_live_tup, s.n_dead_tup,
       greatest(s.last_vacuum, s.last_autovacuum), greatest(s.last_analyze, s.last_autoanalyze),
       CASE WHEN c.relkind = 'p' THEN 0 ELSE pg_relation_size(s.relid) END,
       count(*) OVER ()
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
ORDER BY c.relpages DESC, s.relid
LIMIT %(limit)s
"""

# Indexes of the tables kept, at most %(limit)s. The constraint an index backs is its table's own (a foreign key
# of another table names the unique index it references in conindid too: that one is the referenced table's);
# joined, not looked up per index: pg_constraint has no index on conindid (a lookup per index scanned it whole,
# 135 ms for 1,000 tables). An index the console already knows by oid and name (`known`, a JSON object of oid ->
# name) is not described again: its definition, key names and expressions are over half the read's cost
# (reading.py describes every index again once a day, for what a column's rename changes). The object is looked
# into per index (a jsonb object's keys are sorted: a binary search); joined to a list of the known instead, the
# planner took a nested loop over it, 2,000 × 2,000 comparisons for 1,000 tables (over 100 ms).
_INDEXES_SQL = """
SELECT s.indexrelid, s.relid, s.schemaname, s.indexrelname, s.relname,
       s.idx_scan, s.idx_tup_read, s.idx_tup_fetch, {last_idx_scan},
       s.describe,
       CASE WHEN s.describe THEN pg_get_indexdef(s.indexrelid) END,
       am.amname, i.indkey::int2[], i.indnkeyatts, i.indclass::oid[],
       CASE WHEN s.describe THEN pg_get_expr(i.indpred, i.indrelid) END,
       CASE WHEN s.describe THEN pg_get_expr(i.indexprs, i.indrelid) END,
       i.indisunique, i.indisprimary, i.indisvalid,
       k.conname,
       CASE WHEN c.relkind = 'I' THEN 0 ELSE pg_relation_size(s.indexrelid) END,
       count(*) OVER ()
FROM (
    SELECT u.*, (%(known)s::jsonb ->> u.indexrelid::text) IS DISTINCT FROM u.indexrelname::text AS describe
    FROM pg_stat_user_indexes u
    WHERE u.relid = ANY(%(tables)s::oid[])
) s
JOIN pg_index i ON i.indexrelid = s.indexrelid
JOIN pg_class c ON c.oid = s.indexrelid
JOIN pg_am am ON am.oid = c.relam
LEFT JOIN pg_constraint k
  ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u', 'x')
ORDER BY s.relid, s.indexrelid
LIMIT %(limit)s
"""

# The key columns' names of the indexes described, read once for their tables (a subquery per index cost a fifth
# of the indexes' read for 1,000 tables), only the (table, column number) pairs their keys name: at most the
# indexes kept times 32 keys (INDEX_MAX_KEYS), not every column of their tables (up to 1,600 each). For 1,000
# tables of 8 columns and 2 indexes: 3,000 rows in about 18 ms from the console, against 8,000 in 13 ms unfiltered.
ATTRIBUTES_SQL = """
SELECT a.attrelid, a.attnum, a.attname FROM pg_attribute a
WHERE a.attrelid = ANY(%(tables)s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.attrelid, a.attnum) IN (SELECT * FROM unnest(%(key_tables)s::oid[], %(key_attnums)s::int2[]))
"""

SQL = Sql(
    (
        (
            130000,
            {
                "databases": DATABASES_SQL,
                "tables": TABLES_SQL,
                "indexes": _INDEXES_SQL.format(last_idx_scan="NULL::timestamptz"),
                "attributes": ATTRIBUTES_SQL,
            },
        ),
        # pg_stat_user_indexes.last_idx_scan from 16: when the index was last scanned, whatever the reading saw.
        (
            160000,
            {
                "databases": DATABASES_SQL,
                "tables": TABLES_SQL,
                "indexes": _INDEXES_SQL.format(last_idx_scan="s.last_idx_scan"),
                "attributes": ATTRIBUTES_SQL,
            },
        ),
    )
)


@dataclass(frozen=True)
class Database:
    name: str
    current: bool  # the snapshot's own database, read on its connection
    may_connect: bool
    stats_reset: datetime | None  # pg_stat_database's: a reset of every table's and index's counters


@dataclass(frozen=True)
class TableRead:
    relid: int
    schema_name: str
    name: str
    kind: str
    partition: bool
    counters: tuple[int, ...]  # history.schema.TABLE_COUNTERS
    n_live_tup: int
    n_dead_tup: int
    last_vacuum_at: datetime | None
    last_analyze_at: datetime | None
    size_bytes: int


@dataclass(frozen=True)
class IndexRead:
    relid: int
    table_relid: int
    schema_name: str
    name: str
    table_name: str
    counters: tuple[int, ...]  # history.schema.INDEX_COUNTERS
    last_scan_at: datetime | None  # pg_stat_user_indexes.last_idx_scan (16+)
    described: bool  # False: known to the console, its definition, key names and digests not read again (None)
    definition: str | None
    method: str
    key_attnums: list[int]
    key_columns: list[str | None] | None
    include_count: int
    opclasses: list[int]
    predicate_md5: str | None
    expressions_md5: str | None
    is_unique: bool
    is_primary: bool
    constraint: str
    is_valid: bool
    size_bytes: int


@dataclass(frozen=True)
class DatabaseRead:
    """One database's tables and indexes, and how many it holds beyond what was kept."""

    database: Database
    tables: list[TableRead]
    indexes: list[IndexRead]
    tables_total: int
    indexes_total: int

    @property
    def capped(self) -> bool:
        return self.tables_total > len(self.tables) or self.indexes_total > len(self.indexes)


def _md5(text: str | None) -> str:
    return "" if text is None else hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class ServerRole:
    """What the index advice must know of the server: a standby's scans, or its standbys', are not the primary's."""

    in_recovery: bool
    standbys: int  # walsenders to standbys (pg_stat_replication)


@dataclass(frozen=True)
class Databases:
    """The databases a reading may read: the first `limit` of them (the snapshot's first, then by name), and how
    many there are in all."""

    listed: list[Database]
    total: int


def read_databases(conn, sql: dict, *, limit: int) -> tuple[Databases, ServerRole]:
    """The databases a reading may read, the snapshot's first, at most `limit`, and the server's place in
    replication."""
    rows = conn.execute(sql["databases"], {"limit": limit}).fetchmany(limit)
    databases = [Database(name, current, bool(may), reset) for name, current, may, reset, *_ in rows]
    total = max(int(rows[0][6]), len(rows)) if rows else 0
    return Databases(databases, total), ServerRole(bool(rows[0][4]), int(rows[0][5])) if rows else ServerRole(False, 0)


def read_database(
    conn, sql: dict, database: Database, *, max_tables: int, max_indexes: int, known: dict[int, str] | None = None
) -> DatabaseRead:
    """The database's tables (the largest max_tables) and their indexes (at most max_indexes), on a connection to
    it in a read-only transaction. `known`: index oid -> name of the indexes not to describe again (their
    definition, key names and expressions come back None, `described` False)."""
    rows = conn.execute(sql["tables"], {"limit": max_tables}).fetchall()
    tables = [
        TableRead(
            relid=r[0],
            schema_name=r[1],
            name=r[2],
            kind=r[3],
            partition=r[4],
            counters=tuple(int(v or 0) for v in r[5:13]),
            n_live_tup=r[13] or 0,
            n_dead_tup=r[14] or 0,
            last_vacuum_at=r[15],
            last_analyze_at=r[16],
            size_bytes=r[17] or 0,
        )
        for r in rows
    ]
    tables_total = rows[0][18] if rows else 0
    known = known or {}
    params = {"tables": [t.relid for t in tables], "limit": max_indexes, "known": Jsonb(known)}
    rows = conn.execute(sql["indexes"], params).fetchall() if tables and max_indexes > 0 else []
    keys = sorted({(r[1], n) for r in rows if r[9] for n in r[12][: r[13]] if n > 0})
    names = {}
    if keys:
        asked = {
            "tables": sorted({rel for rel, _ in keys}),
            "key_tables": [rel for rel, _ in keys],
            "key_attnums": [num for _, num in keys],
        }
        names = {(rel, num): name for rel, num, name in conn.execute(sql["attributes"], asked)}
    indexes = [
        IndexRead(
            relid=r[0],
            table_relid=r[1],
            schema_name=r[2],
            name=r[3],
            table_name=r[4],
            counters=(int(r[5] or 0), int(r[6] or 0), int(r[7] or 0)),
            last_scan_at=r[8],
            described=r[9],
            definition=r[10],
            method=r[11],
            key_attnums=list(r[12][: r[13]]),
            # An expression's key (attnum 0) has no name.
            key_columns=[names.get((r[1], n)) for n in r[12][: r[13]]] if r[9] else None,
            include_count=len(r[12]) - r[13],
            opclasses=[int(o) for o in r[14]],
            predicate_md5=_md5(r[15]) if r[9] else None,
            expressions_md5=_md5(r[16]) if r[9] else None,
            is_unique=r[17],
            is_primary=r[18],
            is_valid=r[19],
            constraint=r[20] or "",
            size_bytes=r[21] or 0,
        )
        for r in rows
    ]
    indexes_total = rows[0][22] if rows else 0
    return DatabaseRead(database, tables, indexes, tables_total, indexes_total)
