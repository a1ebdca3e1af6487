"""The console's own statements on a monitored server, told apart by what they are, not by who runs them.

Every statement the console sends to a monitored server ends with OWN_MARK (connection.MarkedCursor), a comment
as pganalyze's collector marks its own. pg_stat_statements keeps a statement's trailing comment in its text on
every version (PostgreSQL 18 drops a leading one: its texts begin at the statement's first token), so the
console's collections are recognised in the history whatever role they ran as: a server monitored as `postgres`,
whose application connects as `postgres` too, keeps the application's statements listed. A comment changes no
query id; only the texts carry the mark. An entry whose text was stored before the mark (by an older console, or
by a client that ran the same query first) stays unmarked, and listed."""

OWN_MARK = "/* pgconsole */"


def marked_text(query: str) -> str:
    """On a line of its own: a statement ending in a -- comment would otherwise swallow it."""
    return f"{query}\n{OWN_MARK}"


def is_own(text: str | None) -> bool:
    return text is not None and text.endswith(OWN_MARK)
