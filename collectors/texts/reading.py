"""The texts reading: the query texts of statements never seen, and of known ones still without a text
(texts.py says which, and what an answer means), cut on the monitored server and redacted before they are stored.

A failure leaves the new statements pending: they are stored with their counters, and the next snapshots read
their texts first.
"""

from dataclasses import dataclass

import numpy as np
from django.conf import settings

from collectors import redact
from collectors.settings import instance
from collectors.statements import reading as statements_reading
from collectors.texts import texts
from collectors.unit import Collection, Failure, Reading, Sql
from history.public import TABLES, SnapshotWriter


@dataclass
class TextsRead:
    rows: np.ndarray  # rows of the statements' entries whose text was asked for
    found: texts.Texts


def read(snap: Collection) -> TextsRead:
    statements = snap.found(statements_reading.READING)
    budget = texts.TextBudget.from_settings()
    rows = texts.rows_to_read(statements.reading.sent_rows, statements.statements, statements.restarted)
    found = texts.read_texts(
        snap.conn,
        snap.meta,
        statements.cmap,
        statements.reading.entries.keys[rows],
        max_chars=texts.server_cut(settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"]),
        max_texts=budget.texts,
        budget_chars=budget.chars,
        already=statements.reading.texts,
    )
    if found.deferred:
        snap.notes.append(
            f"{found.deferred} query texts put off to the next snapshots: this one read its limit "
            f"({budget.texts:,} texts or {budget.chars / 2**20:g} MB of text; COLLECTOR_TEXTS_PER_SNAPSHOT, "
            "COLLECTOR_TEXT_BYTES_PER_SNAPSHOT)"
        )
    return TextsRead(rows, found)


def compute(snap: Collection, got: TextsRead) -> texts.Found:
    statements = snap.found(statements_reading.READING)
    new_statements, texts_found = texts.outcome(
        statements.reading.entries.keys,
        got.rows,
        statements.statements,
        got.found,
        settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"],
    )
    snap.made(statements_reading.READING).new_statements = new_statements  # stored with the statements' ids
    return texts.Found(new_statements, texts_found)


def persist(snap: Collection, found: texts.Found, writer: SnapshotWriter) -> None:
    """The texts read again for known statements (the new ones' come with their dimension rows, which the
    statements reading writes)."""
    writer.texts(found.texts_found, redacted_with=redact.VERSION)


READING = Reading(
    name="texts",
    what="query texts",
    sql=Sql(((instance.MIN_SERVER_VERSION, texts.texts_sql),)),  # toplevel in the key from 14 (extension 1.9)
    tables=(TABLES.STATEMENT,),
    delta_rules="none: a statement's text is kept once read (redacted, cut to QUERY_TEXT_MAX_BYTES), or why not",
    failure=Failure.OWN,
    read=read,
    compute=compute,
    persist=persist,
    after=("statements",),
    budget=texts.SNAPSHOT_BUDGET,
)
