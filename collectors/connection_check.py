"""The "test connection" check of a server to monitor: can the collector connect, and is everything it
needs there (version, preload, extension, privileges, settings)? Each finding says, in a DBA's words,
what was seen and, where something is missing, the exact SQL or configuration line that fixes it.

It connects as the collector does (collectors.connection: same timeouts, read-only session) and reads
only catalogs, settings and two cheap pg_stat_statements calls (showtext := false). The password is
never part of the report, not even inside a server's error message.

One module over 400 lines: one check, read top to bottom as a DBA reads its report (connecting, TLS and SCRAM, then
preload, extension, privileges, plans and settings), each finding beside the SQL it reads; every part runs once per
check, in this order."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

import psycopg
from psycopg import sql

from collectors.connection import CHECK_APPLICATION_NAME, MonitoredConnection, Target
from collectors.errors import CollectionError, OutOfTime, RefusedByPolicy, ServerSilent, Unreachable
from collectors.plans.explain import HELPER_USABLE_SQL
from collectors.settings.instance import MIN_SERVER_VERSION
from collectors.sql_names import in_comment, quote_ident
from inventory import tls
from inventory.endpoint import Endpoint

Level = Literal["ok", "info", "warning", "problem"]

# The same as docs/monitoring-role.md, "Monitoring role" (a test keeps them equal).
MONITORING_ROLE_SQL = """\
-- postgresql.conf: shared_preload_libraries = 'pg_stat_statements'   (then restart)
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE ROLE pgconsole_monitor LOGIN PASSWORD 'choose-one';
GRANT pg_monitor TO pgconsole_monitor;   -- includes pg_read_all_stats and pg_read_all_settings
-- optional, for wait events without sampling pg_stat_activity (PostgreSQL 15 from Debian:
-- postgresql-15-pg-wait-sampling; add pg_wait_sampling to shared_preload_libraries):
CREATE EXTENSION IF NOT EXISTS pg_wait_sampling;
-- optional, for the plans of top statements (PostgreSQL 14+; read, never write; on 13, GRANT SELECT on the
-- tables instead), and CONNECT on each database whose statements are planned:
GRANT pg_read_all_data TO pgconsole_monitor;"""

# (GUC, where it may not exist), in the order a DBA reads them.
SETTINGS: tuple[tuple[str, str], ...] = (
    ("pg_stat_statements.max", ""),
    ("pg_stat_statements.track", ""),
    ("pg_stat_statements.track_utility", ""),
    ("pg_stat_statements.track_planning", "needs PostgreSQL 13"),
    ("pg_stat_statements.save", ""),
    ("pg_stat_statements.sample_rate", "only in some forks such as Tantor Postgres, not in community PostgreSQL"),
)

VERSION_SQL = "SELECT current_setting('server_version_num')::int, current_setting('server_version')"

# Superuser-only settings (shared_preload_libraries) are simply absent from pg_settings for a role
# without pg_read_all_settings: NULL here, not an error.
META_SQL = (
    r"""
SELECT current_database(),
       current_user,
       (SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'),
       (SELECT setting FROM pg_settings WHERE name = 'compute_query_id'),
       (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'pg_stat_statements'),
       (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'pg_stat_statements'),
       (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_stat_statements'),
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
       (SELECT pg_has_role(current_user, oid, 'USAGE') FROM pg_roles WHERE rolname = 'pg_read_all_data'),
       (SELECT coalesce(json_object_agg(name, setting), '{}'::json) FROM pg_settings
         WHERE name LIKE 'pg\_stat\_statements.%'),
       """
    + HELPER_USABLE_SQL
    + "\n"
)


@dataclass(frozen=True)
class CheckFinding:
    level: Level
    topic: str
    text: str
    fix: str = ""  # the exact SQL or configuration line, when something is missing
    # libpq's or the server's own words: console staff only (CheckReport.seen_by), as they and the timings
    # would map the console's network for whoever may type a host
    detail: str = ""


@dataclass(frozen=True)
class SettingValue:
    name: str
    value: str | None  # None: not available on this server
    missing: str = ""  # why it may not exist


@dataclass(frozen=True)
class CheckReport:
    target: str  # user@host:port/database, never the password
    connected: bool
    failure: str = ""  # why not: dns, refused, timeout, authentication, pg_hba, tls, database, role, ...
    server_version: str = ""
    server_version_num: int | None = None
    preloaded: bool | None = None
    shared_preload_libraries: str | None = None  # None: this role may not read it
    extension_version: str | None = None  # None: not created in this database
    extension_default_version: str | None = None  # what CREATE/ALTER EXTENSION would install
    reads_all_stats: bool | None = None
    superuser: bool | None = None
    reads_all_data: bool | None = None  # pg_read_all_data (14+): plans of every table's statements; None on 13
    explain_helper: bool | None = None  # the EXPLAIN helper (explain_helper.sql) callable in this database
    settings: tuple[SettingValue, ...] = ()
    entries: int | None = None  # entries in pg_stat_statements
    hidden_entries: int | None = None  # entries of other roles this role cannot see
    dealloc: int | None = None  # pg_stat_statements_info (14+)
    stats_reset: datetime | None = None
    findings: tuple[CheckFinding, ...] = ()
    elapsed_ms: float | None = 0.0  # None: not shown to this reader

    def seen_by(self, *, staff: bool) -> CheckReport:
        """The report as a reader may see it: a failure's class and the console's words, but libpq's own text and
        the time a failed connection took only for console staff."""
        if staff:
            return self
        findings = tuple(replace(f, detail="") for f in self.findings)
        return replace(self, findings=findings, elapsed_ms=self.elapsed_ms if self.connected else None)

    @property
    def ready(self) -> bool:
        """The collector can take snapshots of this server as it is."""
        return self.connected and not self.problems

    @property
    def problems(self) -> list[CheckFinding]:
        return [f for f in self.findings if f.level == "problem"]

    @property
    def missing(self) -> list[CheckFinding]:
        """What to change on the server, with the fix for each."""
        return [f for f in self.findings if f.fix]

    def setting(self, short_name: str) -> str | None:
        return next((s.value for s in self.settings if s.name == f"pg_stat_statements.{short_name}"), None)


def server_check(*, endpoint: Endpoint, password: str | None) -> CheckReport:
    """Connect as the collector would and report what it finds; never raises for the server's state."""
    started = time.monotonic()
    target = Target(server_id=0, endpoint=endpoint, password=password or None)
    out = _Report(target=target.label)
    try:
        conninfo = target.dial_conninfo(application_name=CHECK_APPLICATION_NAME)
        conn = MonitoredConnection.connect(conninfo, autocommit=True, prepare_threshold=None)
    except (psycopg.Error, Unreachable) as exc:  # Unreachable: the name does not resolve
        text = _scrub(exc, password)
        out.failure, finding = _connect_failure(text, endpoint)
        out.findings.append(replace(finding, detail=text))
        return out.build(connected=False, started=started)
    except RefusedByPolicy as exc:
        out.failure = "policy"
        out.findings.append(CheckFinding("problem", "Connection", f"Not allowed: {exc.message}"))
        return out.build(connected=False, started=started)
    except CollectionError as exc:  # MalformedDsn from conninfo(): say so, never crash the page
        out.failure = "settings"
        out.findings.append(
            CheckFinding("problem", "Connection", f"Invalid connection settings: {_scrub(exc, password)}")
        )
        return out.build(connected=False, started=started)
    limits = target.limits()
    conn.reply_timeout_s = limits.reply_timeout_s
    conn.limit_to(started + limits.snapshot_s, limits.snapshot_s)
    try:
        with conn:
            out.findings.append(_tls_finding(conn, endpoint))
            _inspect(conn, out, user=endpoint.user, database=endpoint.database)
    except psycopg.Error as exc:
        # The server went away or stopped answering in the middle: what was learnt so far stays.
        text = _scrub(exc, password)
        # The console's own words (its deadline, a silent server) stay in the text; libpq's go to the detail.
        if isinstance(exc, OutOfTime | ServerSilent):
            out.findings.append(CheckFinding("problem", "Connection", f"The check was cut short: {text}"))
        else:
            out.findings.append(CheckFinding("problem", "Connection", "The check was cut short.", detail=text))
    return out.build(connected=True, started=started)


@dataclass
class _Report:
    """The report while it is being filled in."""

    target: str
    failure: str = ""
    findings: list[CheckFinding] = field(default_factory=list)
    values: dict = field(default_factory=dict)

    def build(self, *, connected: bool, started: float) -> CheckReport:
        elapsed_ms = (time.monotonic() - started) * 1000
        return CheckReport(
            target=self.target,
            connected=connected,
            failure=self.failure,
            findings=tuple(self.findings),
            elapsed_ms=elapsed_ms,
            **self.values,
        )


def _scrub(exc: BaseException, password: str | None) -> str:
    """An error's text on one line, without the password should a message ever quote it."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if password:
        text = text.replace(password, "********")
    return text[:500]


def _connect_failure(text: str, endpoint: Endpoint) -> tuple[str, CheckFinding]:
    """Why the connection failed, from libpq's words, with what to do about it (libpq's words themselves go to
    the finding's detail, server_check)."""
    low = text.lower()
    where = f"{endpoint.host}:{endpoint.port}"
    user, db = quote_ident(endpoint.user), quote_ident(endpoint.database)
    if "failed to resolve host" in low or "could not translate host name" in low:
        return "dns", CheckFinding(
            "problem",
            "Connection",
            f"The host name {endpoint.host!r} does not resolve (DNS): "
            f"check its spelling, or use the server's IP address.",
        )
    if "authentication method requirement" in low:
        return "scram", _scram_failure(low, endpoint)
    if "password authentication failed" in low or "authentication failed" in low:
        return "authentication", CheckFinding(
            "problem",
            "Connection",
            f"The server refused the password of role {endpoint.user!r} (authentication failed). Check the "
            f"password typed here, or set a new one on the server.",
            f"ALTER ROLE {user} PASSWORD 'choose-one';",
        )
    if "no password supplied" in low or "password is required" in low:
        return "authentication", CheckFinding(
            "problem", "Connection", f"The server asks role {endpoint.user!r} for a password and none was given."
        )
    if "no pg_hba.conf entry" in low:
        return "pg_hba", CheckFinding(
            "problem",
            "Connection",
            f"pg_hba.conf on the server has no line that lets role {endpoint.user!r} connect to database "
            f"{endpoint.database!r} from the console's address.",
            f"host  {db}  {user}  <console address>/32  scram-sha-256   # pg_hba.conf, then SELECT pg_reload_conf();",
        )
    if re.search(r'role ".*" does not exist', low):
        return "role", CheckFinding(
            "problem",
            "Connection",
            f"There is no role {endpoint.user!r} on the server: create the monitoring role.",
            MONITORING_ROLE_SQL,
        )
    if "not permitted to log in" in low:
        return "role", CheckFinding(
            "problem", "Connection", f"Role {endpoint.user!r} may not log in.", f"ALTER ROLE {user} LOGIN;"
        )
    if re.search(r'database ".*" does not exist', low):
        return "database", CheckFinding(
            "problem",
            "Connection",
            f"There is no database {endpoint.database!r} on the server: choose the database whose statements you want.",
        )
    if "connection refused" in low:
        return "refused", CheckFinding(
            "problem",
            "Connection",
            f"Nothing accepts connections at {where}: PostgreSQL is not running there, listens on another port, "
            f"or only on other addresses (listen_addresses).",
        )
    if "timeout" in low or "timed out" in low or "no reply" in low:
        return "timeout", CheckFinding(
            "problem",
            "Connection",
            f"No answer from {where} in time: a firewall drops the packets, or the host is down or overloaded.",
        )
    if "ssl" in low or "certificate" in low or "tls" in low:
        return "tls", _tls_failure(low, endpoint)
    if "too many" in low or "remaining connection slots" in low:
        return "busy", CheckFinding("problem", "Connection", "The server has no connection slot left.")
    return "error", CheckFinding("problem", "Connection", f"Cannot connect to {where}.")


def _tls_failure(low: str, endpoint: Endpoint) -> CheckFinding:
    """Which side of TLS failed: the server offers none, its certificate does not verify, or names another
    host; libpq's words say which."""
    if "server does not support ssl" in low:
        what = (
            f"The server at {endpoint.host}:{endpoint.port} does not offer TLS and sslmode={endpoint.sslmode} "
            "requires it. Turn ssl on in its postgresql.conf (ssl = on, with ssl_cert_file and ssl_key_file), "
            "then SELECT pg_reload_conf();"
        )
    elif "root certificate file" in low:
        what = (
            f"sslmode={endpoint.sslmode} verifies the server's certificate, and no CA is given: paste the CA "
            "certificate that signed it (PEM) into this server's CA certificate field, or write system to "
            "trust the machine's roots."
        )
    elif "does not match host name" in low or "server certificate for" in low:
        what = (
            f"The server's certificate is not for {endpoint.host!r}: connect with the name it was issued for, "
            "or use sslmode verify-ca, which checks the CA only."
        )
    elif "certificate verify failed" in low or "certificate" in low:
        what = (
            "The server's certificate does not verify against the CA given for it (another CA signed it, or "
            "it expired): give the CA that signed it."
        )
    else:
        what = f"The TLS handshake failed with sslmode={endpoint.sslmode}."
    return CheckFinding("problem", "Connection", what)


def _tls_finding(conn: psycopg.Connection, endpoint: Endpoint) -> CheckFinding:
    """What protects this connection: encryption, and whether the server proved who it is."""
    if not conn.pgconn.ssl_in_use:
        return CheckFinding(
            "warning",
            "TLS",
            f"Not encrypted (sslmode={endpoint.sslmode}): the password, the query "
            "texts and the statistics cross the network in clear. Turn ssl on on the server and choose "
            "sslmode require, or verify-full.",
        )
    row = conn.execute("SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    protocol = row[0] if row and row[0] else "TLS"
    trusted = {"": "~/.postgresql/root.crt", tls.SYSTEM: "the system's trusted roots"}.get(
        endpoint.ssl_root_cert, "the CA certificate given"
    )
    if endpoint.sslmode == "verify-full":
        return CheckFinding(
            "ok",
            "TLS",
            f"Encrypted ({protocol}); the server's certificate is verified against {trusted} "
            f"for host {endpoint.host!r}.",
        )
    if endpoint.sslmode == "verify-ca":
        return CheckFinding(
            "ok",
            "TLS",
            f"Encrypted ({protocol}); the server's certificate is verified against "
            f"{trusted}, but not its host name (verify-full checks both).",
        )
    return CheckFinding(
        "info",
        "TLS",
        f"Encrypted ({protocol}), but the server's certificate is not verified "
        f"(sslmode={endpoint.sslmode}): an impostor on the path could answer. verify-full with the "
        "server's CA certificate closes that.",
    )


def _scram_failure(low: str, endpoint: Endpoint) -> CheckFinding:
    """require_auth=scram-sha-256 refused what the server asked for: say what that was and the two ways out."""
    if "hashed password" in low or "md5" in low:
        asked = "asked for the password as an MD5 hash"
    elif "cleartext password" in low:
        asked = "asked for the password in clear"
    elif "did not complete authentication" in low or "not request" in low:
        asked = "let the role in without a password (trust, peer or cert in pg_hba.conf)"
    else:
        asked = "did not use SCRAM-SHA-256"
    return CheckFinding(
        "problem",
        "Connection",
        f"The server {asked}, and this server requires SCRAM: the console sends the password of role "
        f"{endpoint.user!r} only through SCRAM-SHA-256. Store the role's password as SCRAM on the server and "
        f"use scram-sha-256 in pg_hba.conf, or untick Require SCRAM for this server.",
        f"SET password_encryption = 'scram-sha-256';\nALTER ROLE {quote_ident(endpoint.user)} PASSWORD "
        f"'the-same-password';   -- then scram-sha-256 in pg_hba.conf and SELECT pg_reload_conf();",
    )


def _inspect(conn: psycopg.Connection, out: _Report, *, user: str, database: str) -> None:
    """Everything after the connection: version, preload, extension, privileges, settings, info."""
    version_num, version = conn.execute(VERSION_SQL).fetchone()
    out.values.update(server_version=version.split(" ")[0], server_version_num=version_num)
    out.findings.append(CheckFinding("ok", "Connection", f"Connected to database {database!r} as role {user!r}."))
    if version_num < MIN_SERVER_VERSION:
        out.findings.append(
            CheckFinding(
                "problem",
                "PostgreSQL version",
                f"PostgreSQL {version} is not supported: the console needs PostgreSQL 13 or newer.",
            )
        )
        return
    out.findings.append(CheckFinding("ok", "PostgreSQL version", f"PostgreSQL {version}."))
    (
        dbname,
        current_user,
        preload,
        compute_query_id,
        extversion,
        schema,
        default_version,
        all_stats,
        superuser,
        all_data,
        gucs,
        helper,
    ) = conn.execute(META_SQL).fetchone()
    gucs = dict(gucs or {})
    preloaded = "pg_stat_statements.max" in gucs  # pg_stat_statements defines its settings only when preloaded
    settings = tuple(SettingValue(name, gucs.get(name), missing) for name, missing in SETTINGS)
    out.values.update(
        preloaded=preloaded,
        shared_preload_libraries=preload,
        extension_version=extversion,
        extension_default_version=default_version,
        reads_all_stats=bool(all_stats),
        superuser=bool(superuser),
        reads_all_data=all_data,
        explain_helper=helper,
        settings=settings if preloaded else (),
    )
    _preload_findings(out, preloaded=preloaded, preload=preload, compute_query_id=compute_query_id)
    _extension_findings(
        out,
        extversion=extversion,
        default_version=default_version,
        dbname=dbname,
        available=default_version is not None,
    )
    _privilege_findings(out, role=current_user, superuser=bool(superuser), all_stats=bool(all_stats))
    out.findings.append(
        _plans_finding(role=current_user, superuser=bool(superuser), all_data=all_data, helper=helper, dbname=dbname)
    )
    if preloaded:
        _setting_findings(out, gucs)
    if preloaded and extversion is not None:
        _read_view(conn, out, schema=schema, extversion=extversion, role=current_user, gucs=gucs)


def _preload_findings(out: _Report, *, preloaded: bool, preload: str | None, compute_query_id: str | None) -> None:
    if preloaded:
        out.findings.append(
            CheckFinding(
                "ok",
                "shared_preload_libraries",
                "pg_stat_statements is loaded at server start (shared_preload_libraries).",
            )
        )
    else:
        libraries = [lib.strip().strip('"') for lib in (preload or "").split(",") if lib.strip()]
        line = ",".join([*libraries, "pg_stat_statements"])
        known = "" if preload is not None else " (this role may not read the current list: keep what is there)"
        out.findings.append(
            CheckFinding(
                "problem",
                "shared_preload_libraries",
                "pg_stat_statements is not in shared_preload_libraries: nothing is counted until it is added and "
                f"PostgreSQL restarted{known}.",
                f"shared_preload_libraries = '{line}'   # postgresql.conf, then restart PostgreSQL",
            )
        )
    if compute_query_id == "off":
        out.findings.append(
            CheckFinding(
                "problem",
                "compute_query_id",
                "compute_query_id is off: statements get no query id, so pg_stat_statements records nothing.",
                "ALTER SYSTEM SET compute_query_id = 'auto';\nSELECT pg_reload_conf();",
            )
        )


def _extension_findings(
    out: _Report, *, extversion: str | None, default_version: str | None, dbname: str, available: bool
) -> None:
    if extversion is None:
        if available:
            text = (
                f"The pg_stat_statements extension is not created in database {dbname!r} (the one the console "
                "connects to): a superuser must create it there."
            )
        else:
            text = (
                "The pg_stat_statements extension is not installed on this host (the contrib package is "
                "missing): install it, then create the extension."
            )
        fix = (
            f"-- in database {in_comment(quote_ident(dbname))}, as a superuser:\n"
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
        )
        out.findings.append(CheckFinding("problem", "Extension", text, fix))
        return
    out.findings.append(
        CheckFinding("ok", "Extension", f"Extension pg_stat_statements {extversion} is created in database {dbname!r}.")
    )
    if default_version and _version_tuple(default_version) > _version_tuple(extversion):
        out.findings.append(
            CheckFinding(
                "info",
                "Extension",
                f"The extension is at version {extversion}; this server ships {default_version}, with more columns "
                "(the console reads the columns of the installed version).",
                f"-- in database {in_comment(quote_ident(dbname))}:\nALTER EXTENSION pg_stat_statements UPDATE;",
            )
        )


def _privilege_findings(out: _Report, *, role: str, superuser: bool, all_stats: bool) -> None:
    if superuser:
        out.findings.append(
            CheckFinding(
                "ok",
                "Privileges",
                f"Role {role!r} is a superuser and sees every statement (a role in pg_monitor is enough, and safer).",
            )
        )
    elif all_stats:
        out.findings.append(
            CheckFinding("ok", "Privileges", f"Role {role!r} has pg_read_all_stats: it sees every role's statements.")
        )
    else:
        out.findings.append(
            CheckFinding(
                "warning",
                "Privileges",
                f"Role {role!r} has neither pg_read_all_stats nor superuser: it sees only its own statements (the "
                "others are counted as hidden).",
                f"GRANT pg_monitor TO {quote_ident(role)};   -- includes pg_read_all_stats",
            )
        )


HELPER_WORDS = (
    "or install the EXPLAIN helper (collectors/plans/explain_helper.sql, docs/monitoring-role.md), which plans "
    "them, DML included, without the role holding those privileges"
)


def _plans_finding(*, role: str, superuser: bool, all_data: bool | None, helper: bool, dbname: str) -> CheckFinding:
    """What the plans of the top statements need: to read the tables they use (EXPLAIN checks the privileges of
    what it plans), never to write them (a DML statement's plan then gets the reason "permission"), unless the
    EXPLAIN helper plans them."""
    if helper:
        return CheckFinding(
            "ok",
            "Plans",
            f"The EXPLAIN helper (pgconsole.explain_generic) is installed in database {dbname!r} and role {role!r} "
            "may call it: the plans of its top statements there, DML included, are read through it (install it "
            "in each database whose statements are planned).",
        )
    if superuser or all_data:
        return CheckFinding(
            "ok",
            "Plans",
            f"Role {role!r} may read every table: the plans of its top statements can be read (DML statements "
            "excepted unless it may write their tables, which it should not: the EXPLAIN helper, "
            "collectors/plans/explain_helper.sql, plans them).",
        )
    if all_data is None:  # PostgreSQL 13: no pg_read_all_data
        return CheckFinding(
            "info",
            "Plans",
            f"Role {role!r} plans only the statements on tables it may read (PostgreSQL 13 has no "
            f'pg_read_all_data); the others get the reason "permission". Grant it SELECT, {HELPER_WORDS}.',
            f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {quote_ident(role)};   -- in each database and schema",
        )
    return CheckFinding(
        "info",
        "Plans",
        f"Role {role!r} may not read every table: the statements on tables it cannot read get no plan, with the "
        f'reason "permission". Grant it pg_read_all_data, {HELPER_WORDS}.',
        f"GRANT pg_read_all_data TO {quote_ident(role)};   -- read, never write",
    )


def _setting_findings(out: _Report, gucs: dict[str, str]) -> None:
    track = gucs.get("pg_stat_statements.track")
    if track == "none":
        out.findings.append(
            CheckFinding(
                "problem",
                "pg_stat_statements.track",
                "pg_stat_statements.track is none: no statement is counted.",
                "ALTER SYSTEM SET pg_stat_statements.track = 'top';\nSELECT pg_reload_conf();",
            )
        )
    if gucs.get("pg_stat_statements.track_planning") == "off":
        out.findings.append(
            CheckFinding(
                "info",
                "pg_stat_statements.track_planning",
                'Planning time is not tracked (track_planning = off): the planning pages will say "not tracked". '
                "Enabling it adds a second update of each statement's entry, which can contend on very hot statements.",
                "ALTER SYSTEM SET pg_stat_statements.track_planning = on;\nSELECT pg_reload_conf();",
            )
        )
    if gucs.get("pg_stat_statements.save") == "off":
        out.findings.append(
            CheckFinding(
                "warning",
                "pg_stat_statements.save",
                "pg_stat_statements.save is off: the statistics are lost at every restart.",
                "ALTER SYSTEM SET pg_stat_statements.save = on;\nSELECT pg_reload_conf();",
            )
        )


def _read_view(
    conn: psycopg.Connection, out: _Report, *, schema: str, extversion: str, role: str, gucs: dict[str, str]
) -> None:
    """Read pg_stat_statements (without texts) and, from 1.9 on, pg_stat_statements_info."""
    max_entries = int(gucs["pg_stat_statements.max"])
    counted = sql.SQL("SELECT count(*), count(queryid) FROM {}.pg_stat_statements(false)").format(
        sql.Identifier(schema)
    )
    try:
        entries, visible = conn.execute(counted).fetchone()
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError):  # the connection is gone: the caller says so
            raise
        out.findings.append(
            CheckFinding(
                "problem",
                "Privileges",
                f"Role {role!r} cannot read pg_stat_statements: {_scrub(exc, None)}",
                f"GRANT EXECUTE ON FUNCTION {quote_ident(schema)}.pg_stat_statements(boolean) TO {quote_ident(role)};",
            )
        )
        return
    out.values.update(entries=entries, hidden_entries=entries - visible)
    if entries - visible:
        out.findings.append(
            CheckFinding(
                "warning",
                "Privileges",
                f"{entries - visible} of {entries} entries belong to other roles and are hidden from {role!r}.",
            )
        )
    dealloc = None
    if _version_tuple(extversion) >= (1, 9):
        info = sql.SQL("SELECT dealloc, stats_reset FROM {}.pg_stat_statements_info").format(sql.Identifier(schema))
        try:
            dealloc, stats_reset = conn.execute(info).fetchone()
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise
            out.findings.append(
                CheckFinding(
                    "warning", "pg_stat_statements_info", f"pg_stat_statements_info cannot be read: {_scrub(exc, None)}"
                )
            )
        else:
            out.values.update(dealloc=dealloc, stats_reset=stats_reset)
    usage = f"{entries} of pg_stat_statements.max = {max_entries} entries in use"
    if dealloc:
        out.findings.append(
            CheckFinding(
                "warning",
                "pg_stat_statements.max",
                f"{usage}, and entries were evicted {dealloc} times since the statistics were reset: the least used "
                "statements keep dropping out and their history breaks. Raise max (takes a restart).",
                f"ALTER SYSTEM SET pg_stat_statements.max = {max_entries * 2};   -- then restart PostgreSQL",
            )
        )
    elif dealloc is None:
        out.findings.append(
            CheckFinding(
                "ok",
                "pg_stat_statements.max",
                f"{usage} (evictions are counted from PostgreSQL 14, extension 1.9, on).",
            )
        )
    else:
        out.findings.append(
            CheckFinding("ok", "pg_stat_statements.max", f"{usage}; no eviction since the statistics were reset.")
        )


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))
