"""The schema reading: every database's tables and indexes with their statistics, every SCHEMA_INTERVAL_S
(catalog.py holds its SQL). What the index advice weighs: scans, writes, sizes, definitions.

Each database the monitoring role may connect to (templates and databases that refuse connections left out) is
read on a connection of its own, the snapshot's database on the snapshot's, each in a read-only transaction under
the reading's statement_timeout, all within the reading's time (SCHEMA_SECONDS, and never past the snapshot's
deadline). The other databases' connections dial the address of the snapshot's own (checked by the network policy
again, never looked up again): a host name switched meanwhile to another address is not followed. Caps bound what
one reading takes: databases (SCHEMA_MAX_DATABASES: the snapshot's, then the first others by name; the server is
asked for no more, and the rest are counted and a few named), tables per server (the largest first,
SCHEMA_MAX_TABLES) and their indexes (SCHEMA_MAX_INDEXES). A database left unread, refused or capped is said in the
reading's status; the others are stored. It runs after the other readings, so that its time never takes theirs.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import psycopg
from django.conf import settings

from collectors import connection as monitored
from collectors import redact
from collectors.errors import CollectionError, SnapshotTimeout, from_query_error, summary
from collectors.schema import catalog
from collectors.unit import Budget, Collection, Failure, Reading
from history.public import TABLES, DatabaseRows, DatabaseState, SnapshotWriter, load_schema_state, rows_for_database

# What the reading leaves of the snapshot's time, at least, for the snapshot to end in.
RESERVE_S = 1.0
# Every index of a database is described again (definition, key names, expressions) at least this often; in
# between, an index known by oid and name is not (catalog.py): a renamed column shows within a day.
DESCRIBE_EVERY_US = 86_400 * 1_000_000
# The databases past the cap named in the reading's status and note (the others counted only).
NAMED_BEYOND_CAP = 5


@dataclass
class DatabaseOutcome:
    """One database: what was read of it, or why nothing was."""

    name: str
    read: catalog.DatabaseRead | None = None
    code: str = ""
    error: str = ""
    described_all: bool = False  # every index described, none taken as known


@dataclass
class SchemaRead:
    outcomes: list[DatabaseOutcome]
    previous: dict[str, DatabaseState]
    replication: catalog.ServerRole
    spent_s: float
    databases_total: int = 0  # the server's databases a reading may list, read or not
    databases_cap: int = 0  # SCHEMA_MAX_DATABASES when read
    beyond_cap: list[str] = field(default_factory=list)  # the first databases past the cap, by name


# Why a database was left unread in the reading's own words (its status's code), shown to every reader as it is.
OWN_REASONS = frozenset({"cap", "privilege", "time"})
# The console's sentence for a failure's class, said of one database (collectors.errors.SUMMARIES says it of the
# server; a class not here reads as it does there).
DATABASE_SUMMARIES = {
    "error": "Its tables and indexes could not be read.",
    "unreachable": "The console could not connect to this database, or the connection was lost.",
    "auth_failed": "The server refused the monitoring role's login to this database.",
    "insufficient_privilege": (
        "The server refused the monitoring role's connection to this database, or a read in it (its privileges, "
        "pg_hba.conf)."
    ),
    "timeout": "Reading it took longer than the statement timeout, or waited for a lock.",
}


def database_error(code: str, message: str, *, detail: bool) -> str:
    """Why a database was not read, as its reader may see it (collectors.errors.shown): the reading's own reasons as
    they are; a failure's message, libpq's or the server's words and the addresses it tried, for those who see
    connection detail (console staff), and the console's sentence for its class for everyone else."""
    if not code and not message:
        return ""
    if code in OWN_REASONS or detail:
        return message
    return DATABASE_SUMMARIES.get(code) or summary(code)


def _deadline(snap: Collection) -> tuple[float, float]:
    budget_s = float(settings.COLLECTOR["SCHEMA_SECONDS"])
    deadline = time.monotonic() + budget_s
    snapshot_deadline = getattr(snap.conn, "deadline", None)
    if snapshot_deadline is not None:
        deadline = min(deadline, snapshot_deadline - RESERVE_S)
    return deadline, budget_s


def _read_elsewhere(
    target: monitored.Target, database: catalog.Database, sql: dict, deadline: float, caps: dict
) -> catalog.DatabaseRead:
    """One database other than the snapshot's, on a short connection of its own within the reading's time."""
    with monitored.connected(target.in_database(database.name), deadline, settings.COLLECTOR["SCHEMA_SECONDS"]) as conn:
        try:
            with monitored.read_only(conn, deadline - time.monotonic()):
                return catalog.read_database(conn, sql, database, **caps)
        except psycopg.Error as exc:
            raise from_query_error(exc, f"reading the tables and indexes of database {database.name}") from exc


def read(snap: Collection) -> SchemaRead:
    cfg = settings.COLLECTOR
    started = time.monotonic()
    deadline, budget_s = _deadline(snap)
    sql = catalog.SQL.at(snap.meta.server_version_num)
    cap = int(cfg["SCHEMA_MAX_DATABASES"])
    try:
        listed, replication = catalog.read_databases(snap.conn, sql, limit=cap + NAMED_BEYOND_CAP)
    except psycopg.Error as exc:
        raise from_query_error(exc, "listing the server's databases") from exc
    databases = listed.listed[:cap]
    previous = snap.previous.of(READING)
    status = ((snap.previous.state.readings or {}).get("schema") or {}) if snap.previous.state else {}
    before = status.get("databases") or {}
    target = None
    tables_left, indexes_left = cfg["SCHEMA_MAX_TABLES"], cfg["SCHEMA_MAX_INDEXES"]
    outcomes = []
    for database in databases:
        outcome = DatabaseOutcome(database.name)
        outcomes.append(outcome)
        if not database.may_connect:
            outcome.code, outcome.error = (
                "privilege",
                "the monitoring role may not connect to it (no CONNECT privilege)",
            )
            continue
        if tables_left <= 0:
            outcome.code, outcome.error = "cap", f"the server's cap of {cfg['SCHEMA_MAX_TABLES']} tables was reached"
            continue
        if time.monotonic() >= deadline:
            outcome.code, outcome.error = "time", f"not reached within the reading's {budget_s:g} s"
            continue
        caps = {"max_tables": tables_left, "max_indexes": indexes_left}
        known = _known(previous.get(database.name), before.get(database.name) or {}, snap.meta.taken_at_us)
        outcome.described_all = known is None
        caps["known"] = known
        try:
            if database.current:
                try:
                    outcome.read = catalog.read_database(snap.conn, sql, database, **caps)
                except psycopg.Error as exc:
                    raise from_query_error(exc, f"reading the tables and indexes of database {database.name}") from exc
            else:
                # The address the snapshot's connection dialed: every database's connection goes there.
                target = target or monitored.monitoring_target(snap.server).pinned(snap.conn.info.hostaddr)
                outcome.read = _read_elsewhere(target, database, sql, deadline, caps)
        except CollectionError as exc:
            outcome.code, outcome.error = exc.code, exc.message
            if database.current:
                raise  # the snapshot's own transaction is over: the reading fails as a whole
            if isinstance(exc, SnapshotTimeout):  # the reading's time, not the snapshot's, was what ran out
                outcome.code = "time"
                outcome.error = f"not read within the reading's {budget_s:g} s: it was given up there"
            continue
        tables_left -= len(outcome.read.tables)
        indexes_left -= len(outcome.read.indexes)
    return SchemaRead(
        outcomes,
        previous,
        replication,
        time.monotonic() - started,
        databases_total=listed.total,
        databases_cap=cap,
        beyond_cap=[d.name for d in listed.listed[cap:]],
    )


def _known(state: DatabaseState | None, earlier: dict, at_us: int) -> dict[int, str] | None:
    """The database's indexes not to describe again (oid -> name), or None: describe them all (none known yet,
    or a day since they all were)."""
    described = earlier.get("described_at_us")
    if state is None or described is None or at_us - described >= DESCRIBE_EVERY_US:
        return None
    return {relid: row["name"] for relid, row in state.indexes.items() if row["gone_at"] is None}


@dataclass
class SchemaComputed:
    databases: list[DatabaseRows] = field(default_factory=list)


def compute(snap: Collection, got: SchemaRead) -> SchemaComputed:
    taken_at, at_us = snap.taken_at, snap.meta.taken_at_us
    before = ((snap.previous.state.readings or {}).get("schema") or {}) if snap.previous.state else {}
    seen_before = before.get("databases") or {}
    computed, databases = SchemaComputed(), {}
    for outcome in got.outcomes:
        earlier = seen_before.get(outcome.name) or {}
        if outcome.read is None:
            databases[outcome.name] = {
                "ok": False,
                "code": outcome.code,
                "error": outcome.error,
                "last_ok_at_us": earlier.get("last_ok_at_us"),
                "complete": earlier.get("complete", False),
            }
            continue
        last_us = earlier.get("last_ok_at_us")
        reset = outcome.read.database.stats_reset
        reset_iso = None if reset is None else reset.isoformat()
        rows = rows_for_database(
            outcome.read,
            got.previous.get(outcome.name),
            taken_at=taken_at,
            interval_s=None if last_us is None else (at_us - last_us) / 1e6,
            new_counted=bool(earlier.get("complete")),
            reset_at=reset if last_us is not None and reset_iso not in (None, earlier.get("stats_reset")) else None,
            redact=functools.partial(redact.redact, strict=settings.COLLECTOR["REDACT_STRICT"]),
        )
        computed.databases.append(rows)
        read = outcome.read
        databases[outcome.name] = {
            "ok": True,
            "last_ok_at_us": at_us,
            "complete": not read.capped,
            "tables": len(read.tables),
            "tables_total": read.tables_total,
            "indexes": len(read.indexes),
            "indexes_total": read.indexes_total,
            "stats_reset": reset_iso,
            "described_at_us": at_us if outcome.described_all else earlier.get("described_at_us"),
        }
    snap.status["schema"] = snap.status.get("schema", {}) | {
        "databases": databases,
        "databases_total": got.databases_total,
        "databases_cap": got.databases_cap,
        "beyond_cap": got.beyond_cap,
        "in_recovery": got.replication.in_recovery,
        "standbys": got.replication.standbys,
        "spent_ms": round(got.spent_s * 1000, 1),
    }
    # At most SCHEMA_MAX_DATABASES of them, each message cut (collectors.errors): the notes stay bounded.
    unread = [f"{name} ({d['error']})" for name, d in databases.items() if not d["ok"]]
    if unread:
        snap.notes.append(f"tables and indexes not read in {len(unread)} database(s): " + "; ".join(unread))
    if got.databases_total > got.databases_cap:
        snap.notes.append(
            f"{got.databases_total - got.databases_cap:,} of the server's {got.databases_total:,} databases not read: "
            f"a reading takes {got.databases_cap} (COLLECTOR_SCHEMA_MAX_DATABASES), the first by name; past them "
            + ", ".join(got.beyond_cap)
            + (" ..." if got.databases_total - got.databases_cap > len(got.beyond_cap) else "")
        )
    capped = [
        f"{name} ({d['tables']} of {d['tables_total']} tables)"
        for name, d in databases.items()
        if d["ok"] and not d["complete"]
    ]
    if capped:
        snap.notes.append("the largest tables kept, the reading's cap reached: " + "; ".join(capped))
    return computed


def persist(snap: Collection, computed: SchemaComputed, writer: SnapshotWriter) -> None:
    for rows in computed.databases:
        writer.schema_database(rows)


READING = Reading(
    name="schema",
    what="tables and indexes",
    sql=catalog.SQL,
    tables=(TABLES.SCHEMA_TABLE, TABLES.SCHEMA_INDEX, TABLES.SCHEMA_DELTA),
    delta_rules=(
        "per table and index: now − before; now for one whose counter went back or whose database's statistics "
        "were reset, and for one new since a whole reading of its database; none at a database's first reading "
        "or for a relation first seen after a capped one"
    ),
    failure=Failure.OWN,
    read=read,
    compute=compute,
    persist=persist,
    after=("statements", "texts", "waits"),  # last: its time never takes theirs
    cadence="SCHEMA_INTERVAL_S",
    budget=Budget(seconds="SCHEMA_SECONDS", rows="SCHEMA_MAX_TABLES"),
    previous=load_schema_state,  # each database's tables and indexes as last read
)
