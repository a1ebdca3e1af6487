"""SQL against monitored servers for pg_stat_statements: what is installed, the counters, the texts.

Cost on the monitored server matters (this runs every minute on production): counters are read
with showtext := false through COPY BINARY; texts (which make the server read its whole query
text file) only for keys never seen before, in one call.
"""
import re
from dataclasses import dataclass, field

import numpy as np
import psycopg
from psycopg import sql

from collectors import binary_copy
from collectors.columns import (
    COUNTER_NAMES,
    GAUGE_NAMES,
    ROW_COLUMNS,
    ColumnMap,
    build_column_map,
)
from collectors.deltas import Entries
from collectors.errors import (
    ExtensionMissing,
    NotPreloaded,
    UnsupportedVersion,
    from_query_error,
)

MIN_SERVER_VERSION = 130000
SETTING_NAMES = ("max", "track", "track_utility", "track_planning", "save", "sample_rate")

META_SQL = """
SELECT current_setting('server_version_num')::int,
       (extract(epoch FROM clock_timestamp()) * 1000000)::int8,
       (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::int8,
       current_database(),
       (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'pg_stat_statements'),
       (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'pg_stat_statements'),
       (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'pg_wait_sampling'),
       (SELECT coalesce(json_object_agg(name, setting), '{}'::json) FROM pg_settings
         WHERE name LIKE 'pg\\_stat\\_statements.%' OR name = 'pg_wait_sampling.profile_period'),
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')
"""

COLUMNS_SQL = """
SELECT a.name
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace,
     unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(name, mode, ord)
WHERE n.nspname = %s AND p.proname = 'pg_stat_statements' AND p.pronargs = 1 AND a.mode = 'o'
ORDER BY a.ord
"""


@dataclass
class ServerMeta:
    server_version_num: int
    taken_at_us: int
    postmaster_start_us: int
    database: str
    extension_version: str
    extension_schema: str
    wait_sampling_schema: str | None
    settings: dict[str, str]
    reads_all_stats: bool

    def setting(self, name: str) -> str | None:
        return self.settings.get(f"pg_stat_statements.{name}")

    def flag(self, name: str) -> bool | None:
        value = self.setting(name)
        return None if value is None else value == "on"

    @property
    def has_info_view(self) -> bool:
        return _version_tuple(self.extension_version) >= (1, 9)


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def read_meta(conn: psycopg.Connection) -> ServerMeta:
    try:
        row = conn.execute(META_SQL).fetchone()
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading server information") from exc
    version_num, taken_at_us, pm_start_us, dbname, extversion, schema, ws_schema, settings_json, all_stats = row
    if version_num < MIN_SERVER_VERSION:
        major = version_num // 10000
        raise UnsupportedVersion(
            f"PostgreSQL {major} is not supported: the console needs PostgreSQL 13 or newer "
            f"(server_version_num {version_num})"
        )
    if extversion is None:
        raise ExtensionMissing(
            f"the pg_stat_statements extension is not created in database {dbname!r}: "
            "run CREATE EXTENSION pg_stat_statements there as a superuser"
        )
    settings = dict(settings_json or {})
    if "pg_stat_statements.max" not in settings:
        raise NotPreloaded(
            "pg_stat_statements is not loaded: add it to shared_preload_libraries and restart the server"
        )
    return ServerMeta(
        server_version_num=version_num,
        taken_at_us=taken_at_us,
        postmaster_start_us=pm_start_us,
        database=dbname,
        extension_version=extversion,
        extension_schema=schema,
        wait_sampling_schema=ws_schema,
        settings=settings,
        reads_all_stats=bool(all_stats),
    )


_column_maps: dict[tuple[int, str, str], ColumnMap] = {}


def column_map(conn: psycopg.Connection, server_id: int, meta: ServerMeta) -> ColumnMap:
    """The columns of the installed extension version, discovered once per version per process."""
    cache_key = (server_id, meta.extension_version, meta.extension_schema)
    found = _column_maps.get(cache_key)
    if found is None:
        try:
            names = [r[0] for r in conn.execute(COLUMNS_SQL, (meta.extension_schema,))]
        except psycopg.Error as exc:
            raise from_query_error(exc, "discovering pg_stat_statements columns") from exc
        if not names:
            raise ExtensionMissing(
                f"function {meta.extension_schema}.pg_stat_statements(boolean) not found "
                f"(extension version {meta.extension_version})"
            )
        found = build_column_map(meta.extension_version, names)
        _column_maps[cache_key] = found
    return found


def read_info(conn: psycopg.Connection, meta: ServerMeta) -> tuple[int | None, int | None]:
    """(dealloc, stats_reset in epoch µs) from pg_stat_statements_info, or (None, None) before 1.9."""
    if not meta.has_info_view:
        return None, None
    query = sql.SQL(
        "SELECT dealloc, (extract(epoch FROM stats_reset) * 1000000)::int8 FROM {}.pg_stat_statements_info"
    ).format(sql.Identifier(meta.extension_schema))
    try:
        dealloc, reset_us = conn.execute(query).fetchone()
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading pg_stat_statements_info") from exc
    return dealloc, reset_us


@dataclass
class Reading:
    entries: Entries
    hidden: int  # entries of other users whose queryid this role cannot see
    total: int  # all entries in pg_stat_statements, visible or not


def read_entries(conn: psycopg.Connection, meta: ServerMeta, cmap: ColumnMap) -> Reading:
    query = sql.SQL("COPY (SELECT {cols} FROM {schema}.pg_stat_statements(false)) TO STDOUT (FORMAT binary)").format(
        cols=sql.SQL(cmap.select_list), schema=sql.Identifier(meta.extension_schema)
    )
    chunks: list[bytes] = []
    try:
        with conn.cursor() as cur, cur.copy(query) as copy:
            for chunk in copy:
                chunks.append(bytes(chunk))
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading pg_stat_statements") from exc
    rows = binary_copy.parse(b"".join(chunks), ROW_COLUMNS)
    visible = rows[rows["hidden"] == 0]
    entries = Entries(
        keys=np.column_stack([visible[k] for k in ("userid", "dbid", "queryid", "toplevel")]).astype(np.int64),
        counters=np.column_stack([visible[c] for c in COUNTER_NAMES]).astype(np.int64)
        if len(visible)
        else np.empty((0, len(COUNTER_NAMES)), np.int64),
        gauges=np.column_stack([visible[g] for g in GAUGE_NAMES]).astype(np.float64)
        if len(visible)
        else np.empty((0, len(GAUGE_NAMES)), np.float64),
        stats_since_us=visible["stats_since_us"].astype(np.int64),
        minmax_stats_since_us=visible["minmax_stats_since_us"].astype(np.int64),
    )
    if entries.keys.shape != (len(visible), 4):
        entries.keys = entries.keys.reshape(len(visible), 4)
    return Reading(entries=entries, hidden=int(len(rows) - len(visible)), total=int(len(rows)))


# --- texts and names, for keys never seen before ---------------------------------------------

_SECRET_PATTERNS = (
    # CREATE/ALTER ROLE ... [ENCRYPTED] PASSWORD 'secret' (stored raw before PostgreSQL 16)
    (re.compile(r"(\bPASSWORD\s+)'(?:[^']|'')*'", re.IGNORECASE), r"\1'<redacted>'"),
    # OPTIONS (password 'secret') in user mappings and foreign servers
    (re.compile(r"(\bpassword\s*)'(?:[^']|'')*'", re.IGNORECASE), r"\1'<redacted>'"),
    # conninfo strings: password=secret
    (re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']+)", re.IGNORECASE), r"\1<redacted>"),
    # URIs: postgresql://user:secret@host
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@']+:)[^\s@/']+@", re.IGNORECASE), r"\1<redacted>@"),
)


def redact(text: str) -> str:
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def clip(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True


@dataclass
class Texts:
    by_key: dict[tuple[int, int, int, int], str] = field(default_factory=dict)
    databases: dict[int, str] = field(default_factory=dict)
    users: dict[int, str] = field(default_factory=dict)


def read_texts(conn: psycopg.Connection, meta: ServerMeta, cmap: ColumnMap, keys: np.ndarray) -> Texts:
    """Texts (and database/role names) for the given (userid, dbid, queryid, toplevel) keys."""
    out = Texts()
    if not len(keys):
        return out
    toplevel = "toplevel::int" if cmap.has_toplevel else "1"
    query = sql.SQL(
        "SELECT userid::int8, dbid::int8, queryid, {toplevel}, query "
        "FROM {schema}.pg_stat_statements(true) WHERE queryid = ANY(%s)"
    ).format(toplevel=sql.SQL(toplevel), schema=sql.Identifier(meta.extension_schema))
    wanted = {tuple(k) for k in keys.tolist()}
    try:
        for userid, dbid, queryid, top, text in conn.execute(query, (sorted({k[2] for k in wanted}),)):
            key = (userid, dbid, queryid, top)
            if key in wanted and text is not None:
                out.by_key[key] = text
        out.databases = dict(
            conn.execute("SELECT oid::int8, datname FROM pg_database WHERE oid::int8 = ANY(%s)", (
                sorted({k[1] for k in wanted}),
            )).fetchall()
        )
        out.users = dict(
            conn.execute("SELECT oid::int8, rolname FROM pg_roles WHERE oid::int8 = ANY(%s)", (
                sorted({k[0] for k in wanted}),
            )).fetchall()
        )
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading query texts") from exc
    return out
