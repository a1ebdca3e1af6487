"""Query texts in a snapshot: which keys' texts to ask the monitored server for, and what its answer
means for the statement dimension (a text, or why there is none: TextStatus).

Texts are read after the counters, in a second call: an entry evicted in between leaves its key
without a text. That is never final: a known statement still without a text is asked for again
whenever its entry is surely there (the server just sent its counters), a bounded number per snapshot.
While a server churns (an entry evicted and created again between two snapshots is the first to be
evicted again), the texts of new keys and of known statements still without one come in the counters'
scan itself (pgss.read_entries), so that no eviction can fall between the two.

A snapshot reads at most COLLECTOR_TEXTS_PER_SNAPSHOT texts and about COLLECTOR_TEXT_BYTES_PER_SNAPSHOT
of text (a server that invents thousands of statements a minute, or keeps megabytes of text each, must not
fill the worker's memory): the statements past that are stored without their text for now, status
pending, and read first by the next snapshots, whether their counters moved or not.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import psycopg
from django.conf import settings
from psycopg import sql

from collectors import unit
from collectors.errors import from_query_error
from collectors.redact import clip, redact
from collectors.settings.instance import ServerMeta
from collectors.statements.columns import ColumnMap
from history.public import NewStatement, StatementLookup, StatementText, TextStatus


@dataclass(frozen=True)
class TextRead:
    """What pg_stat_statements said of one key's text when asked."""

    present: bool  # the entry was there (else: evicted since the counters were read, or hidden)
    visible: bool  # the role may see this key's queryid and text (its own role, or pg_read_all_stats)
    text: str | None  # None while present: pg_stat_statements kept no text (query text file discarded)
    cut: bool = False  # the server sent only the text's first characters (read_texts' max_chars)


@dataclass
class Texts:
    by_key: dict[tuple[int, int, int, int], TextRead] = field(default_factory=dict)
    databases: dict[int, str] = field(default_factory=dict)
    users: dict[int, str] = field(default_factory=dict)
    deferred: int = 0  # keys asked for whose text was not read (past the snapshot's budget)


def _texts_query(meta: ServerMeta, cmap: ColumnMap) -> str:
    return texts_sql(meta.extension_schema, cmap.has_toplevel)


@functools.cache
def texts_sql(schema: str, has_toplevel: bool) -> str:
    # Outer join from the keys asked for: a key without a matching entry tells evicted (visible to
    # the role, gone) from hidden (another role's entry, whose queryid this role cannot see), as
    # both look the same from the entry side. The entries are filtered by queryid before the join,
    # so the server never sorts or hashes the texts of all its entries.
    toplevel = "toplevel::int::int8" if has_toplevel else "1::int8"
    text = f"""
SELECT k.userid, k.dbid, k.queryid, k.toplevel, s.queryid IS NOT NULL,
       k.userid = (SELECT oid::int8 FROM pg_roles WHERE rolname = current_user)
         OR pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       left(s.query, %s), length(s.query) > %s
FROM unnest(%s::int8[], %s::int8[], %s::int8[], %s::int8[]) AS k(userid, dbid, queryid, toplevel)
LEFT JOIN (SELECT userid::int8, dbid::int8, queryid, {toplevel} AS toplevel, query
           FROM {{schema}}.pg_stat_statements(true) WHERE queryid = ANY(%s)) s
       USING (userid, dbid, queryid, toplevel)
"""
    return sql.SQL(text).format(schema=sql.Identifier(schema)).as_string()


TEXT_BATCH = 500  # keys asked for in one call (each call reads the server's query text file once)


def bounded(read: TextRead, max_chars: int) -> TextRead:
    """The text as the console asked for it: cut to `max_chars` here too when the server sent more (its SQL cuts
    it there, and a server is not trusted to have done so), and marked cut."""
    if read.text is None or len(read.text) <= max_chars:
        return read
    return TextRead(read.present, read.visible, read.text[:max_chars], cut=True)


def read_texts(
    conn: psycopg.Connection,
    meta: ServerMeta,
    cmap: ColumnMap,
    keys: np.ndarray,
    *,
    max_chars: int,
    max_texts: int | None = None,
    budget_chars: int | None = None,
    already: dict[tuple[int, int, int, int], TextRead] | None = None,
) -> Texts:
    """Texts (and database/role names) for the given (userid, dbid, queryid, toplevel) keys, each cut to its
    first `max_chars` characters on the server: a 1 MB text never crosses the wire nor sits in our memory.

    In order, at most `max_texts` of them, and no more keys once `budget_chars` characters came back: a call
    never asks for more keys than the rest of the budget could hold at `max_chars` each, so what is read
    stays within the budget plus one text. Keys not read are missing from `by_key` (`deferred` counts them).

    `already`: texts read in the counters' scan (Reading.texts); those keys are not asked for again and count
    against the budget, and every key's database and role names are read."""
    out = Texts()
    if not len(keys):
        return out
    names = [keys[:, j].tolist() for j in range(2)]
    if already:
        known = [tuple(k) in already for k in keys.tolist()]
        out.by_key = {tuple(k): already[tuple(k)] for k, got in zip(keys.tolist(), known, strict=True) if got}
        keys = keys[~np.array(known, bool)]
        spent = sum(len(t.text) for t in out.by_key.values() if t.text is not None)
        max_texts = None if max_texts is None else max(0, max_texts - len(out.by_key))
        budget_chars = None if budget_chars is None else max(0, budget_chars - spent)
    columns = [keys[:, j].tolist() for j in range(4)]
    limit = len(keys) if max_texts is None else min(len(keys), max_texts)
    left = budget_chars
    try:
        query, start = _texts_query(meta, cmap), 0
        while start < limit and (left is None or left > 0):
            size = min(TEXT_BATCH, limit - start, TEXT_BATCH if left is None else max(1, left // max_chars))
            part = [c[start : start + size] for c in columns]
            params = (max_chars, max_chars, *part, sorted(set(part[2])))
            for userid, dbid, queryid, top, present, visible, text, cut in conn.execute(query, params):
                read = bounded(TextRead(present, visible, text, bool(cut)), max_chars)
                out.by_key[(userid, dbid, queryid, top)] = read
                if left is not None and read.text is not None:
                    left -= len(read.text)
            start += size
        out.deferred = len(keys) - start
        out.databases = dict(
            conn.execute(
                "SELECT oid::int8, datname FROM pg_database WHERE oid::int8 = ANY(%s)", (sorted(set(names[1])),)
            ).fetchall()
        )
        out.users = dict(
            conn.execute(
                "SELECT oid::int8, rolname FROM pg_roles WHERE oid::int8 = ANY(%s)", (sorted(set(names[0])),)
            ).fetchall()
        )
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading query texts") from exc
    return out


# Known statements still without a text asked for again in one snapshot: each is one more row in
# the call that reads the server's query text file, which is read anyway for new keys.
RETRIES_PER_SNAPSHOT = 500
# A text is cut on the monitored server to the stored size plus this many characters, then redacted, then
# clipped to the stored size: a secret that crosses the stored size's edge (a URI password cut before its
# "@") is still whole when it is redacted, up to this length.
REDACTION_MARGIN_CHARS = 4096
# The texts reading's budget (collectors/texts/reading.py): texts and characters of text per snapshot.
SNAPSHOT_BUDGET = unit.Budget(rows="TEXTS_PER_SNAPSHOT", bytes="TEXT_BYTES_PER_SNAPSHOT")


def server_cut(max_bytes: int) -> int:
    """The characters read of a text whose stored size is max_bytes (a character is at least a byte)."""
    return max_bytes + REDACTION_MARGIN_CHARS


def rows_to_read(sent_rows: np.ndarray, statements: StatementLookup, restarted: np.ndarray) -> np.ndarray:
    """Rows whose text to ask for, most wanted first: keys not in the previous state (in row order; those the
    dimension knows, back after an eviction, keep their stored text: statements' settle), statements whose text
    a snapshot put off, then known statements without a text whose entry the server just sent (`sent_rows`, evicted
    before their text could be read, or hidden from the role when it was). A text that pg_stat_statements
    did not keep comes back only with a new entry, so only then is it asked for: a key not in the previous
    state, or one evicted and created again in between (its counters went back, or its stats_since moved):
    `restarted`, deltas.restarted_rows of the reading."""
    missing = np.flatnonzero(np.isin(statements.ids, list(statements.missing_text)))
    new_entry = restarted
    pending, retry = [], []
    for row, status in zip(missing.tolist(), statements.text_status(missing), strict=True):
        if status == TextStatus.PENDING:
            pending.append(row)
        elif sent_rows[row] and (status != TextStatus.UNAVAILABLE or new_entry[row]):
            retry.append(row)
    rows = [np.flatnonzero(statements.unseen), np.array(pending, np.int64), np.array(retry[:RETRIES_PER_SNAPSHOT])]
    return np.concatenate(rows).astype(np.int64)


@dataclass
class Found:
    """What a snapshot's texts bring to the statements' dimension."""

    new_statements: list[NewStatement]  # the rows of keys never seen, in row order
    texts_found: dict[int, StatementText]  # statement id -> its text read again (or a new reason)


@dataclass(frozen=True)
class TextBudget:
    """How much text one snapshot reads (settings COLLECTOR_TEXTS_PER_SNAPSHOT, COLLECTOR_TEXT_BYTES_PER_SNAPSHOT)."""

    texts: int
    chars: int

    def in_scan(self, max_chars: int) -> int:
        """How many new keys' texts the counters' scan may bring: as many as the whole budget holds at their
        longest, so that the scan alone never passes it."""
        return max(1, min(self.texts, self.chars // max_chars))

    @classmethod
    def from_settings(cls) -> TextBudget:
        return cls(texts=int(SNAPSHOT_BUDGET.value("rows")), chars=int(SNAPSHOT_BUDGET.value("bytes")))


def statement_text(read: TextRead, max_bytes: int) -> StatementText:
    if not read.visible:
        return StatementText(None, False, TextStatus.NOT_VISIBLE)
    if not read.present:
        return StatementText(None, False, TextStatus.EVICTED)
    if read.text is None:
        return StatementText(None, False, TextStatus.UNAVAILABLE)
    text, truncated = clip(redact(read.text, strict=settings.COLLECTOR["REDACT_STRICT"]), max_bytes)
    return StatementText(text, truncated or read.cut, TextStatus.STORED)


def outcome(
    keys: np.ndarray, rows: np.ndarray, statements: StatementLookup, texts: Texts, max_bytes: int
) -> tuple[list[NewStatement], dict[int, StatementText]]:
    """(the dimension rows of the keys never seen, in row order; statement id -> text of the known
    statements whose text was read, where that changed anything)."""
    new_statements: list[NewStatement] = []
    changed: dict[int, StatementText] = {}
    for row, status in zip(rows.tolist(), statements.text_status(rows), strict=True):
        key = tuple(keys[row].tolist())
        read = texts.by_key.get(key)
        if read is None:  # past the snapshot's budget
            if statements.unseen[row]:
                text = StatementText(None, False, TextStatus.PENDING)
                new_statements.append(
                    NewStatement(key, texts.databases.get(key[1], ""), texts.users.get(key[0], ""), text)
                )
            continue
        text = statement_text(read, max_bytes)
        if statements.unseen[row]:
            new_statements.append(NewStatement(key, texts.databases.get(key[1], ""), texts.users.get(key[0], ""), text))
        elif status is not None and text.status != status:  # None: a returning key's, stored already
            changed[int(statements.ids[row])] = text
    return new_statements, changed


def nothing_read(keys: np.ndarray, statements: StatementLookup) -> Found:
    """What the statements' dimension gets when no text was read (the texts reading failed): every new
    statement is stored pending, and the next snapshots read its text first."""
    rows = np.flatnonzero(statements.unseen)
    new_statements, texts_found = outcome(keys, rows, statements, Texts(), 0)
    return Found(new_statements, texts_found)
