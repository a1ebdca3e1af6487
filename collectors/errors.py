"""Why a collection failed, in words a DBA can act on. Each class maps to a status code on the server.

A failure's message holds libpq's and the server's own words, addresses and timings: they map the console's
network (which address answered what), so console staff read them (accounts.access.sees_connection_detail), and
everyone else reads the console's own sentence for the class (summary): on every page, in the API, the weekly mail,
alerts and audit exports."""

import psycopg
from psycopg import errors as pgerrors


class CollectionError(Exception):
    code = "error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class MalformedDsn(CollectionError):
    code = "malformed_dsn"


class Unreachable(CollectionError):
    code = "unreachable"


class RefusedByPolicy(CollectionError):
    """The console's network policy does not let it dial the server's address (inventory.network_policy)."""

    code = "refused_by_policy"


class AuthenticationFailed(CollectionError):
    code = "auth_failed"


class TlsFailed(CollectionError):
    """TLS could not be set up as the server's sslmode asks: no TLS on the server, or a certificate that does
    not verify against the CA given for it."""

    code = "tls"


class ScramRequired(AuthenticationFailed):
    """The server asked for the password otherwise than through SCRAM-SHA-256, and the server requires SCRAM."""

    code = "scram_required"


class UnsupportedVersion(CollectionError):
    code = "unsupported_version"


class ExtensionMissing(CollectionError):
    code = "extension_missing"


class NotPreloaded(CollectionError):
    code = "not_preloaded"


class InsufficientPrivilege(CollectionError):
    code = "insufficient_privilege"


class QueryTimeout(CollectionError):
    code = "timeout"


class NoReply(QueryTimeout):
    """The server went silent in the middle of a snapshot (a dead host or a cut network path).

    A timeout rather than "unreachable": an unreachable kept connection is retried at once with a
    fresh one, which here would only wait connect_timeout more and replace this message."""


class ServerSilent(psycopg.OperationalError):
    """Raised from psycopg's wait loop (collectors.connection) when a monitored server sent nothing
    for `silent_s` seconds; from_query_error turns it into NoReply with the step that was waiting."""

    def __init__(self, silent_s: float):
        super().__init__(f"no reply for {silent_s:g} s")
        self.silent_s = silent_s


class OutOfTime(psycopg.OperationalError):
    """Raised from psycopg's wait loop (collectors.connection) when a snapshot or a check is still talking to
    the server at its deadline: a server that answers, but a byte at a time, is never silent, so only a
    bound on the whole exchange frees its worker in time. from_query_error turns it into SnapshotTimeout."""

    def __init__(self, budget_s: float):
        super().__init__(f"the server answered too slowly: not done within {budget_s:g} s")
        self.budget_s = budget_s


class SnapshotTimeout(QueryTimeout):
    """The snapshot was given up at its deadline (collectors.connection.Limits.snapshot_s)."""


class CollectionBusy(CollectionError):
    """Another collection of the same server holds the lock: skipped, not a failure."""

    code = "busy"


class OverShare(CollectionError):
    """The server's organization had its share of the collection workers in use (collectors.shares): put off,
    not a failure."""

    code = "over_share"


class HistoryUnavailable(CollectionError):
    """The console's own database could not be written; the task retries with backoff."""

    code = "history_unavailable"


class HistoryFull(CollectionError):
    """The console's own database is out of disk space: nothing of the snapshot was stored. Not retried at once
    (the space will not be back in seconds): the next interval tries again, and spans the gap exactly."""

    code = "history_full"


def history_full(exc: BaseException) -> HistoryFull | None:
    """The failure as HistoryFull when it is the history store's disk filling up (SQLSTATE 53100), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, pgerrors.DiskFull):
            return HistoryFull(
                f"the history store is out of disk space ({_first_line(seen)}): this snapshot was not stored; "
                "collections resume by themselves once space is freed on the history store"
            )
        seen = seen.__cause__ or seen.__context__
    return None


class ClockWentBack(CollectionError):
    """The server's clock says this snapshot is not after the stored one."""

    code = "clock"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # libpq prefixes connection errors with the address tried; keep the server's words.
    return " ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


def from_connect_error(exc: psycopg.Error, target: str) -> CollectionError:
    text = _first_line(exc)
    low = text.lower()
    if "authentication method requirement" in low:
        return ScramRequired(
            f"{target} did not ask for the password through SCRAM-SHA-256, and Require SCRAM is on "
            f"for this server, so it was not sent: {text}"
        )
    if "password authentication failed" in low or "no password supplied" in low or ("authentication failed" in low):
        return AuthenticationFailed(f"authentication failed for {target}: {text}")
    if "invalid" in low and ("option" in low or "value" in low or "uri" in low or "dsn" in low):
        return MalformedDsn(f"invalid connection settings for {target}: {text}")
    if "permission denied" in low or "not permitted to log in" in low or "no pg_hba.conf entry" in low:
        return InsufficientPrivilege(f"connection refused by {target}: {text}")
    if "root certificate file" in low or "ssl" in low or "certificate" in low:
        return TlsFailed(f"TLS to {target} failed: {text}")
    if "does not exist" in low:
        return Unreachable(f"{target}: {text}")
    return Unreachable(f"cannot connect to {target}: {text}")


def from_query_error(exc: psycopg.Error, what: str) -> CollectionError:
    if isinstance(exc, ServerSilent):
        return NoReply(
            f"the server stopped answering during the snapshot, while {what} (no reply for {exc.silent_s:g} s): "
            "the host is down, frozen, or the network path to it is cut"
        )
    if isinstance(exc, OutOfTime):
        return SnapshotTimeout(
            f"the snapshot was not done within its limit of {exc.budget_s:g} s and was given up while {what}: "
            "the server answers, but too slowly (an overloaded host or a congested network path); "
            "the next collection tries again"
        )
    text = _first_line(exc)
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return InsufficientPrivilege(f"{what}: {text}")
    if isinstance(exc, pgerrors.QueryCanceled | pgerrors.LockNotAvailable):
        return QueryTimeout(f"{what} timed out: {text}")
    if isinstance(exc, pgerrors.ObjectNotInPrerequisiteState) and "shared_preload_libraries" in text:
        return NotPreloaded(f"pg_stat_statements is not in shared_preload_libraries: {text}")
    if isinstance(exc, pgerrors.UndefinedFunction | pgerrors.UndefinedTable):
        return ExtensionMissing(f"{what}: {text}")
    if isinstance(exc, psycopg.OperationalError):
        return Unreachable(f"connection lost during {what}: {text}")
    return CollectionError(f"{what} failed: {text}")


SUMMARIES = {
    "error": "The collection failed.",
    "malformed_dsn": "The server's connection settings are invalid: check them on its form.",
    "unreachable": "The server could not be reached, or the connection was lost.",
    "refused_by_policy": "The console's network policy does not allow connecting to this server's address.",
    "auth_failed": "The server refused the monitoring role's login.",
    "tls": "TLS could not be set up as the server's TLS mode asks.",
    "scram_required": "The server did not ask for the password through SCRAM-SHA-256, which this server requires.",
    "unsupported_version": "The server's PostgreSQL version is not supported.",
    "extension_missing": "pg_stat_statements is not installed in the server's database.",
    "not_preloaded": "pg_stat_statements is not in the server's shared_preload_libraries.",
    "insufficient_privilege": "The monitoring role lacks a privilege the collection needs (pg_monitor).",
    "timeout": "The server did not answer in time.",
    "busy": "Another collection of this server was running.",
    "over_share": "The organization's other collections held its share of the collection workers.",
    "history_unavailable": "The console's history store was unavailable: the snapshot was not stored.",
    "history_full": "The console's history store is out of space: the snapshot was not stored.",
    "clock": "The server's clock went back: the snapshot was not stored.",
}


def summary(code: str) -> str:
    """The console's own sentence for a failure's class (a code it does not know: the generic one)."""
    return SUMMARIES.get(code, SUMMARIES["error"])


def shown(code: str, message: str, *, detail: bool) -> str:
    """A failure as its reader may see it: the whole message for those who see connection detail (console
    staff), the class's sentence for everyone else. Nothing for no failure."""
    if not code and not message:
        return ""
    return message if detail else summary(code)
