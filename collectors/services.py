"""One collection of one server: run the registered readings (collectors/unit.py), store what they found atomically.

`server_collect` is the only entry point; tasks and management commands call it. A collection reads what the
readings compare with (_load_previous), reads (_read: each reading in turn, on one connection within the snapshot's
deadline), settles (_settle: the history store asked of what was read, the connection given back), computes
(_compute, no I/O) and persists (_persist): everything is stored in one transaction of the history store or nothing
is, and the server's status says why. A reading whose failure is its own leaves a note and its status; the others
are stored.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from collectors import connection as monitored
from collectors import shares
from collectors.errors import CollectionBusy, CollectionError, HistoryUnavailable, OverShare, history_full
from collectors.state_cache import state_cache
from collectors.unit import Collection, Previous, registered
from history.public import (
    LOCK_NAMESPACE,
    SNAPSHOT_FACTS,
    Entries,
    FailedCollection,
    NewSnapshot,
    ServerState,
    SnapshotFacts,
    SnapshotWriter,
    load_statement_state,
    store_snapshot,
    texts_missing,
)
from inventory.models import Server

log = logging.getLogger(__name__)


@dataclass
class CollectionResult:
    server_id: int
    server_name: str
    ok: bool
    kind: str = ""  # baseline | delta | failed | busy | over_share
    taken_at: datetime | None = None
    interval_s: float | None = None
    entries: int = 0
    changed: int = 0
    new_entries: int = 0
    gone_entries: int = 0
    dealloc_delta: int | None = None
    error_code: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)
    duration_ms: float = 0.0

    def summary(self) -> str:
        if not self.ok:
            return f"{self.server_name}: FAILED [{self.error_code}] {self.error}"
        if self.kind == "baseline":
            text = f"{self.server_name}: baseline of {self.entries} entries"
        else:
            dealloc = "n/a" if self.dealloc_delta is None else str(self.dealloc_delta)
            text = (
                f"{self.server_name}: {self.changed} of {self.entries} entries changed over "
                f"{self.interval_s:.1f}s ({self.new_entries} new, {self.gone_entries} gone, dealloc +{dealloc})"
            )
        text += f" in {self.duration_ms:.0f} ms"
        if self.notes:
            text += " — " + "; ".join(self.notes)
        return text


def _load_previous(server: Server) -> Previous:
    """What the readings compare with, read before the monitored connection opens (collectors/unit.py)."""
    state = ServerState.objects.filter(server_id=server.pk).first()
    now = timezone.now()
    own = {
        reading.name: reading.previous(server.pk)
        for reading in registered()
        if reading.previous is not None and reading.may_be_due(state, server.last_success_at, now)
    }
    if state is None:
        return Previous(None, Entries.empty(), readings=own)
    cached = state_cache.get(server.pk, state.taken_at)
    entries = cached if cached is not None else load_statement_state(server.pk)
    return Previous(state, entries, texts_missing(server.pk), own)


# --- read: every registered reading, in order, on one connection within the snapshot's deadline ---------


def _read(conn: psycopg.Connection, server: Server, previous: Previous) -> Collection:
    snap = Collection(server=server, previous=previous, conn=conn)
    for reading in registered():
        snap.read(reading)
    return snap


def _read_with_retry(server: Server, previous: Previous) -> Collection:
    target = monitored.monitoring_target(server)
    budget_s = target.limits().snapshot_s
    deadline = time.monotonic() + budget_s  # connecting (bounded by connect_timeout) counts too
    conn, reused = monitored.checkout(target)
    try:
        try:
            conn.limit_to(deadline, budget_s)
            snap = _read(conn, server, previous)
        except CollectionError as exc:
            if not reused or exc.code not in ("unreachable", "error"):
                raise
            # A kept connection may have died with the server; one fresh try, within the same deadline.
            monitored.discard(target, conn)
            conn = monitored.connect(target)
            conn.limit_to(deadline, budget_s)
            snap = _read(conn, server, previous)
    except BaseException:
        monitored.discard(target, conn)
        raise
    monitored.checkin(target, conn)
    snap.conn = None
    return snap


# --- settle: what depends on what was read and only the history store knows, with the connection given back --


def _settle(snap: Collection) -> None:
    for reading in registered():
        if reading.settle is not None and reading.name in snap.got:
            reading.settle(snap, snap.got[reading.name])


# --- compute: each reading's rows, the snapshot's facts and the server's new state, without I/O -----------


def _compute(snap: Collection) -> tuple[NewSnapshot, ServerState]:
    for reading in registered():
        if reading.name in snap.got:
            snap.computed[reading.name] = reading.compute(snap, snap.got[reading.name])
    # A fact of a reading not read in this snapshot (failed, or not due) is unknown: None.
    facts = SnapshotFacts(**({name: None for name in SNAPSHOT_FACTS} | snap.facts))
    state = ServerState(server_id=snap.server.pk, readings=snap.status, **snap.state)
    return NewSnapshot(server_id=snap.server.pk, facts=facts, block=None), state


# --- persist: one transaction of the history store (history.writer) ------------------------------------


def _persist(snap: Collection, row: NewSnapshot, state: ServerState) -> None:
    ran = [reading for reading in registered() if reading.name in snap.computed]

    def write(writer: SnapshotWriter) -> None:
        for reading in ran:
            if reading.persist is not None:
                reading.persist(snap, snap.computed[reading.name], writer)
        row.block, row.totals = snap.block, snap.totals
        writer.snapshot(row)
        writer.server_state(state)
        Server.objects.filter(pk=snap.server.pk).update(
            last_success_at=timezone.now(),
            consecutive_failures=0,
            last_error_class="",
            last_error_message="",
            status_notes="\n".join(snap.notes),
            server_version_num=snap.meta.server_version_num,
            extension_version=snap.meta.extension_version,
        )

    store_snapshot(snap.server.pk, snap.taken_at, {table for reading in ran for table in reading.tables}, write)
    for reading in ran:
        if reading.committed is not None:
            reading.committed(snap, snap.computed[reading.name])


def _collect(server: Server) -> CollectionResult:
    snap = _read_with_retry(server, _load_previous(server))
    _settle(snap)
    row, state = _compute(snap)
    _persist(snap, row, state)
    snapshot = row.facts
    return CollectionResult(
        server_id=server.pk,
        server_name=server.name,
        ok=True,
        kind=snapshot.kind,
        taken_at=snapshot.taken_at,
        interval_s=snapshot.interval_s,
        entries=snapshot.entries,
        changed=snapshot.changed,
        new_entries=snapshot.new_entries,
        gone_entries=snapshot.gone_entries,
        dealloc_delta=snapshot.dealloc_delta,
        notes=snap.notes,
    )


KEEP_ERRORS = 50  # failed collections kept per server (the server page lists the recent ones)


def _record_failure(server: Server, exc: CollectionError) -> None:
    try:
        with transaction.atomic():
            Server.objects.filter(pk=server.pk).update(
                consecutive_failures=server.consecutive_failures + 1,
                last_error_class=exc.code,
                last_error_message=exc.message[:2000],
            )
            FailedCollection.objects.create(
                server_id=server.pk, at=timezone.now(), error_class=exc.code, message=exc.message[:2000]
            )
            older = (
                FailedCollection.objects.filter(server_id=server.pk).order_by("-at", "-id").values("id")[KEEP_ERRORS:]
            )
            FailedCollection.objects.filter(server_id=server.pk, id__in=older).delete()
    except DatabaseError:
        log.warning("could not record the failure of %s: history store unavailable", server)


def _collect_locked(server: Server) -> CollectionResult:
    """_collect under the server's advisory lock (CollectionBusy when another collection holds it)."""
    Server.objects.filter(pk=server.pk).update(last_attempt_at=timezone.now())
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, server.pk])
        if not cur.fetchone()[0]:
            raise CollectionBusy("another collection of this server is running")
    try:
        return _collect(server)
    finally:
        try:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, server.pk])
        except DatabaseError:
            pass  # the session is gone, and its lock with it


def server_collect(*, server_id: int) -> CollectionResult:
    """Collect one snapshot of one server. Never raises for the server's own problems; raises
    HistoryUnavailable when the history store cannot be reached (the caller retries)."""
    started = time.perf_counter()
    try:
        server = Server.objects.select_related("organization").get(pk=server_id)
    except Server.DoesNotExist:
        # A task queued before the server was removed: nothing to do.
        log.info("server %s no longer exists: collection dropped", server_id)
        return CollectionResult(
            server_id=server_id,
            server_name=str(server_id),
            ok=False,
            kind="gone",
            error_code="gone",
            error="the server no longer exists",
        )
    except (OperationalError, InterfaceError) as exc:
        raise HistoryUnavailable(f"history store unavailable: {exc}") from exc
    result = CollectionResult(server_id=server.pk, server_name=server.name, ok=False)
    try:
        share = server.organization.collecting_limit()
        with shares.held(server.organization_id, share) as mine:
            if not mine:
                raise OverShare(
                    f"{share} collections of {server.organization} were running, its share (ORG_MAX_COLLECTING)"
                )
            result = _collect_locked(server)
    except (CollectionBusy, OverShare) as exc:
        result.kind, result.error_code, result.error = exc.code, exc.code, exc.message
    except (OperationalError, InterfaceError, psycopg.OperationalError) as exc:
        if connection.connection is not None and not connection.is_usable():
            connection.close()
        if (full := history_full(exc)) is None:
            raise HistoryUnavailable(f"history store unavailable: {exc}") from exc
        log.warning("collection of %s not stored: %s", server, full.message)
        result.kind, result.error_code, result.error = "failed", full.code, full.message
        _record_failure(server, full)
    except CollectionError as exc:
        result.kind, result.error_code, result.error = "failed", exc.code, exc.message
        _record_failure(server, exc)
    except Exception as exc:  # a bug must not stop the other servers' collections
        log.exception("collection of %s failed unexpectedly", server)
        error = CollectionError(f"internal error: {type(exc).__name__}: {exc}")
        result.kind, result.error_code, result.error = "failed", error.code, error.message
        _record_failure(server, error)
    result.duration_ms = (time.perf_counter() - started) * 1000
    return result
