"""The history store's tables and indexes of monitored databases (collectors/schema/): each as last read, and the
deltas of each reading.

A relation's row holds its cumulative counters as last read, so the next reading's deltas are `now − before`;
only the rows that changed are written. The deltas of one reading of one database are one row of arrays (the
changed relations' ids and each counter's deltas), so that a database of 10,000 busy tables adds one row per
reading, not 10,000.

Delta rules (DESIGN.md's, for relations): now − before; now (counted from zero) for a relation whose counter went
back or whose database's statistics were reset since; now for a relation new since a whole reading of its database
(created in the interval); nothing at a database's first reading, nor for a relation first seen after a reading
that kept only the largest tables (it may have existed unseen, with counts from before).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from history.models import SchemaIndex, SchemaTable
from history.tables import TABLES

TABLE_COUNTERS = (
    "seq_scan",
    "seq_tup_read",
    "idx_scan",
    "idx_tup_fetch",
    "n_tup_ins",
    "n_tup_upd",
    "n_tup_hot_upd",
    "n_tup_del",
)
INDEX_COUNTERS = ("idx_scan", "idx_tup_read", "idx_tup_fetch")
# What a reading may leave undescribed for an index it knows (collectors.schema.catalog): kept as stored.
DESCRIBED = ("definition", "key_columns", "predicate_md5", "expressions_md5")
TABLE_FIELDS = (
    "schema_name",
    "name",
    "kind",
    "partition",
    "first_seen_at",
    "gone_at",
    "stats_since",
    *TABLE_COUNTERS,
    "n_live_tup",
    "n_dead_tup",
    "size_bytes",
    "last_vacuum_at",
    "last_analyze_at",
)
INDEX_FIELDS = (
    "table_relid",
    "schema_name",
    "name",
    "table_name",
    "definition",
    "method",
    "key_attnums",
    "key_columns",
    "include_count",
    "opclasses",
    "predicate_md5",
    "expressions_md5",
    "is_unique",
    "is_primary",
    "constraint",
    "is_valid",
    "size_bytes",
    "first_seen_at",
    "gone_at",
    "stats_since",
    "scans_at_since",
    "last_scan_at",
    *INDEX_COUNTERS,
)


@dataclass
class DatabaseState:
    """One database's relations as stored: relid -> its fields (and "id")."""

    tables: dict[int, dict] = field(default_factory=dict)
    indexes: dict[int, dict] = field(default_factory=dict)


def load_state(server_id: int) -> dict[str, DatabaseState]:
    """Every database's relations of the server as last read (those gone included: one may come back)."""
    found: dict[str, DatabaseState] = {}
    for row in SchemaTable.objects.filter(server_id=server_id).values("id", "database", "relid", *TABLE_FIELDS):
        found.setdefault(row.pop("database"), DatabaseState()).tables[row.pop("relid")] = row
    for row in SchemaIndex.objects.filter(server_id=server_id).values("id", "database", "relid", *INDEX_FIELDS):
        found.setdefault(row.pop("database"), DatabaseState()).indexes[row.pop("relid")] = row
    return found


@dataclass
class DatabaseRows:
    """What one reading of one database writes."""

    database: str
    interval_s: float | None  # since the database's last reading; None: its first (no deltas)
    complete: bool  # every table and index of it read: a relation not found is gone
    tables: dict[int, dict] = field(default_factory=dict)  # relid -> fields: new or changed rows
    indexes: dict[int, dict] = field(default_factory=dict)
    table_deltas: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (relid, TABLE_COUNTERS)
    index_deltas: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    table_relids: list[int] = field(default_factory=list)  # every table read
    index_relids: list[int] = field(default_factory=list)
    ids: dict[tuple[str, int], int] = field(default_factory=dict)  # (kind, relid) -> stored id, of the unchanged


def _changed(row: dict, before: dict | None) -> bool:
    return before is None or any(before[name] != value for name, value in row.items())


def _counted(
    now: tuple[int, ...], before: dict | None, names: tuple[str, ...], *, reset_at, new_counted: bool
) -> tuple[tuple[int, ...] | None, bool]:
    """The relation's deltas (None: not counted) and whether its counters started again."""
    if before is None:
        return (now if new_counted else None), False
    earlier = tuple(before[name] for name in names)
    if reset_at is not None or any(n < b for n, b in zip(now, earlier, strict=True)):
        return now, True
    return tuple(n - b for n, b in zip(now, earlier, strict=True)), False


def rows_for_database(
    read,
    previous: DatabaseState | None,
    *,
    taken_at: datetime,
    interval_s: float | None,
    new_counted: bool,
    reset_at: datetime | None = None,
    redact: Callable[[str], str],
) -> DatabaseRows:
    """Rows and deltas of one reading of one database (`read`: collectors.schema.catalog.DatabaseRead) against what
    its last reading stored. `reset_at`: the database's statistics were reset then, since that reading. `redact`:
    the collectors' redaction, for the definitions of the indexes described."""
    previous = previous or DatabaseState()
    rows = DatabaseRows(read.database.name, interval_s, complete=not read.capped)
    counting = interval_s is not None
    for t in read.tables:
        before = previous.tables.get(t.relid)
        before = None if before is not None and before["gone_at"] is not None else before
        deltas, restarted = _counted(t.counters, before, TABLE_COUNTERS, reset_at=reset_at, new_counted=new_counted)
        row = dict(zip(TABLE_COUNTERS, t.counters, strict=True)) | {
            "schema_name": t.schema_name,
            "name": t.name,
            "kind": t.kind,
            "partition": t.partition,
            "first_seen_at": taken_at if before is None else before["first_seen_at"],
            "gone_at": None,
            "stats_since": taken_at
            if before is None
            else (reset_at or taken_at)
            if restarted
            else before["stats_since"],
            "n_live_tup": t.n_live_tup,
            "n_dead_tup": t.n_dead_tup,
            "size_bytes": t.size_bytes,
            "last_vacuum_at": t.last_vacuum_at,
            "last_analyze_at": t.last_analyze_at,
        }
        rows.table_relids.append(t.relid)
        if _changed(row, before):
            rows.tables[t.relid] = row
        else:
            rows.ids[("t", t.relid)] = before["id"]
        if counting and deltas is not None and any(deltas):
            rows.table_deltas.append((t.relid, deltas))
    for i in read.indexes:
        before = previous.indexes.get(i.relid)
        before = None if before is not None and before["gone_at"] is not None else before
        deltas, restarted = _counted(i.counters, before, INDEX_COUNTERS, reset_at=reset_at, new_counted=new_counted)
        scans = i.counters[0]
        if before is None:
            since, scans_at_since, last_scan_at = taken_at, scans, i.last_scan_at
        elif restarted:
            since = reset_at or taken_at
            scans_at_since = 0 if reset_at is not None else scans
            last_scan_at = before["last_scan_at"]
        else:
            since, scans_at_since, last_scan_at = (
                before["stats_since"],
                before["scans_at_since"],
                before["last_scan_at"],
            )
        if deltas is not None and deltas[0] > 0 and before is not None:
            last_scan_at = taken_at  # scanned since the last reading (the server's own time, below, when it says)
        if i.last_scan_at is not None and (last_scan_at is None or i.last_scan_at > last_scan_at or deltas):
            last_scan_at = i.last_scan_at
        if i.described or before is None:
            described = {
                "definition": redact(i.definition or ""),
                "key_columns": i.key_columns or [],
                "predicate_md5": i.predicate_md5 or "",
                "expressions_md5": i.expressions_md5 or "",
            }
        else:  # known by oid and name: described as stored
            described = {name: before[name] for name in DESCRIBED}
        row = (
            dict(zip(INDEX_COUNTERS, i.counters, strict=True))
            | described
            | {
                "table_relid": i.table_relid,
                "schema_name": i.schema_name,
                "name": i.name,
                "table_name": i.table_name,
                "method": i.method,
                "key_attnums": i.key_attnums,
                "include_count": i.include_count,
                "opclasses": i.opclasses,
                "is_unique": i.is_unique,
                "is_primary": i.is_primary,
                "constraint": i.constraint,
                "is_valid": i.is_valid,
                "size_bytes": i.size_bytes,
                "first_seen_at": taken_at if before is None else before["first_seen_at"],
                "gone_at": None,
                "stats_since": since,
                "scans_at_since": scans_at_since,
                "last_scan_at": last_scan_at,
            }
        )
        rows.index_relids.append(i.relid)
        if _changed(row, before):
            rows.indexes[i.relid] = row
        else:
            rows.ids[("i", i.relid)] = before["id"]
        if counting and deltas is not None and any(deltas):
            rows.index_deltas.append((i.relid, deltas))
    return rows


def _upsert(model, server_id: int, database: str, found: dict[int, dict], fields: tuple[str, ...]) -> dict[int, int]:
    if not found:
        return {}
    made = model.objects.bulk_create(
        [model(server_id=server_id, database=database, relid=relid, **row) for relid, row in found.items()],
        update_conflicts=True,
        unique_fields=["server", "database", "relid"],
        update_fields=list(fields),
        batch_size=1000,
    )
    return {obj.relid: obj.pk for obj in made}


def _mark_gone(table: str, server_id: int, database: str, seen: list[int], at: datetime) -> None:
    with connection.cursor() as cur:
        cur.execute(
            f'UPDATE "{table}" SET gone_at = %s '
            "WHERE server_id = %s AND database = %s AND gone_at IS NULL AND relid <> ALL(%s::int8[])",
            [at, server_id, database, seen],
        )


def save_database(server_id: int, taken_at: datetime, rows: DatabaseRows) -> None:
    """Store one reading of one database: its new and changed relations, those gone, its deltas (inside the
    snapshot's transaction)."""
    table_ids = {relid: i for (kind, relid), i in rows.ids.items() if kind == "t"}
    index_ids = {relid: i for (kind, relid), i in rows.ids.items() if kind == "i"}
    table_ids |= _upsert(SchemaTable, server_id, rows.database, rows.tables, TABLE_FIELDS)
    index_ids |= _upsert(SchemaIndex, server_id, rows.database, rows.indexes, INDEX_FIELDS)
    if rows.complete:
        _mark_gone(TABLES.SCHEMA_TABLE.name, server_id, rows.database, rows.table_relids, taken_at)
        _mark_gone(TABLES.SCHEMA_INDEX.name, server_id, rows.database, rows.index_relids, taken_at)
    if rows.interval_s is None:
        return
    columns = [[table_ids[relid] for relid, _ in rows.table_deltas]]
    columns += [[d[k] for _, d in rows.table_deltas] for k in range(len(TABLE_COUNTERS))]
    columns += [[index_ids[relid] for relid, _ in rows.index_deltas]]
    columns += [[d[k] for _, d in rows.index_deltas] for k in range(len(INDEX_COUNTERS))]
    with connection.cursor() as cur:
        cur.execute(
            f'INSERT INTO "{TABLES.SCHEMA_DELTA.name}" (server_id, taken_at, database, interval_s, table_ids, '
            f"{', '.join(TABLE_COUNTERS)}, index_ids, index_scan, index_tup_read, index_tup_fetch) "
            f"VALUES (%s, %s, %s, %s, {', '.join(['%s::int8[]'] * len(columns))})",
            [server_id, taken_at, rows.database, rows.interval_s, *columns],
        )
