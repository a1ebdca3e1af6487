"""The console's own statements on a monitored server: those that end with its mark and ran as its monitoring role.

Every statement the console sends to a monitored server ends with its mark (connection.MarkedCursor), a comment on
a line of its own (a statement ending in a `--` comment would swallow it): `/* pgconsole 1a2b3c4d5e6f7a8b */`. The
token is this installation's: the first 16 hex digits of an HMAC-SHA256 keyed by SECRET_KEY (Django's salted_hmac,
with a salt of its own), so every process and host of one installation marks alike across restarts, and the key
cannot be had back from it; it signs nothing. pg_stat_statements keeps a statement's trailing comment in its text
on every version (PostgreSQL 18 drops a leading one), and a comment changes no query id.

The mark alone is not enough. The token is in every text the console leaves in pg_stat_statements, so whoever may
read other roles' texts (pg_read_all_stats, which pg_monitor grants) can copy it, and a monitored server's users
are not the console's. A statement is therefore the console's only when, besides, it ran as the role the console
connects as: its entry's userid is the oid of `current_user` in the server's last snapshot (ServerState.role_oid).
A user of another role who ends statements with the mark, the plain one or the token, hides nothing: they stay
listed. Only a session of the monitoring role itself can: to pg_stat_statements it is the console (and it reads
the token in its own entries): give the console a role of its own (docs/monitoring-role.md). An application that
shares the role keeps its unmarked statements listed.

Texts stored with the plain mark of older consoles (LEGACY_MARK) count, with the role condition: pg_stat_statements
keeps an entry's first text and the history reads a key's text once, so the console's entries made before the
token keep the plain mark for as long as they stay, and listing them would rank the console's collections among
the application's (and plan them). It opens no way to hide a statement that the token closes: the only sessions
that pass the role condition can read the token anyway. Where the role is not known (no snapshot stored it),
nothing counts as the console's: a statement of the console's listed costs a line, one hidden that a user
planted would be the forgery. After the monitoring role changes, the former role's statements are listed;
after SECRET_KEY changes, those marked under a key of SECRET_KEY_FALLBACKS are still recognised. A text stored
under COLLECTOR_REDACT_STRICT has lost every comment, the mark with them: listed too."""

from __future__ import annotations

from django.conf import settings
from django.utils.crypto import salted_hmac
from psycopg import sql

from history.tables import TABLES

LEGACY_MARK = "/* pgconsole */"
TOKEN_DIGITS = 16
_SALT = "pgconsole.history.own"


def token(secret_key: str) -> str:
    """The installation's token for `secret_key`: never the key, nor a signature of anything."""
    return salted_hmac(_SALT, "own statements", secret=secret_key, algorithm="sha256").hexdigest()[:TOKEN_DIGITS]


def _mark(secret_key: str) -> str:
    return f"/* pgconsole {token(secret_key)} */"


def own_mark() -> str:
    """The comment that ends every statement the console sends."""
    return _mark(settings.SECRET_KEY)


def marks() -> tuple[str, ...]:
    """Every mark a stored text of the console's may end with: this key's, the fallback keys', the plain one."""
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    return (*dict.fromkeys(map(_mark, keys)), LEGACY_MARK)


def marked_text(query: str) -> str:
    """On a line of its own: a statement ending in a -- comment would otherwise swallow it."""
    return f"{query}\n{own_mark()}"


def is_own(text: str | None, *, userid: int, role_oid: int | None) -> bool:
    """One of the console's own statements: its text ends with a mark and it ran as the monitoring role."""
    return role_oid is not None and userid == role_oid and text is not None and text.endswith(marks())


def own_sql(server_id: int, alias: str = "st") -> sql.Composable:
    """is_own in SQL, over the statement dimension's row `alias` of server `server_id` (true or false, never NULL;
    the role read once per query)."""
    by_length: dict[int, list[str]] = {}
    for mark in marks():
        by_length.setdefault(len(mark), []).append(mark)
    query, userid = sql.Identifier(alias, "query"), sql.Identifier(alias, "userid")
    ends = sql.SQL(" OR ").join(
        sql.SQL("right({}, {}) IN ({})").format(query, n, sql.SQL(", ").join(map(sql.Literal, found)))
        for n, found in by_length.items()
    )
    return sql.SQL(
        "coalesce({userid} = (SELECT role_oid FROM {state} WHERE server_id = {sid}) AND ({ends}), false)"
    ).format(userid=userid, state=sql.Identifier(TABLES.SERVER_STATE.name), sid=sql.Literal(server_id), ends=ends)
