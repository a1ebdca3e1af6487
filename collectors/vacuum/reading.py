"""The vacuum reading: how far each database of the server is from transaction ID and multixact wraparound, every
VACUUM_INTERVAL_S, with the limits in force (issue 56's first reading; the tables' vacuum state is to follow).

One statement on the snapshot's connection, in a read-only transaction under VACUUM_SECONDS: `age()` and
`mxid_age()` of each database's `datfrozenxid` and `datminmxid` (the next transaction ID and multixact ID less
them: reading them assigns no transaction ID), and `autovacuum_freeze_max_age` and
`autovacuum_multixact_freeze_max_age`, past which autovacuum forces an anti-wraparound vacuum. Stored as read: an
age is a level, not a counter, and its rate is the difference of two readings (the read tier's).
"""

from dataclasses import dataclass

import psycopg

from collectors.settings import instance
from collectors.unit import Budget, Collection, Failure, Reading, Sql
from history.public import TABLES, SnapshotWriter

# Every name schema-qualified (the session's search_path is pinned too): a database's user cannot shadow one.
SQL = Sql(
    (
        (
            instance.MIN_SERVER_VERSION,
            "SELECT d.datname, pg_catalog.age(d.datfrozenxid)::int8, pg_catalog.mxid_age(d.datminmxid)::int8, "
            "d.datallowconn, pg_catalog.current_setting('autovacuum_freeze_max_age')::int8, "
            "pg_catalog.current_setting('autovacuum_multixact_freeze_max_age')::int8 "
            "FROM pg_catalog.pg_database d ORDER BY d.datname",
        ),
    )
)


@dataclass(frozen=True)
class FreezeAgeRow:
    """A row of TABLES.VACUUM_DATABASE after its server_id and taken_at: one database's freeze ages as read."""

    database: str
    xid_age: int
    mxid_age: int
    allows_connections: bool  # template0 does not: only anti-wraparound autovacuum ever freezes it
    freeze_max_age: int  # autovacuum_freeze_max_age then
    multixact_freeze_max_age: int  # autovacuum_multixact_freeze_max_age then


def read_ages(conn: psycopg.Connection, server_version_num: int) -> list[FreezeAgeRow]:
    return [FreezeAgeRow(*row) for row in conn.execute(SQL.at(server_version_num)).fetchall()]


def read(snap: Collection) -> list[FreezeAgeRow]:
    return read_ages(snap.conn, snap.meta.server_version_num)


def compute(snap: Collection, ages: list[FreezeAgeRow]) -> list[FreezeAgeRow]:
    return ages


def persist(snap: Collection, ages: list[FreezeAgeRow], writer: SnapshotWriter) -> None:
    writer.append(TABLES.VACUUM_DATABASE, ages)


READING = Reading(
    name="vacuum",
    what="each database's freeze ages",
    sql=SQL,
    tables=(TABLES.VACUUM_DATABASE,),
    delta_rules="none: each age is a level, stored as read (a rate is two readings' difference)",
    failure=Failure.OWN,
    read=read,
    compute=compute,
    persist=persist,
    after=("statements",),  # the snapshot's frame: its time
    cadence="VACUUM_INTERVAL_S",
    budget=Budget(seconds="VACUUM_SECONDS"),
)
