"""Reads and writes of the history store behind the collectors' door (history.public): the previous cumulative
state and what the statements' dimension knows of texts, read before a monitored connection opens; the statement
dimension, the statements' state, the snapshot's row and the server's state, written through history.writer's
SnapshotWriter in the snapshot's one transaction; and the removal of a server's whole history.

One module over 400 lines: every write of a snapshot's statements in the order its one transaction makes them and
under the same advisory lock, with the reads of the state they replace, kept in view together."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg
from django.db import connection, transaction
from psycopg import sql

from history import binary_copy, codec, tables
from history.columns import COUNTER_NAMES, GAUGE_NAMES, TOTAL_NAMES
from history.entries import Entries
from history.models import ServerState
from history.snapshot_facts import SNAPSHOT_FACTS, SnapshotFacts
from history.tables import TABLES


def drop_history_connection() -> None:
    """Cancel whatever the history store runs for this process, and close its connection (Django opens another
    at the next query): after a task's time limit stopped it in the middle of a query."""
    raw = connection.connection
    if raw is not None and not raw.closed:
        with contextlib.suppress(Exception):
            raw.cancel_safe(timeout=5)
    connection.close()


def statement_timed_out(exc: BaseException) -> bool:
    """A query stopped by statement_timeout, anywhere in the exception's chain (psycopg's own error from the
    selectors' raw cursors, or Django's OperationalError wrapping it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, psycopg.errors.QueryCanceled) and "statement timeout" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# The advisory lock (LOCK_NAMESPACE, server_id) in the history store: one collection per server holds
# it while it runs (collectors.services), and delete_server_history waits for it.
LOCK_NAMESPACE = 0x7067

STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("server_id", "i8"),
    ("statement_id", "i8"),
    ("userid", "i8"),
    ("dbid", "i8"),
    ("queryid", "i8"),
    ("toplevel", "i8"),
    ("stats_since_us", "i8"),
    ("minmax_stats_since_us", "i8"),
    *((c, "i8") for c in COUNTER_NAMES),
    *((g, "f8") for g in GAUGE_NAMES),
)
_STATE_LIST = sql.SQL(", ").join(sql.Identifier(name) for name, _ in STATE_COLUMNS)


def raw_cursor():
    """The psycopg cursor under Django's wrapper (for COPY)."""
    connection.ensure_connection()
    return connection.connection.cursor()


def load_statement_state(server_id: int) -> Entries:
    query = sql.SQL("COPY (SELECT {cols} FROM {table} WHERE server_id = {sid}) TO STDOUT (FORMAT binary)").format(
        cols=_STATE_LIST, table=sql.Identifier(TABLES.STATEMENT_STATE.name), sid=sql.Literal(server_id)
    )
    chunks: list[bytes] = []
    with raw_cursor() as cur, cur.copy(query) as copy:
        for chunk in copy:
            chunks.append(bytes(chunk))
    rows = binary_copy.parse(b"".join(chunks), STATE_COLUMNS)
    n = len(rows)
    return Entries(
        keys=np.column_stack([rows[k] for k in ("userid", "dbid", "queryid", "toplevel")]).reshape(n, 4),
        counters=np.column_stack([rows[c] for c in COUNTER_NAMES]).reshape(n, len(COUNTER_NAMES)),
        gauges=np.column_stack([rows[g] for g in GAUGE_NAMES]).reshape(n, len(GAUGE_NAMES)),
        stats_since_us=rows["stats_since_us"].copy(),
        minmax_stats_since_us=rows["minmax_stats_since_us"].copy(),
        statement_id=rows["statement_id"].copy(),
    )


_DELETE_STATE_SQL = (
    sql.SQL("DELETE FROM {} WHERE server_id = %s AND statement_id = ANY(%s)")
    .format(sql.Identifier(TABLES.STATEMENT_STATE.name))
    .as_string()
)
_GONE_SQL = f"UPDATE {TABLES.STATEMENT.name} SET gone_at = %s WHERE server_id = %s AND id = ANY(%s)"
_BACK_SQL = (
    f"UPDATE {TABLES.STATEMENT.name} SET gone_at = NULL WHERE server_id = %s AND id = ANY(%s) AND gone_at IS NOT NULL"
)
_COPY_STATE_SQL = (
    sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(sql.Identifier(TABLES.STATEMENT_STATE.name), _STATE_LIST)
).as_string()


def write_statement_state(
    server_id: int, upsert: Entries, delete_ids: np.ndarray, taken_at: datetime, back_ids: np.ndarray | None = None
) -> None:
    """Replace the state rows of changed entries and remove those of gone ones; the statements say since when
    they are gone (gone_at), and those back in pg_stat_statements (`back_ids`: entries new to the state) that
    they are there again."""
    ids = np.concatenate([delete_ids, upsert.statement_id]).astype(np.int64)
    with raw_cursor() as cur:
        if len(ids):
            cur.execute(_DELETE_STATE_SQL, (server_id, ids.tolist()))
        if len(delete_ids):
            cur.execute(_GONE_SQL, (taken_at, server_id, delete_ids.astype(np.int64).tolist()))
        if back_ids is not None and len(back_ids):
            cur.execute(_BACK_SQL, (server_id, back_ids.astype(np.int64).tolist()))
        if not len(upsert):
            return
        with cur.copy(_COPY_STATE_SQL) as copy:
            copy.write(state_copy_data(server_id, upsert))


def state_copy_data(server_id: int, entries: Entries) -> bytes:
    """COPY BINARY data of state rows for these entries (their statement ids must be set)."""
    rows = np.empty(len(entries), dtype=binary_copy.native_dtype(STATE_COLUMNS))
    rows["server_id"] = server_id
    rows["statement_id"] = entries.statement_id
    for j, k in enumerate(("userid", "dbid", "queryid", "toplevel")):
        rows[k] = entries.keys[:, j]
    rows["stats_since_us"] = entries.stats_since_us
    rows["minmax_stats_since_us"] = entries.minmax_stats_since_us
    for j, c in enumerate(COUNTER_NAMES):
        rows[c] = entries.counters[:, j]
    for j, g in enumerate(GAUGE_NAMES):
        rows[g] = entries.gauges[:, j]
    return binary_copy.build(rows, STATE_COLUMNS)


_STATEMENT = TABLES.STATEMENT.name
_FIND_SQL = (
    "SELECT s.userid, s.dbid, s.queryid, s.toplevel::int, s.id "
    "FROM unnest(%s::int8[], %s::int8[], %s::int8[], %s::bool[]) AS k(u, d, q, t) "
    f"JOIN {_STATEMENT} s ON s.server_id = %s AND s.queryid = k.q AND s.userid = k.u "
    "AND s.dbid = k.d AND s.toplevel = k.t"
)


def _key_arrays(keys: np.ndarray) -> list[list]:
    return [keys[:, 0].tolist(), keys[:, 1].tolist(), keys[:, 2].tolist(), (keys[:, 3] != 0).tolist()]


def _find(server_id: int, keys: np.ndarray) -> dict[tuple[int, int, int, int], int]:
    if not len(keys):
        return {}
    with raw_cursor() as cur:
        cur.execute(_FIND_SQL, (*_key_arrays(keys), server_id))
        return {(u, d, q, t): sid for u, d, q, t, sid in cur.fetchall()}


@dataclass
class StatementLookup:
    """The statement dimension's view of the current entries, before the snapshot is stored: from the previous
    state while the monitored connection is open (from_previous), then from the dimension (lookup_returning)."""

    ids: np.ndarray  # (n,) int64: statement id of each entry, -1 for keys not known (yet)
    missing_text: dict[int, str]  # statement id -> text_status, of the present entries' statements without a text

    @classmethod
    def from_previous(
        cls, prev: Entries, prev_index: np.ndarray, present: np.ndarray, texts_missing: dict[int, str]
    ) -> StatementLookup:
        """Without I/O: the ids of the keys in the previous state (`prev_index`, match_keys'), -1 for the others;
        the text statuses (texts_missing's, read with the previous state) of the `present` rows' statements, and
        every pending one. A statement that lost its text and never came back costs nothing."""
        ids = np.full(len(prev_index), -1, np.int64)
        matched = prev_index >= 0
        if len(prev):
            ids[matched] = prev.statement_id[prev_index[matched]]
        sent = set(ids[present & (ids >= 0)].tolist())
        missing = {i: status for i, status in texts_missing.items() if i in sent or status == "pending"}
        return cls(ids, missing)

    @property
    def unseen(self) -> np.ndarray:
        return self.ids < 0

    def text_status(self, rows: np.ndarray) -> list[str | None]:
        """The text status of these rows' statements, None where stored or never seen."""
        return [self.missing_text.get(i) for i in self.ids[rows].tolist()]


def texts_missing(server_id: int) -> dict[int, str]:
    """statement id -> text status, of the statements in the server's state (not gone: write_statement_state keeps
    gone_at with it) without a stored text, and of every statement whose text a snapshot put off (pending), through
    the partial index statement_text_missing: what a collection knows of texts before it opens the monitored
    connection. No list of ids is sent: the index holds only the statements without a text."""
    with raw_cursor() as cur:
        cur.execute(
            f"SELECT id, text_status FROM {_STATEMENT} WHERE server_id = %s AND text_status <> 'stored' "
            "AND (gone_at IS NULL OR text_status = 'pending')",
            (server_id,),
        )
        return dict(cur.fetchall())


def lookup_returning(server_id: int, lookup: StatementLookup, keys: np.ndarray) -> StatementLookup:
    """The lookup once the monitored connection is given back: the keys not in the previous state that the
    dimension knows (evicted since, or hidden then, and back) get their statement ids, and the text status of
    those without a stored text; the others stay -1, never seen (statement_ids gives them theirs)."""
    unseen = np.flatnonzero(lookup.unseen)
    found = _find(server_id, keys[unseen])
    if not found:
        return lookup
    ids = lookup.ids.copy()
    ids[unseen] = [found.get(tuple(k), -1) for k in keys[unseen].tolist()]
    with raw_cursor() as cur:
        cur.execute(
            f"SELECT id, text_status FROM {_STATEMENT} WHERE server_id = %s AND text_status <> 'stored' "
            "AND id = ANY(%s)",
            (server_id, list(found.values())),
        )
        missing = lookup.missing_text | dict(cur.fetchall())
    return StatementLookup(ids, missing)


@dataclass
class StatementText:
    """A statement's text as read (None: status says why)."""

    query: str | None
    truncated: bool
    status: str  # history.models.TextStatus


@dataclass
class NewStatement:
    key: tuple[int, int, int, int]
    database_name: str
    user_name: str
    text: StatementText


def statement_ids(
    server_id: int,
    lookup: StatementLookup,
    keys: np.ndarray,
    new: list[NewStatement],
    first_seen_at: datetime,
    *,
    redacted_with: int,
) -> np.ndarray:
    """The statement id of every current entry: the lookup's, and for the keys never seen (`new`, in
    the order of lookup.unseen) the ids of their new dimension rows, their texts redacted by the redaction's
    version `redacted_with` (collectors.redact.VERSION)."""
    ids = lookup.ids.copy()
    unseen = np.flatnonzero(lookup.unseen)
    if not len(unseen):
        return ids
    with raw_cursor() as cur:
        cur.execute(
            f"INSERT INTO {_STATEMENT} (server_id, userid, dbid, queryid, toplevel, database_name, "
            "user_name, query, query_truncated, text_status, first_seen_at, redacted_with) "
            "SELECT %s, u, d, q, t, dn, un, qt, tr, ts, %s, %s "
            "FROM unnest(%s::int8[], %s::int8[], %s::int8[], "
            "%s::bool[], %s::text[], %s::text[], %s::text[], %s::bool[], %s::text[]) "
            "AS n(u, d, q, t, dn, un, qt, tr, ts) "
            "RETURNING userid, dbid, queryid, toplevel::int, id",
            (
                server_id,
                first_seen_at,
                redacted_with,
                *_key_arrays(np.array([s.key for s in new], dtype=np.int64).reshape(-1, 4)),
                [s.database_name for s in new],
                [s.user_name for s in new],
                [s.text.query for s in new],
                [s.text.truncated for s in new],
                [s.text.status for s in new],
            ),
        )
        inserted = {(u, d, q, t): sid for u, d, q, t, sid in cur.fetchall()}
    ids[unseen] = [inserted[tuple(k)] for k in keys[unseen].tolist()]
    return ids


def update_texts(server_id: int, texts: dict[int, StatementText], *, redacted_with: int) -> None:
    """Store the texts read again for known statements (statement id -> text), redacted by the redaction's version
    `redacted_with`."""
    if not texts:
        return
    with raw_cursor() as cur:
        cur.execute(
            f"UPDATE {_STATEMENT} s SET query = u.q, query_truncated = u.tr, text_status = u.ts, "
            "redacted_with = %s "
            "FROM unnest(%s::int8[], %s::text[], %s::bool[], %s::text[]) AS u(id, q, tr, ts) "
            "WHERE s.server_id = %s AND s.id = u.id",
            (
                redacted_with,
                list(texts),
                [t.query for t in texts.values()],
                [t.truncated for t in texts.values()],
                [t.status for t in texts.values()],
                server_id,
            ),
        )


def save_server_state(state: ServerState) -> None:
    """Insert or replace a server's state in one round trip (update_or_create takes four); the
    columns are the model's."""
    values = [f.get_db_prep_save(getattr(state, f.attname), connection) for f in ServerState._meta.concrete_fields]
    with raw_cursor() as cur:
        cur.execute(_server_state_sql(), values)


@functools.cache
def _server_state_sql() -> str:
    columns = [f.column for f in ServerState._meta.concrete_fields]
    return (
        sql.SQL("INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT (server_id) DO UPDATE SET {sets}")
        .format(
            table=sql.Identifier(ServerState._meta.db_table),
            cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
            marks=sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            sets=sql.SQL(", ").join(
                sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in columns if c != "server_id"
            ),
        )
        .as_string()
    )


@dataclass
class NewSnapshot:
    """A snapshot to store: what was read of the server and, for a delta, the block of changed statements and
    their sums."""

    server_id: int
    facts: SnapshotFacts
    block: codec.Block | None  # None for a baseline
    totals: np.ndarray | None = None  # totals_of(block.counters) summed over its rows (TOTAL_NAMES)


SNAPSHOT_FIELDS = ("server_id", *SNAPSHOT_FACTS, "statements", *TOTAL_NAMES)


_INSERT_SNAPSHOT_SQL = (
    sql.SQL("INSERT INTO {} ({}) VALUES ({})")
    .format(
        sql.Identifier(TABLES.SNAPSHOT.name),
        sql.SQL(", ").join(sql.Identifier(f) for f in SNAPSHOT_FIELDS),
        sql.SQL(", ").join(sql.Placeholder() * len(SNAPSHOT_FIELDS)),
    )
    .as_string()
)


def insert_snapshot(row: NewSnapshot) -> None:
    """Insert one snapshot row with its encoded block and the server totals of the interval (the sums
    of its statements' deltas, as the statements reading summed them); its partition must exist (partitions.ensure,
    before the transaction)."""
    payload = None if row.block is None else codec.encode(row.block)
    sums = [None] * len(TOTAL_NAMES) if row.totals is None else row.totals.tolist()
    values = [row.server_id, *(getattr(row.facts, f) for f in SNAPSHOT_FACTS), payload, *sums]
    with raw_cursor() as cur:
        cur.execute(_INSERT_SNAPSHOT_SQL, values)


def delete_server_history(server_id: int) -> None:
    """Remove everything a server owns in the history store (history.tables.PER_SERVER); the
    caller deletes the server's row in the same transaction."""
    if not transaction.get_connection().in_atomic_block:
        # The lock below is released at commit: outside a transaction a collection could store
        # facts again before the server's row is gone.
        raise RuntimeError("delete_server_history must run inside the transaction that deletes the server")
    with connection.cursor() as cur:
        # Wait for a collection of this server that is under way (it holds this lock while it
        # stores), so that none commits facts after they were deleted.
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, server_id])
        for table in tables.PER_SERVER:
            cur.execute(f'DELETE FROM "{table.name}" WHERE server_id = %s', [server_id])


def statements_redact_again(*, version: int, redact: Callable[[str], str], limit: int = 500) -> int:
    """Up to `limit` stored texts redacted by a version of the redaction older than `version`, redacted again by
    `redact` (collectors.redact's, of that version), in one transaction; rows taken by another run at once are
    skipped. How many."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            f"SELECT server_id, id, query FROM {_STATEMENT} WHERE redacted_with < %s ORDER BY redacted_with "
            "LIMIT %s FOR UPDATE SKIP LOCKED",
            [version, limit],
        )
        rows = cur.fetchall()
        if not rows:
            return 0
        texts = [None if q is None else redact(q) for _, _, q in rows]
        cur.execute(
            f"UPDATE {_STATEMENT} s SET query = u.q, redacted_with = %s "
            "FROM unnest(%s::int8[], %s::int8[], %s::text[]) AS u(sid, id, q) "
            "WHERE s.server_id = u.sid AND s.id = u.id",
            [version, [r[0] for r in rows], [r[1] for r in rows], texts],
        )
    return len(rows)
