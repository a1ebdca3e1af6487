"""What the server page reads besides the series and the top list: the pg_stat_statements settings as
of the latest snapshot, their changes between snapshots over a window, the recent failed collections,
the database and user names of the server's statements, and given statements' totals over a window
(a page of the top list against the previous period)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from history.public import TABLES, FailedCollection, ServerState
from readtier import db, statements
from readtier.statements import MAX_PAGE_SIZE, Page, StatementFilters, StatementTotals
from readtier.windows import Window

# Snapshot column -> the setting's name, in the order the page lists them (a change of any is marked).
CONFIG_COLUMNS: dict[str, str] = {
    "entries_max": "pg_stat_statements.max",
    "track": "pg_stat_statements.track",
    "track_utility": "pg_stat_statements.track_utility",
    "track_planning": "pg_stat_statements.track_planning",
    "save": "pg_stat_statements.save",
    "sample_rate": "pg_stat_statements.sample_rate",
    "server_version_num": "server version",
    "extension_version": "extension version",
}


def version_text(num: int | None) -> str | None:
    """server_version_num as PostgreSQL writes it (170004 -> "17.4")."""
    if num is None:
        return None
    return f"{num // 10000}.{num % 10000}"


def setting_text(column: str, value) -> str | None:
    """A snapshot column's value as a DBA reads it in postgresql.conf (None: the setting does not exist)."""
    if value is None:
        return None
    if column == "server_version_num":
        return version_text(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# -- settings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSettings:
    """pg_stat_statements' settings as of the latest snapshot. None: the GUC does not exist on that
    server (track_planning needs 13; sample_rate exists only in forks), or no snapshot yet."""

    taken_at: datetime | None  # the snapshot they come from; None: never collected
    server_version_num: int | None
    extension_version: str | None
    entries_max: int | None  # pg_stat_statements.max
    track: str | None
    track_utility: bool | None
    track_planning: bool | None
    save: bool | None
    sample_rate: float | None

    def text(self, column: str) -> str | None:
        return setting_text(column, getattr(self, column))


def server_settings(*, server_id: int) -> ServerSettings:
    """The settings read by the server's latest snapshot (one query)."""
    columns = ", ".join(CONFIG_COLUMNS)
    rows = db.fetchall(
        f"SELECT taken_at, {columns} FROM {TABLES.SNAPSHOT.name} WHERE server_id = %s ORDER BY taken_at DESC LIMIT 1",
        [server_id],
    )
    if not rows:
        return ServerSettings(None, None, None, None, None, None, None, None, None)
    taken_at, *values = rows[0]
    f = dict(zip(CONFIG_COLUMNS, values, strict=True))
    return ServerSettings(
        taken_at=taken_at,
        server_version_num=f["server_version_num"],
        extension_version=f["extension_version"],
        entries_max=f["entries_max"],
        track=f["track"],
        track_utility=f["track_utility"],
        track_planning=f["track_planning"],
        save=f["save"],
        sample_rate=f["sample_rate"],
    )


def reading_status(*, server_id: int, reading: str) -> dict:
    """What a reading said of itself at its last read (ServerState.readings: collectors.unit), {} before any."""
    status = ServerState.objects.filter(server_id=server_id).values_list("readings", flat=True).first() or {}
    return status.get(reading) or {}


def wait_profile_cap(*, server_id: int) -> int | None:
    """COLLECTOR_WAIT_PROFILE_MAX_ROWS as it was when the latest snapshot found pg_wait_sampling's profile larger
    and did not read it (its wait events then come from pg_stat_activity); None: not so."""
    return reading_status(server_id=server_id, reading="waits").get("profile_over_cap")


# -- changes between snapshots ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigChange:
    at: datetime  # the first snapshot that read the new value
    setting: str  # "pg_stat_statements.max", ..., "server version", "extension version"
    before: str | None  # None: the setting did not exist (e.g. before an upgrade to 13)
    after: str | None


def config_changes(*, server_id: int, window: Window) -> list[ConfigChange]:
    """Each setting that differs between a snapshot taken in the window and the one before it (the
    first one in the window against the last one before it), oldest first. One query; raw snapshots
    only, so changes older than the raw retention are not seen."""
    cols = list(CONFIG_COLUMNS)
    lagged = ", ".join(f"{c}, lag({c}) OVER w AS prev_{c}" for c in cols)
    changed = " OR ".join(f"{c} IS DISTINCT FROM prev_{c}" for c in cols)
    snapshot = TABLES.SNAPSHOT.name
    rows = db.fetchall(
        f"SELECT taken_at, {', '.join(cols)}, {', '.join(f'prev_{c}' for c in cols)} FROM ("
        f"  SELECT taken_at, row_number() OVER w AS n, {lagged} FROM {snapshot} "
        "   WHERE server_id = %(s)s AND taken_at < %(end)s AND taken_at >= coalesce("
        f"    (SELECT max(taken_at) FROM {snapshot} WHERE server_id = %(s)s AND taken_at < %(start)s), %(start)s) "
        "   WINDOW w AS (ORDER BY taken_at)"
        f") d WHERE n > 1 AND taken_at >= %(start)s AND ({changed}) ORDER BY taken_at",
        {"s": server_id, "start": window.start, "end": window.end},
    )
    out = []
    n = len(cols)
    for taken_at, *values in rows:
        now, before = values[:n], values[n:]
        for column, a, b in zip(cols, before, now, strict=True):
            if a != b:
                out.append(
                    ConfigChange(taken_at, CONFIG_COLUMNS[column], setting_text(column, a), setting_text(column, b))
                )
    return out


# -- failed collections ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecentError:
    at: datetime
    error_class: str  # collectors.errors code: unreachable, auth_failed, timeout, ...
    message: str


def recent_errors(*, server_id: int, limit: int = 10) -> list[RecentError]:
    """The server's latest failed collections, newest first (the collector keeps the last 50)."""
    rows = db.fetchall(
        f"SELECT at, error_class, message FROM {FailedCollection._meta.db_table} WHERE server_id = %s "
        "ORDER BY at DESC, id DESC LIMIT %s",
        [server_id, limit],
    )
    return [RecentError(at, error_class, message) for at, error_class, message in rows]


# -- the statements' dimension ---------------------------------------------------------------------


@dataclass(frozen=True)
class StatementNames:
    """The database and user names the server's statements ran under (for filters)."""

    databases: list[str]
    users: list[str]


def statement_names(*, server_id: int) -> StatementNames:
    databases, users = db.fetchone(
        "SELECT coalesce(array_agg(DISTINCT database_name ORDER BY database_name), '{}'), "
        f"coalesce(array_agg(DISTINCT user_name ORDER BY user_name), '{{}}') FROM {TABLES.STATEMENT.name} "
        "WHERE server_id = %s",
        [server_id],
    )
    return StatementNames(list(databases), list(users))


class WindowTotals(dict[int, StatementTotals]):
    """Statement totals by statement id, with the seconds of the window the history covers (span_s)."""

    span_s: float = 0.0


def statements_in(*, server_id: int, window: Window, statement_ids: list[int]) -> WindowTotals:
    """The totals over a window of the given statements (those that ran in it), by statement id: a
    page of the top list against the previous period (top_statements filtered to those statements, at
    most MAX_PAGE_SIZE of them), without summing every statement of the server as compare_windows does."""
    ids = tuple(sorted(set(statement_ids)))
    if len(ids) > MAX_PAGE_SIZE:
        raise ValueError(f"{len(ids)} statements: at most {MAX_PAGE_SIZE} at a time")
    top = statements.top_statements(
        server_id=server_id,
        window=window,
        filters=StatementFilters(statement_ids=ids),
        page=Page(1, max(len(ids), 1)),
    )
    out = WindowTotals((r.statement_id, r) for r in top.rows)
    out.span_s = top.planning.span_s
    return out
