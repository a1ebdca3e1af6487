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

from dataclasses import dataclass

import numpy as np
from django.conf import settings

from history import store
from history.models import TextStatus
from history.redact import clip, redact
from readings import unit
from readings.statements import pgss

# Known statements still without a text asked for again in one snapshot: each is one more row in
# the call that reads the server's query text file, which is read anyway for new keys.
RETRIES_PER_SNAPSHOT = 500
# A text is cut on the monitored server to the stored size plus this many characters, then redacted, then
# clipped to the stored size: a secret that crosses the stored size's edge (a URI password cut before its
# "@") is still whole when it is redacted, up to this length.
REDACTION_MARGIN_CHARS = 4096
# The texts reading's budget (readings/texts/reading.py): texts and characters of text per snapshot.
SNAPSHOT_BUDGET = unit.Budget(rows="TEXTS_PER_SNAPSHOT", bytes="TEXT_BYTES_PER_SNAPSHOT")


def server_cut(max_bytes: int) -> int:
    """The characters read of a text whose stored size is max_bytes (a character is at least a byte)."""
    return max_bytes + REDACTION_MARGIN_CHARS


def rows_to_read(reading: pgss.Reading, statements: store.StatementLookup, restarted: np.ndarray) -> np.ndarray:
    """Rows whose text to ask for, most wanted first: keys never seen (in row order), statements whose text
    a snapshot put off, then known statements without a text whose entry the server just sent (evicted
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
        elif reading.sent_rows[row] and (status != TextStatus.UNAVAILABLE or new_entry[row]):
            retry.append(row)
    rows = [np.flatnonzero(statements.unseen), np.array(pending, np.int64), np.array(retry[:RETRIES_PER_SNAPSHOT])]
    return np.concatenate(rows).astype(np.int64)


@dataclass
class Found:
    """What a snapshot's texts bring to the statements' dimension."""

    new_statements: list[store.NewStatement]  # the rows of keys never seen, in row order
    texts_found: dict[int, store.StatementText]  # statement id -> its text read again (or a new reason)


@dataclass(frozen=True)
class Budget:
    """How much text one snapshot reads (settings COLLECTOR_TEXTS_PER_SNAPSHOT, COLLECTOR_TEXT_BYTES_PER_SNAPSHOT)."""

    texts: int
    chars: int

    def in_scan(self, max_chars: int) -> int:
        """How many new keys' texts the counters' scan may bring: as many as the whole budget holds at their
        longest, so that the scan alone never passes it."""
        return max(1, min(self.texts, self.chars // max_chars))

    @classmethod
    def from_settings(cls) -> Budget:
        return cls(texts=int(SNAPSHOT_BUDGET.value("rows")), chars=int(SNAPSHOT_BUDGET.value("bytes")))


def statement_text(read: pgss.TextRead, max_bytes: int) -> store.StatementText:
    if not read.visible:
        return store.StatementText(None, False, TextStatus.NOT_VISIBLE)
    if not read.present:
        return store.StatementText(None, False, TextStatus.EVICTED)
    if read.text is None:
        return store.StatementText(None, False, TextStatus.UNAVAILABLE)
    text, truncated = clip(redact(read.text, strict=settings.COLLECTOR["REDACT_STRICT"]), max_bytes)
    return store.StatementText(text, truncated or read.cut, TextStatus.STORED)


def outcome(
    keys: np.ndarray, rows: np.ndarray, statements: store.StatementLookup, texts: pgss.Texts, max_bytes: int
) -> tuple[list[store.NewStatement], dict[int, store.StatementText]]:
    """(the dimension rows of the keys never seen, in row order; statement id -> text of the known
    statements whose text was read, where that changed anything)."""
    new_statements: list[store.NewStatement] = []
    changed: dict[int, store.StatementText] = {}
    for row, status in zip(rows.tolist(), statements.text_status(rows), strict=True):
        key = tuple(keys[row].tolist())
        read = texts.by_key.get(key)
        if read is None:  # past the snapshot's budget
            if statements.unseen[row]:
                text = store.StatementText(None, False, TextStatus.PENDING)
                new_statements.append(
                    store.NewStatement(key, texts.databases.get(key[1], ""), texts.users.get(key[0], ""), text)
                )
            continue
        text = statement_text(read, max_bytes)
        if statements.unseen[row]:
            new_statements.append(
                store.NewStatement(key, texts.databases.get(key[1], ""), texts.users.get(key[0], ""), text)
            )
        elif text.status != status:
            changed[int(statements.ids[row])] = text
    return new_statements, changed


def nothing_read(keys: np.ndarray, statements: store.StatementLookup) -> Found:
    """What the statements' dimension gets when no text was read (the texts reading failed): every new
    statement is stored pending, and the next snapshots read its text first."""
    rows = np.flatnonzero(statements.unseen)
    new_statements, texts_found = outcome(keys, rows, statements, pgss.Texts(), 0)
    return Found(new_statements, texts_found)
