"""Connections to monitored servers: strict timeouts, a recognisable application_name, and reuse.

Connections are kept per process and per server between snapshots (a plain dict rather than one
psycopg_pool per server: a pool costs background threads, and a collector process serves many
servers but needs at most one connection to each at a time).

statement_timeout is enforced by the server, so it cannot help when the host or the network dies:
the client would wait in a socket read forever, holding its worker and the server's advisory lock.
Three limits cover that: TCP keepalives (a kept idle connection to a dead host), tcp_user_timeout
(sent data never acknowledged) and, whatever the kernel sees, a client-side bound on silence. A
fourth bounds the whole exchange: a server that trickles its reply a byte every few seconds is
never silent, so a snapshot (and a connection check) has a deadline too.

Whatever a tenant registers, libpq offers it nothing of the console's machine: no password file, no client
certificate and key, no Kerberos ticket, no service file, no PG* variable (the console's processes drop them at
start: isolate_libpq_environment). What a connection uses is what the server's form says.

One module over 400 lines: every limit a monitored connection has (timeouts, keepalives, the reply watch, the pinned
session, the address the policy allowed, reuse between snapshots) is set where the connection is made, so that none
can be forgotten by a path that connects."""

import contextlib
import functools
import logging
import math
import os
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from django.conf import settings
from django.views.decorators.debug import sensitive_variables
from psycopg import sql
from psycopg.conninfo import make_conninfo

from collectors.errors import (
    CollectionError,
    MalformedDsn,
    OutOfTime,
    RefusedByPolicy,
    ServerSilent,
    Unreachable,
    from_connect_error,
)
from history.public import marked_text
from inventory import network_policy, tls
from inventory.crypto import CredentialsError
from inventory.endpoint import Endpoint
from inventory.models import Server

# A healthy server answers every statement within statement_timeout, with rows or an error; silence
# past that (plus this margin for the network and the server's own scheduling) means it is gone.
REPLY_MARGIN_S = 5.0
# A snapshot ends within this share of its server's interval, so a slow one is over before the next is due.
SNAPSHOT_SHARE_OF_INTERVAL = 0.8


# What the console's SQL means must not depend on what the server's users set for the database or for the
# monitoring role (ALTER DATABASE/ROLE ... SET): the options of the startup packet outrank both. The search path
# holds PostgreSQL's own schema alone (pg_temp, which is never searched for functions or operators, named last so
# that it cannot come first): an unqualified name in the console's SQL is PostgreSQL's, never one a user planted in
# public, and the extensions the console calls are named with their schema. Strings are read as standard SQL
# strings, so that the console's lexer (collectors/plans/statement.py) and the server's agree, and `= NULL` keeps
# its meaning. No JIT: compiling one catalog query of the console's took 2.3 s of the server's CPU for a 10 ms
# read (PostgreSQL 15 with LLVM, the plans' census of user code).
PINNED_SETTINGS = {
    "search_path": "pg_catalog,pg_temp",
    "standard_conforming_strings": "on",
    "transform_null_equals": "off",
    "jit": "off",
}
PINNED_OPTIONS = " ".join(f"-c {name}={value}" for name, value in PINNED_SETTINGS.items())

CHECK_APPLICATION_NAME = "pgconsole-check"  # "test connection": told apart from the collector in pg_stat_activity


def sampler_application_name() -> str:
    """The wait-event sampler's (collectors/waits/sampler.py): the collector's, marked."""
    return f"{settings.COLLECTOR['APPLICATION_NAME']}-sampler"[:63]


def own_application_names() -> tuple[str, ...]:
    """Every application_name the console's sessions on a monitored server carry (left out of wait samples)."""
    return settings.COLLECTOR["APPLICATION_NAME"], sampler_application_name(), CHECK_APPLICATION_NAME


def marked(query: Any) -> Any:
    """The query with the console's mark at its end (history.own), whatever form it was written in."""
    if isinstance(query, sql.Composable):
        return sql.Composed([query, sql.SQL(marked_text(""))])
    if isinstance(query, bytes):
        return marked_text(query.decode()).encode()
    return marked_text(query)


class MarkedCursor(psycopg.Cursor):
    """Every statement sent through it carries the console's mark (the cursor of every monitored connection)."""

    def execute(self, query, params=None, **kwargs):
        return super().execute(marked(query), params, **kwargs)

    def executemany(self, query, params_seq, **kwargs):
        return super().executemany(marked(query), params_seq, **kwargs)

    def stream(self, query, params=None, **kwargs):
        return super().stream(marked(query), params, **kwargs)


class MarkedAsyncCursor(psycopg.AsyncCursor):
    """MarkedCursor for the wait sampler's asynchronous connections."""

    async def execute(self, query, params=None, **kwargs):
        return await super().execute(marked(query), params, **kwargs)


@dataclass(frozen=True)
class Limits:
    reply_timeout_s: float  # no byte either way for this long during a round trip: the server stopped answering
    snapshot_s: float  # a whole snapshot (or check), from connecting to its last reply
    tcp_user_timeout_ms: int
    keepalives_idle_s: int
    keepalives_interval_s: int
    keepalives_count: int


def limits(interval_s: int | None = None) -> Limits:
    """The network time limits from settings; unset ones are derived from statement_timeout.

    With the server's collection interval, no reply is awaited longer than that interval: a
    silent server must free its worker and lock before its next collection is due."""
    cfg = settings.COLLECTOR
    reply_s = cfg["REPLY_TIMEOUT_S"] or cfg["STATEMENT_TIMEOUT_MS"] / 1000 + REPLY_MARGIN_S
    snapshot_s = float(cfg["SNAPSHOT_TIMEOUT_S"])
    if interval_s:
        reply_s = min(reply_s, float(interval_s))
        snapshot_s = min(snapshot_s, SNAPSHOT_SHARE_OF_INTERVAL * interval_s)
    return Limits(
        reply_timeout_s=reply_s,
        snapshot_s=snapshot_s,
        # Later than the reply timeout, so that the client-side limit and its clearer message come first.
        tcp_user_timeout_ms=cfg["TCP_USER_TIMEOUT_MS"] or round((reply_s + REPLY_MARGIN_S) * 1000),
        keepalives_idle_s=cfg["KEEPALIVES_IDLE_S"],
        keepalives_interval_s=cfg["KEEPALIVES_INTERVAL_S"],
        keepalives_count=cfg["KEEPALIVES_COUNT"],
    )


@contextlib.contextmanager
def read_only(conn: psycopg.Connection, timeout_s: float) -> Iterator[psycopg.Connection]:
    """A read-only transaction under a statement_timeout of `timeout_s`, its BEGIN and its end sent as the console's
    own statements (psycopg's transaction() sends them unmarked, and pg_stat_statements would list them as the
    application's). A connection lost in it is left as it is: its owner discards it."""
    conn.execute("BEGIN READ ONLY")
    try:
        conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{max(1, round(timeout_s * 1000))}ms",))
        yield conn
    except BaseException:
        if not conn.closed and getattr(conn, "lost", None) is None:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class MonitoredConnection(psycopg.Connection):
    """A connection that gives up on a round trip once the server has sent nothing for reply_timeout_s,
    and on anything still under way at its deadline.

    Every network wait of a psycopg connection goes through `wait`, whose loop wakes every 0.1 s
    with Ready.NONE when the socket stayed quiet: silence and deadline are checked there, in the
    waiting thread, with no watchdog thread and no socket closed under libpq's feet. After that the
    connection is lost (a reply may still be on its way): every later use fails the same way until
    it is discarded."""

    reply_timeout_s: float = float("inf")  # set by connect() and checkout() from the target's limits
    deadline: float | None = None  # time.monotonic() by which the current snapshot or check must be done
    budget_s: float = 0.0  # the limit the deadline stands for, for the message
    lost: psycopg.OperationalError | None = None  # set once silent or out of time

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = MarkedCursor  # every statement it sends is marked as the console's (history.own)

    def limit_to(self, deadline: float, budget_s: float) -> None:
        """Give up whatever is still under way at `deadline` (time.monotonic()), a bound of `budget_s`."""
        self.deadline, self.budget_s = deadline, budget_s

    def wait(self, gen: Generator, *args: Any, **kwargs: Any) -> Any:
        if self.lost is not None:
            gen.close()
            raise self.lost
        return super().wait(self._watched(gen), *args, **kwargs)

    def _watched(self, gen: Generator) -> Generator:
        limit_s, deadline = self.reply_timeout_s, self.deadline
        last_io = time.monotonic()
        try:
            waiting_for = next(gen)
            while True:
                ready = yield waiting_for
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self.lost = OutOfTime(self.budget_s)
                elif ready:
                    last_io = now
                elif now - last_io >= limit_s:
                    self.lost = ServerSilent(limit_s)
                if self.lost is not None:
                    gen.close()
                    raise self.lost
                waiting_for = gen.send(ready)
        except StopIteration as done:
            return done.value


log = logging.getLogger(__name__)
# A path that names no file: libpq's defaults for the password file and the client certificate and key point
# into the console account's home (~/.pgpass, ~/.postgresql/postgresql.crt); these point nowhere instead.
NO_FILE = "/nonexistent/pgconsole-offers-no-file"


def isolate_libpq_environment() -> list[str]:
    """Drop every PG* variable from this process's environment (libpq reads them for each parameter a
    connection leaves unset: PGPASSWORD, PGSERVICE and its service file, PGSSLCERT...), so that none is offered to
    a monitored server. The history store is configured by DATABASE_URL alone; the console's own PGCONSOLE_*
    stay. The names dropped, logged."""
    dropped = sorted(name for name in os.environ if name.startswith("PG") and not name.startswith("PGCONSOLE"))
    for name in dropped:
        del os.environ[name]
    if dropped:
        log.warning("libpq: %s dropped from the environment (not offered to monitored servers)", ", ".join(dropped))
    return dropped


def _isolation(password_given: bool, require_scram: bool) -> dict[str, Any]:
    """Parameters that keep libpq from offering the machine's own credentials: explicit values for what it
    would otherwise look up (environment, home directory, Kerberos credentials cache)."""
    params: dict[str, Any] = {
        "passfile": NO_FILE,
        "sslcert": NO_FILE,
        "sslkey": NO_FILE,
        "gssencmode": "disable",
    }
    if not password_given:
        params["password"] = ""  # set, so that nothing is looked up for it
    if psycopg.pq.version() >= 160000:
        params["sslcertmode"] = "disable"
        params["gssdelegation"] = 0
        params["require_auth"] = "scram-sha-256" if require_scram and password_given else "!gss,!sspi"
    elif require_scram and password_given:
        params["require_auth"] = "scram-sha-256"
    return params


@dataclass(frozen=True)
class Target:
    """Everything needed to connect to one monitored server (password already decrypted)."""

    server_id: int
    endpoint: Endpoint
    password: str | None = field(repr=False)  # never in a log line, a traceback's locals or an error page
    interval_s: int | None = None  # the server's collection interval, which caps the wait for a reply
    # The address every connection dials (pinned()): checked against the network policy again, never looked up.
    address: str | None = None

    @property
    def label(self) -> str:
        return self.endpoint.label

    def limits(self) -> Limits:
        return limits(self.interval_s)

    @sensitive_variables("params")
    def conninfo(self) -> str:
        cfg, at = settings.COLLECTOR, self.endpoint
        net = self.limits()
        # work_mem: the read hashes the previous state (~110 bytes per entry) on the monitored
        # server; the default 4 MB would spill it to temporary files from ~36,000 entries on.
        options = (
            f"-c statement_timeout={cfg['STATEMENT_TIMEOUT_MS']} "
            f"-c lock_timeout={cfg['LOCK_TIMEOUT_MS']} "
            "-c idle_in_transaction_session_timeout=60000 "
            "-c default_transaction_read_only=on "
            "-c work_mem=64MB "
            f"{PINNED_OPTIONS}"
        )
        params = {
            "host": at.host,
            "port": at.port,
            "dbname": at.database,
            "user": at.user,
            "sslmode": at.sslmode,
            "connect_timeout": cfg["CONNECT_TIMEOUT_S"],
            "application_name": cfg["APPLICATION_NAME"],
            "options": options,
            # A kept connection idles between snapshots: keepalives find a dead host meanwhile.
            "keepalives": 1,
            "keepalives_idle": net.keepalives_idle_s,
            "keepalives_interval": net.keepalives_interval_s,
            "keepalives_count": net.keepalives_count,
            # Linux: data sent but not acknowledged for this long drops the connection (and bounds
            # keepalive probing too).
            "tcp_user_timeout": net.tcp_user_timeout_ms,
        }
        if self.password:
            params["password"] = self.password
        params |= _isolation(bool(self.password), at.require_scram)
        try:
            root = tls.root_cert_file(at.ssl_root_cert)
        except OSError as exc:
            raise MalformedDsn(f"cannot write {self.label}'s CA certificate for libpq (TLS_CA_DIR): {exc}") from exc
        if root:
            params["sslrootcert"] = root
        try:
            return make_conninfo("", **params)
        except psycopg.ProgrammingError as exc:
            raise MalformedDsn(f"invalid connection settings for {self.label}: {exc}") from exc

    def dial_address(self, within_s: float | None = None) -> str:
        """The address to dial, allowed by the network policy now: the pinned one (no lookup), else the one the
        host name resolves to now, looked up within `within_s` (what is left of the caller's time), and never
        longer than a connection may take (COLLECTOR_CONNECT_TIMEOUT_S): a resolver that does not answer holds no
        thread of the workers past their deadline."""
        host, port = self.endpoint.host, self.endpoint.port
        bound_s = (
            settings.COLLECTOR["CONNECT_TIMEOUT_S"]
            if within_s is None
            else min(within_s, settings.COLLECTOR["CONNECT_TIMEOUT_S"])
        )
        try:
            if self.address is not None:
                return network_policy.recheck_address(host, self.address, port)
            lookup = functools.partial(network_policy.dial_address, host, port)
            return network_policy.within(host, lookup, time.monotonic() + bound_s)
        except network_policy.Refused as exc:
            raise RefusedByPolicy(f"{self.label}: {exc.message}") from exc
        except network_policy.Unresolvable as exc:
            raise Unreachable(f"cannot connect to {self.label}: {exc}") from exc
        except network_policy.Late as exc:
            raise Unreachable(f"cannot connect to {self.label}: {exc.words(host, bound_s)}") from exc

    def in_database(self, name: str) -> "Target":
        """This target's server (and its pinned address, if any), another of its databases."""
        return replace(self, endpoint=replace(self.endpoint, database=name))

    def pinned(self, address: str | None = None) -> "Target":
        """This target dialing one address for good: `address` (a connection's own, conn.info.hostaddr, dialed
        after the policy allowed it) or else the one its host name resolves to now. The connections a snapshot
        opens besides its first reach the server that one reached: a name switched meanwhile to another
        address (an internal service's) is not followed."""
        return replace(self, address=address or self.dial_address())

    @sensitive_variables("extra")
    def dial_conninfo(self, *, within_s: float | None = None, **extra: Any) -> str:
        """conninfo() pinned to the address the network policy allows now (libpq's hostaddr, the host name
        still naming the server for TLS): what a name resolves to is checked at every connection, within
        `within_s` (dial_address), and libpq connects there without a lookup of its own that could answer
        otherwise."""
        return make_conninfo(self.conninfo(), hostaddr=self.dial_address(within_s), **extra)


_lock = threading.Lock()
_idle: dict[int, tuple[str, MonitoredConnection, float]] = {}


@sensitive_variables("conninfo")
@sensitive_variables("password")
def monitoring_target(server: Server) -> Target:
    """Where and how to connect to the server (its password decrypted), or a CollectionError saying why not."""
    try:
        password = server.get_password()
    except CredentialsError as exc:
        raise CollectionError(str(exc)) from exc
    return Target(server_id=server.pk, endpoint=server.endpoint, password=password, interval_s=server.interval_s)


def connect(target: Target, *, within_s: float | None = None) -> MonitoredConnection:
    """A fresh autocommit connection, or a clear CollectionError. `within_s`: what is left of the caller's time,
    which bounds the connection's own timeout too (libpq's least is 2 s)."""
    extra = {}
    if within_s is not None:
        extra["connect_timeout"] = max(2, min(settings.COLLECTOR["CONNECT_TIMEOUT_S"], math.ceil(within_s)))
    conninfo = target.dial_conninfo(within_s=within_s, **extra)
    try:
        conn = MonitoredConnection.connect(conninfo, autocommit=True, prepare_threshold=None)
    except psycopg.Error as exc:
        raise from_connect_error(exc, target.label) from exc
    conn.reply_timeout_s = target.limits().reply_timeout_s
    return conn


@contextlib.contextmanager
def connected(target: Target, deadline: float, budget_s: float) -> Iterator[MonitoredConnection]:
    """A connection of its own for one piece of work beside the snapshot's (each other database of a reading that
    reads every database, a plan in the statement's database), within `deadline` (time.monotonic()): connecting,
    and every statement on it (MonitoredConnection.limit_to, `budget_s` being the whole work's time), closed after."""
    conn = connect(target, within_s=max(deadline - time.monotonic(), 0.0))
    try:
        conn.limit_to(deadline, budget_s)
        yield conn
    finally:
        conn.close()


@sensitive_variables("conninfo", "held", "held_info")
def checkout(target: Target) -> tuple[MonitoredConnection, bool]:
    """A connection for one snapshot, and whether it was reused (a reused one may have gone stale)."""
    idle_s = settings.COLLECTOR["CONNECTION_IDLE_S"]
    conninfo = target.conninfo()
    with _lock:
        held = _idle.pop(target.server_id, None)
    if held is not None:
        held_info, conn, since = held
        if held_info == conninfo and not conn.closed and time.monotonic() - since < idle_s:
            conn.reply_timeout_s = target.limits().reply_timeout_s
            conn.deadline = None
            return conn, True
        conn.close()
    return connect(target), False


@sensitive_variables("previous")
def checkin(target: Target, conn: MonitoredConnection) -> None:
    if (
        settings.COLLECTOR["CONNECTION_IDLE_S"] <= 0
        or conn.closed
        or conn.lost is not None
        or conn.info.transaction_status != 0
    ):
        conn.close()
        return
    with _lock:
        previous = _idle.pop(target.server_id, None)
        _idle[target.server_id] = (target.conninfo(), conn, time.monotonic())
    if previous is not None:
        previous[1].close()


def discard(target: Target, conn: psycopg.Connection | None) -> None:
    if conn is not None:
        conn.close()
    with _lock:
        held = _idle.pop(target.server_id, None)
    if held is not None:
        held[1].close()


def close_all() -> None:
    with _lock:
        held = list(_idle.values())
        _idle.clear()
    for _, conn, _ in held:
        conn.close()
