"""Connections to monitored servers: strict timeouts, a recognisable application_name, and reuse.

Connections are kept per process and per server between snapshots (a plain dict rather than one
psycopg_pool per server: a pool costs background threads, and a collector process serves many
servers but needs at most one connection to each at a time).
"""
import threading
import time
from dataclasses import dataclass

import psycopg
from django.conf import settings
from psycopg.conninfo import make_conninfo

from collectors.errors import MalformedDsn, from_connect_error


@dataclass(frozen=True)
class Target:
    """Everything needed to connect to one monitored server (password already decrypted)."""

    server_id: int
    host: str
    port: int
    database: str
    user: str
    password: str | None
    sslmode: str

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.database}"

    def conninfo(self) -> str:
        cfg = settings.COLLECTOR
        # work_mem: the read hashes the previous state (~110 bytes per entry) on the monitored
        # server; the default 4 MB would spill it to temporary files from ~36,000 entries on.
        options = (
            f"-c statement_timeout={cfg['STATEMENT_TIMEOUT_MS']} "
            f"-c lock_timeout={cfg['LOCK_TIMEOUT_MS']} "
            "-c idle_in_transaction_session_timeout=60000 "
            "-c default_transaction_read_only=on "
            "-c work_mem=64MB"
        )
        params = {
            "host": self.host,
            "port": self.port,
            "dbname": self.database,
            "user": self.user,
            "sslmode": self.sslmode,
            "connect_timeout": cfg["CONNECT_TIMEOUT_S"],
            "application_name": cfg["APPLICATION_NAME"],
            "options": options,
        }
        if self.password:
            params["password"] = self.password
        try:
            return make_conninfo("", **params)
        except psycopg.ProgrammingError as exc:
            raise MalformedDsn(f"invalid connection settings for {self.label}: {exc}") from exc


_lock = threading.Lock()
_idle: dict[int, tuple[str, psycopg.Connection, float]] = {}


def connect(target: Target) -> psycopg.Connection:
    """A fresh autocommit connection, or a clear CollectionError."""
    conninfo = target.conninfo()
    try:
        return psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)
    except psycopg.Error as exc:
        raise from_connect_error(exc, target.label) from exc


def checkout(target: Target) -> tuple[psycopg.Connection, bool]:
    """A connection for one snapshot, and whether it was reused (a reused one may have gone stale)."""
    idle_s = settings.COLLECTOR["CONNECTION_IDLE_S"]
    conninfo = target.conninfo()
    with _lock:
        held = _idle.pop(target.server_id, None)
    if held is not None:
        held_info, conn, since = held
        if held_info == conninfo and not conn.closed and time.monotonic() - since < idle_s:
            return conn, True
        conn.close()
    return connect(target), False


def checkin(target: Target, conn: psycopg.Connection) -> None:
    if settings.COLLECTOR["CONNECTION_IDLE_S"] <= 0 or conn.closed or conn.info.transaction_status != 0:
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
