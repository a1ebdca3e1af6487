"""A server's tables and indexes as the schema reading keeps them (history/schema.py): each as last read, with its
scans and writes summed over a window from the readings' deltas, and what the last reading of each database said
(read, refused, capped). The Indexes page, the advisor's index rules, the API and the reports read them here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Count

from history.public import TABLES, IndexCandidate, SchemaIndex, SchemaTable
from readtier import db
from readtier.server import reading_status
from readtier.windows import Window

DAY_S = 86400.0
# A rate a day is given from at least this much of its database's readings: from a few minutes it would be a
# burst's, not the table's (tens of inserts in a minute are not millions a day).
MIN_OBSERVED_S = 3600.0


@dataclass(frozen=True)
class DatabaseStatus:
    name: str
    ok: bool
    read_at: datetime | None  # its last whole or capped reading
    complete: bool  # every table and index read (not capped)
    tables: int = 0
    tables_total: int = 0
    indexes: int = 0
    indexes_total: int = 0
    error: str = ""  # the reading's own words, or a failure's (libpq's, for console staff: collectors.database_error)
    code: str = ""


@dataclass(frozen=True)
class DatabasesCapped:
    """The databases the schema reading's cap left unread (COLLECTOR_SCHEMA_MAX_DATABASES): counted, a few named."""

    total: int  # the server's databases a reading may list
    cap: int  # a reading takes this many: the snapshot's database, then the first others by name
    named: list[str]  # the first of those past the cap, by name

    @property
    def unread(self) -> int:
        return self.total - self.cap

    @property
    def unnamed(self) -> int:
        return max(0, self.unread - len(self.named))


@dataclass(frozen=True)
class TableRow:
    id: int
    database: str
    schema_name: str
    name: str
    kind: str
    partition: bool
    size_bytes: int
    n_live_tup: int
    n_dead_tup: int
    last_vacuum_at: datetime | None
    last_analyze_at: datetime | None
    first_seen_at: datetime
    # Summed over the window's readings (None: the window holds no reading of its database after its first).
    seq_scan: int | None
    idx_scan: int | None
    n_tup_ins: int | None
    n_tup_upd: int | None
    n_tup_hot_upd: int | None
    n_tup_del: int | None
    observed_s: float  # the window's seconds covered by its database's readings
    indexes: int  # its indexes, as last read

    @property
    def index_writes(self) -> int | None:
        """Rows written to each of its indexes: inserts and non-HOT updates (a HOT update writes no index)."""
        if self.n_tup_ins is None:
            return None
        return self.n_tup_ins + self.n_tup_upd - self.n_tup_hot_upd

    def per_day(self, value: int | None) -> float | None:
        """`value` over the window, a day's worth (None: not known, or fewer than MIN_OBSERVED_S of readings)."""
        if value is None or self.observed_s < MIN_OBSERVED_S:
            return None
        return value * DAY_S / self.observed_s


@dataclass(frozen=True)
class IndexFact:
    """One index of the server as the schema reading last found it, and its scans since it has been watched
    without a reset: the one record of an index from the read tier to the advisor's rules (advisor.evidence)."""

    database: str
    schema_name: str
    name: str
    table_name: str
    table_relid: int
    definition: str
    method: str = "btree"
    key_attnums: tuple[int, ...] = ()  # 0: an expression
    key_columns: tuple[str | None, ...] = ()
    include_count: int = 0
    opclasses: tuple[int, ...] = ()
    predicate_md5: str = ""  # "": no predicate
    expressions_md5: str = ""  # "": no expression
    is_unique: bool = False
    is_primary: bool = False
    constraint: str = ""  # the constraint it backs ("": none)
    is_valid: bool = True
    size_bytes: int = 0
    watched_since: datetime | None = None
    scans_since: int = 0
    last_scan_at: datetime | None = None  # a scan seen (or, from 16, pg_stat_user_indexes.last_idx_scan)
    table_writes_per_day: float | None = None  # its table's inserts and non-HOT updates a day (None: not known)

    @property
    def enforces(self) -> bool:
        """Unique, primary or backing a constraint: never proposed for removal."""
        return self.is_unique or self.is_primary or bool(self.constraint)


@dataclass(frozen=True, kw_only=True)
class IndexRow(IndexFact):
    """An index as the Indexes page and the API list it: its record, when the console first saw it, and its scans
    over the window (None: no reading of its database in it after its first)."""

    id: int
    first_seen_at: datetime
    scans: int | None


@dataclass(frozen=True)
class SchemaOverview:
    databases: list[DatabaseStatus]
    read_at: datetime | None  # the last reading (None: never read)
    in_recovery: bool
    standbys: int | None
    tables: list[TableRow]  # the largest first (the first `limit` of them when asked so)
    indexes: list[IndexRow]  # the largest first (likewise)
    tables_total: int = 0  # all of them
    indexes_total: int = 0
    capped: DatabasesCapped | None = None  # None: every database was taken (or the last reading did not say)


def _us(value) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value / 1e6, tz=UTC)


def _databases_capped(reading: dict) -> DatabasesCapped | None:
    """What the reading's cap on databases left unread, from its status (None: nothing)."""
    total, cap = reading.get("databases_total"), reading.get("databases_cap")
    if total is None or cap is None or total <= cap:
        return None
    return DatabasesCapped(total=int(total), cap=int(cap), named=list(reading.get("beyond_cap") or []))


def schema_status(*, server_id: int) -> tuple[list[DatabaseStatus], dict]:
    """What the last schema reading of each database said, and the reading's own status."""
    reading = reading_status(server_id=server_id, reading="schema")
    found = [
        DatabaseStatus(
            name=name,
            ok=bool(d.get("ok")),
            read_at=_us(d.get("last_ok_at_us")),
            complete=bool(d.get("complete")),
            tables=d.get("tables", 0),
            tables_total=d.get("tables_total", 0),
            indexes=d.get("indexes", 0),
            indexes_total=d.get("indexes_total", 0),
            error=d.get("error", ""),
            code=d.get("code", ""),
        )
        for name, d in sorted((reading.get("databases") or {}).items())
    ]
    return found, reading


_SUMS = f"""
WITH spans AS (
    SELECT database, sum(interval_s) AS observed_s FROM {TABLES.SCHEMA_DELTA.name}
    WHERE server_id = %(server)s AND taken_at > %(start)s AND taken_at <= %(end)s GROUP BY database
), t AS (
    SELECT d.id, sum(d.seq) AS seq, sum(d.idx) AS idx, sum(d.ins) AS ins, sum(d.upd) AS upd, sum(d.hot) AS hot,
           sum(d.del) AS del
    FROM {TABLES.SCHEMA_DELTA.name} s,
         unnest(s.table_ids, s.seq_scan, s.idx_scan, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del)
           AS d(id, seq, idx, ins, upd, hot, del)
    WHERE s.server_id = %(server)s AND s.taken_at > %(start)s AND s.taken_at <= %(end)s
      AND (%(table_ids)s::bigint[] IS NULL OR d.id = ANY(%(table_ids)s::bigint[]))
    GROUP BY d.id
), i AS (
    SELECT d.id, sum(d.scans) AS scans
    FROM {TABLES.SCHEMA_DELTA.name} s, unnest(s.index_ids, s.index_scan) AS d(id, scans)
    WHERE s.server_id = %(server)s AND s.taken_at > %(start)s AND s.taken_at <= %(end)s
      AND (%(index_ids)s::bigint[] IS NULL OR d.id = ANY(%(index_ids)s::bigint[]))
    GROUP BY d.id
)
SELECT 's', database, NULL, observed_s, NULL, NULL, NULL, NULL, NULL FROM spans
UNION ALL SELECT 't', NULL, id, seq, idx, ins, upd, hot, del FROM t
UNION ALL SELECT 'i', NULL, id, scans, NULL, NULL, NULL, NULL, NULL FROM i
"""


def schema_overview(*, server_id: int, window: Window, limit: int | None = None) -> SchemaOverview:
    """Every table and index of the server not gone, as last read, with its scans and writes over `window`; with
    `limit`, the largest `limit` tables and indexes only (and the count of all): a page of a server of 10,000
    tables reads what it shows."""
    databases, reading = schema_status(server_id=server_id)
    live_tables = SchemaTable.objects.filter(server_id=server_id, gone_at__isnull=True).order_by(
        "-size_bytes", "name", "database", "id"
    )
    live_indexes = SchemaIndex.objects.filter(server_id=server_id, gone_at__isnull=True).order_by(
        "-size_bytes", "name", "database", "id"
    )
    counts: dict[tuple[str, int], int] = {}
    if limit is None:
        table_objects, index_rows, also = list(live_tables), list(live_indexes.values()), []
        tables_total, indexes_total = len(table_objects), len(index_rows)
        for row in index_rows:
            key = (row["database"], row["table_relid"])
            counts[key] = counts.get(key, 0) + 1
        table_ids = index_ids = None
    else:
        table_objects, index_rows = list(live_tables[:limit]), list(live_indexes.values()[:limit])
        tables_total, indexes_total = live_tables.count(), live_indexes.count()
        # The listed indexes' tables, for their write cost, when they are not listed themselves.
        listed = {(t.database, t.relid) for t in table_objects}
        wanted = {(r["database"], r["table_relid"]) for r in index_rows} - listed
        also = [
            t for t in live_tables.filter(relid__in={relid for _, relid in wanted}) if (t.database, t.relid) in wanted
        ]
        relids = {t.relid for t in table_objects} | {relid for _, relid in wanted}
        for database, relid, n in (
            SchemaIndex.objects.filter(server_id=server_id, gone_at__isnull=True, table_relid__in=relids)
            .values_list("database", "table_relid")
            .annotate(n=Count("id"))
        ):
            counts[(database, relid)] = n
        table_ids, index_ids = [t.pk for t in (*table_objects, *also)], [r["id"] for r in index_rows]
    spans, table_sums, index_sums = {}, {}, {}
    for kind, database, rid, *values in db.fetchall(
        _SUMS,
        {
            "server": server_id,
            "start": window.start,
            "end": window.end,
            "table_ids": table_ids,
            "index_ids": index_ids,
        },
    ):
        if kind == "s":
            spans[database] = float(values[0] or 0.0)
        elif kind == "t":
            table_sums[rid] = [int(v or 0) for v in values]
        else:
            index_sums[rid] = int(values[0] or 0)
    found_tables, writes = [], {}
    for t in (*table_objects, *also):
        observed = spans.get(t.database, 0.0)
        sums = table_sums.get(t.pk, [0] * 6) if t.database in spans else [None] * 6
        row = TableRow(
            id=t.pk,
            database=t.database,
            schema_name=t.schema_name,
            name=t.name,
            kind=t.kind,
            partition=t.partition,
            size_bytes=t.size_bytes,
            n_live_tup=t.n_live_tup,
            n_dead_tup=t.n_dead_tup,
            last_vacuum_at=t.last_vacuum_at,
            last_analyze_at=t.last_analyze_at,
            first_seen_at=t.first_seen_at,
            seq_scan=sums[0],
            idx_scan=sums[1],
            n_tup_ins=sums[2],
            n_tup_upd=sums[3],
            n_tup_hot_upd=sums[4],
            n_tup_del=sums[5],
            observed_s=observed,
            indexes=counts.get((t.database, t.relid), 0),
        )
        found_tables.append(row)
        writes[(t.database, t.relid)] = row.per_day(row.index_writes)
    del found_tables[len(table_objects) :]  # the listed indexes' own tables: their writes only
    found_indexes = [
        IndexRow(
            id=r["id"],
            database=r["database"],
            schema_name=r["schema_name"],
            name=r["name"],
            table_name=r["table_name"],
            table_relid=r["table_relid"],
            definition=r["definition"],
            method=r["method"],
            key_attnums=tuple(r["key_attnums"]),
            key_columns=tuple(r["key_columns"]),
            include_count=r["include_count"],
            opclasses=tuple(r["opclasses"]),
            predicate_md5=r["predicate_md5"],
            expressions_md5=r["expressions_md5"],
            is_unique=r["is_unique"],
            is_primary=r["is_primary"],
            constraint=r["constraint"],
            is_valid=r["is_valid"],
            size_bytes=r["size_bytes"],
            first_seen_at=r["first_seen_at"],
            watched_since=r["stats_since"],
            scans_since=r["idx_scan"] - r["scans_at_since"],
            last_scan_at=r["last_scan_at"],
            scans=index_sums.get(r["id"], 0) if r["database"] in spans else None,
            table_writes_per_day=writes.get((r["database"], r["table_relid"])),
        )
        for r in index_rows
    ]
    return SchemaOverview(
        databases=databases,
        read_at=_us(reading.get("at_us")),
        in_recovery=bool(reading.get("in_recovery")),
        standbys=reading.get("standbys"),
        tables=found_tables,
        indexes=found_indexes,
        tables_total=tables_total,
        indexes_total=indexes_total,
        capped=_databases_capped(reading),
    )


@dataclass(frozen=True)
class CandidateRow:
    """An index one statement's last plan asks for (history/plans.py's IndexCandidate), or why none."""

    statement_id: int
    at: datetime
    database: str
    schema_name: str
    table_name: str
    columns: list[str]  # []: none advised (reason says why)
    method: str  # cost-verified | estimated
    reltuples: float
    selectivity: float | None
    cost_before: float
    cost_after: float | None
    size_bytes: int | None
    reason: str
    partition_of: dict | None  # collectors.plans.hypothetical.Candidate.partition_of

    @property
    def asks(self) -> bool:
        """Whether the scan asks for an index (columns, and a cost with it); else `reason` says why not."""
        return bool(self.columns) and self.cost_after is not None

    @property
    def partitioned_table(self) -> str | None:
        """schema.table of the partitioned table it is a partition of (None: not a partition)."""
        root = self.partition_of
        return f"{root['schema']}.{root['table']}" if root else None


def index_candidates(*, server_id: int, statement_id: int | None = None) -> list[CandidateRow]:
    """The index candidates of the server's statements' last plans (of one statement when given)."""
    found = IndexCandidate.objects.filter(server_id=server_id)
    if statement_id is not None:
        found = found.filter(statement_id=statement_id)
    return [
        CandidateRow(**{f: getattr(c, f) for f in CandidateRow.__dataclass_fields__})
        for c in found.order_by("statement_id", "schema_name", "table_name")
    ]
