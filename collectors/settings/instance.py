"""The server and its pg_stat_statements settings, read first in every snapshot, in one round trip: the version,
the server's clock (the snapshot's time), the postmaster's start, the extension's version and schema, its settings
(and pg_wait_sampling's), and what the monitoring role may see and execute.

A server this cannot read is no snapshot at all: an unsupported version, the extension not created or not
preloaded fail the snapshot, with the DBA's fix in the message.
"""

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg

from collectors.errors import ExtensionMissing, NotPreloaded, UnsupportedVersion, from_query_error

MIN_SERVER_VERSION = 130000

# What tells one cluster's statistics from another's (collectors/statements/lineage.py); the snapshot's first
# round trip asks whether the role may execute them. Executable by PUBLIC by default; a hardened server may
# revoke them (then the checks that need them are skipped and the server's status says so).
CONTROL_SYSTEM = "pg_catalog.pg_control_system()"
CONTROL_CHECKPOINT = "pg_catalog.pg_control_checkpoint()"
IS_IN_RECOVERY = "pg_catalog.pg_is_in_recovery()"
FUNCTIONS = (CONTROL_SYSTEM, CONTROL_CHECKPOINT, IS_IN_RECOVERY)
# The settings read, by name: a bounded list, whatever placeholders a database's owner defined under the prefix.
SETTINGS = tuple(
    f"pg_stat_statements.{name}" for name in ("max", "track", "track_utility", "track_planning", "save", "sample_rate")
) + ("pg_wait_sampling.profile_period",)

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
       (SELECT coalesce(json_object_agg(name, left(setting, 100)), '{}'::json) FROM pg_settings
         WHERE name = ANY(%s::text[])),
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       (SELECT oid::int8 FROM pg_roles WHERE rolname = current_user),
       (SELECT coalesce(array_agg(f), '{}') FROM unnest(%s::text[]) AS f WHERE has_function_privilege(f, 'EXECUTE'))
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
    reads_all_stats: bool  # entries of every role are visible, not only the role's own
    role_oid: int
    executable: frozenset[str]  # which of the functions asked about the role may execute

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


def timestamp(us: int | None) -> datetime | None:
    """A server time read as epoch microseconds."""
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, UTC)


def read_meta(conn: psycopg.Connection, functions: tuple[str, ...] = ()) -> ServerMeta:
    """Server, extension and settings; `functions` (signatures) are checked for EXECUTE privilege."""
    try:
        row = conn.execute(META_SQL, (list(SETTINGS), list(functions))).fetchone()
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading server information") from exc
    (
        version_num,
        taken_at_us,
        pm_start_us,
        dbname,
        extversion,
        schema,
        ws_schema,
        settings_json,
        all_stats,
        role_oid,
        executable,
    ) = row
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
        role_oid=role_oid,
        executable=frozenset(executable),
    )
