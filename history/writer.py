"""The history store's writer: what a collection hands one snapshot's rows to (collectors/services.py).

`store_snapshot` makes the partitions of the tables the snapshot writes (outside its transaction, so that their DDL
never waits on it), then runs `write` in the snapshot's one transaction with a `SnapshotWriter`: each reading's
`persist` hands it typed rows, and the history store owns the tables, their partitions and codecs. A partition that
this process knew of and that was dropped since is made again and the snapshot written once more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from datetime import datetime

import numpy as np
import psycopg
from django.db import IntegrityError, connection, transaction
from psycopg import sql

from history import partitions, schema, store
from history.entries import Entries
from history.models import ServerState
from history.tables import HistoryTable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotWriter:
    """One snapshot of one server, inside its transaction."""

    server_id: int
    taken_at: datetime

    def append(self, table: HistoryTable, rows: Sequence) -> None:
        """Typed rows (dataclasses, each field a column of `table` after server_id and taken_at), by COPY."""
        if not rows:
            return
        columns = ["server_id", "taken_at", *(f.name for f in fields(rows[0]))]
        query = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table.name), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with store.raw_cursor() as cur, cur.copy(query) as copy:
            for row in rows:
                copy.write_row((self.server_id, self.taken_at, *astuple(row)))

    def statements(
        self, lookup: store.StatementLookup, keys: np.ndarray, new: list[store.NewStatement], *, redacted_with: int
    ) -> np.ndarray:
        """The statement id of every current entry, the keys never seen given theirs (store.statement_ids)."""
        return store.statement_ids(self.server_id, lookup, keys, new, self.taken_at, redacted_with=redacted_with)

    def statement_state(self, upsert: Entries, gone_ids: np.ndarray, back_ids: np.ndarray) -> None:
        """The statements' state the next snapshot compares with (store.write_statement_state)."""
        store.write_statement_state(self.server_id, upsert, gone_ids, self.taken_at, back_ids=back_ids)

    def texts(self, texts: dict[int, store.StatementText], *, redacted_with: int) -> None:
        """Texts read again for known statements (store.update_texts)."""
        store.update_texts(self.server_id, texts, redacted_with=redacted_with)

    def schema_database(self, rows: schema.DatabaseRows) -> None:
        """One reading of one database's tables and indexes (schema.save_database)."""
        schema.save_database(self.server_id, self.taken_at, rows)

    def snapshot(self, row: store.NewSnapshot) -> None:
        store.insert_snapshot(row)

    def server_state(self, state: ServerState) -> None:
        store.save_server_state(state)


def store_snapshot(
    server_id: int, taken_at: datetime, tables: Iterable[HistoryTable], write: Callable[[SnapshotWriter], None]
) -> None:
    """Everything `write` hands the writer is stored in one transaction, or nothing is."""
    spans = {table for table in tables if table.span}
    try:
        _once(server_id, taken_at, spans, write)
    except (IntegrityError, psycopg.IntegrityError) as exc:  # Django's cursors, and the raw ones of the COPYs
        if "no partition of relation" not in str(exc):
            raise
        # A partition this process knew of was dropped since (by hand, or by a migration run back and forth): the
        # transaction rolled back whole; the partitions are looked at again and the snapshot stored once more.
        log.warning("history partition missing, made again: %s", str(exc).splitlines()[0])
        partitions.forget_cache()
        _once(server_id, taken_at, spans, write)


def _once(server_id: int, taken_at: datetime, spans: set[HistoryTable], write: Callable[[SnapshotWriter], None]):
    for table in spans:
        partitions.ensure(table.name, taken_at)
    with transaction.atomic():
        # Facts and state commit together, so losing this commit in a crash of the history store loses no count
        # (the next snapshot spans the gap from the older state): no need to wait for the WAL flush.
        with connection.cursor() as cur:
            cur.execute("SET LOCAL synchronous_commit = off")
        write(SnapshotWriter(server_id, taken_at))
