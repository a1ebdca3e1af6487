"""Query texts in a snapshot: which keys' texts to ask the monitored server for, and what its answer
means for the statement dimension (a text, or why there is none: TextStatus).

Texts are read after the counters, in a second call: an entry evicted in between leaves its key
without a text. That is never final: a known statement still without a text is asked for again
whenever its entry is surely there (the server just sent its counters), a bounded number per snapshot.
"""

import numpy as np

from collectors import history, pgss
from collectors.models import TextStatus
from collectors.redact import clip, redact

# Known statements still without a text asked for again in one snapshot: each is one more row in
# the call that reads the server's query text file, which is read anyway for new keys.
RETRIES_PER_SNAPSHOT = 500
# A text is cut on the monitored server to the stored size plus this many characters, then redacted, then
# clipped to the stored size: a secret that crosses the stored size's edge (a URI password cut before its
# "@") is still whole when it is redacted, up to this length.
REDACTION_MARGIN_CHARS = 4096


def server_cut(max_bytes: int) -> int:
    """The characters read of a text whose stored size is max_bytes (a character is at least a byte)."""
    return max_bytes + REDACTION_MARGIN_CHARS


def rows_to_read(reading: pgss.Reading, statements: history.StatementLookup) -> np.ndarray:
    """Rows of keys never seen, and of known statements without a text whose entry the server just
    sent (evicted before their text could be read, or hidden from the role when it was). A text that
    pg_stat_statements did not keep comes back only with a new entry, so only then is it asked for."""
    missing = np.flatnonzero(np.isin(statements.ids, list(statements.missing_text)) & reading.sent_rows)
    new_entry = reading.prev_index < 0
    retry = [
        row
        for row, status in zip(missing.tolist(), statements.text_status(missing), strict=True)
        if status != TextStatus.UNAVAILABLE or new_entry[row]
    ][:RETRIES_PER_SNAPSHOT]
    return np.sort(np.concatenate([np.flatnonzero(statements.unseen), np.array(retry, np.int64)]))


def statement_text(read: pgss.TextRead, max_bytes: int) -> history.StatementText:
    if not read.visible:
        return history.StatementText(None, False, TextStatus.NOT_VISIBLE)
    if not read.present:
        return history.StatementText(None, False, TextStatus.EVICTED)
    if read.text is None:
        return history.StatementText(None, False, TextStatus.UNAVAILABLE)
    text, truncated = clip(redact(read.text), max_bytes)
    return history.StatementText(text, truncated or read.cut, TextStatus.STORED)


def outcome(keys: np.ndarray, rows: np.ndarray, statements: history.StatementLookup, texts: pgss.Texts,
            max_bytes: int) -> tuple[list[history.NewStatement], dict[int, history.StatementText]]:  # fmt: skip
    """(the dimension rows of the keys never seen, in row order; statement id -> text of the known
    statements whose text was read, where that changed anything)."""
    new_statements: list[history.NewStatement] = []
    changed: dict[int, history.StatementText] = {}
    for row, status in zip(rows.tolist(), statements.text_status(rows), strict=True):
        key = tuple(keys[row].tolist())
        text = statement_text(texts.by_key[key], max_bytes)
        if statements.unseen[row]:
            new_statements.append(history.NewStatement(
                key, texts.databases.get(key[1], ""), texts.users.get(key[0], ""), text
            ))  # fmt: skip
        elif text.status != status:
            changed[int(statements.ids[row])] = text
    return new_statements, changed
