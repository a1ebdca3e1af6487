"""A statement_timeout on every session a process opens on the history store: the Celery workers' and beat's
(console.celery) and the wait sampler's, so that no statement holds one of their threads for ever.

Set on the session (set_config(..., false)) when Django opens it, as the web's own limit is (console.middleware);
a job that needs longer sets more for itself, in its transaction (SET LOCAL) or for its block, putting back what it
found (exports.services), never RESET: that would leave the session with no limit at all."""

from django.db import connections
from django.db.backends.signals import connection_created

_DISPATCH_UID = "history-statement-timeout"
_limit_ms: int | None = None


def _set(connection) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT set_config('statement_timeout', %s, false)", [f"{_limit_ms}ms"])


def _on_connect(sender, connection, **_: object) -> None:
    if _limit_ms is not None and connection.vendor == "postgresql":
        _set(connection)


def limit_statements(timeout_ms: int | None) -> None:
    """From now on every session this process opens on the history store stops a statement after `timeout_ms`, and
    so do those of this thread already open; None: sessions opened from now on are left with the server's own."""
    global _limit_ms
    _limit_ms = timeout_ms
    if timeout_ms is None:
        connection_created.disconnect(dispatch_uid=_DISPATCH_UID)
        return
    connection_created.connect(_on_connect, dispatch_uid=_DISPATCH_UID)
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.vendor == "postgresql":
            _set(connection)
