"""One collection of one server: read the monitored server, compute deltas, store them atomically.

`server_collect` is the only entry point; tasks and management commands call it. Everything is
stored in one transaction of the history store or nothing is, and the server's status says why.
"""
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import psycopg
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from collectors import codec, connection as monitored, history, partitions, pgss, waits
from collectors.columns import ColumnMap
from collectors.deltas import Entries, compute
from collectors.errors import CollectionBusy, CollectionError, HistoryUnavailable, ClockWentBack
from collectors.models import ServerState
from console.crypto import CredentialsError
from console.models import Server

log = logging.getLogger(__name__)
LOCK_NAMESPACE = 0x7067  # pg_try_advisory_lock(namespace, server_id): one collection per server
STATE_CACHE_SERVERS = 256


class _StateCache:
    """The statement state each server had after its last snapshot in this process.

    Reading 5,000 state rows back from the history store costs more than computing the deltas;
    the cached copy is used only while the stored ServerState still carries the same taken_at
    (state and ServerState are written in one transaction), so a snapshot taken meanwhile by
    another worker simply means a reload."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[int, tuple[datetime, Entries]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, server_id: int, taken_at: datetime) -> Entries | None:
        with self._lock:
            item = self._items.get(server_id)
            if item is None or item[0] != taken_at:
                return None
            self._items.move_to_end(server_id)
            return item[1]

    def put(self, server_id: int, taken_at: datetime, entries: Entries) -> None:
        with self._lock:
            self._items[server_id] = (taken_at, entries)
            self._items.move_to_end(server_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def drop(self, server_id: int) -> None:
        with self._lock:
            self._items.pop(server_id, None)


state_cache = _StateCache(STATE_CACHE_SERVERS)


@dataclass
class CollectionResult:
    server_id: int
    server_name: str
    ok: bool
    kind: str = ""  # baseline | delta | failed | busy
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


def _ts(us: int | None) -> datetime | None:
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, UTC)


def _target(server: Server) -> monitored.Target:
    try:
        password = server.get_password()
    except CredentialsError as exc:
        raise CollectionError(str(exc)) from exc
    return monitored.Target(
        server_id=server.pk,
        host=server.host,
        port=server.port,
        database=server.database,
        user=server.user,
        password=password,
        sslmode=server.sslmode,
    )


@dataclass
class _Read:
    meta: pgss.ServerMeta
    cmap: ColumnMap
    dealloc: int | None
    stats_reset_us: int | None
    full_reset: bool  # all statistics were reset since the previous snapshot: count every entry from zero
    reading: pgss.Reading
    waits: waits.WaitReading | None
    texts: pgss.Texts
    known: dict  # key -> statement id, for keys absent from the state but in the dimension
    unseen: np.ndarray  # keys never seen before (their texts are in `texts`)
    notes: list[str]


def _full_reset(meta: pgss.ServerMeta, stats_reset_us: int | None, prev_state: ServerState | None) -> bool:
    if prev_state is None:
        return False
    reset_at = _ts(stats_reset_us)
    if reset_at is not None and prev_state.stats_reset_at is not None:
        return reset_at != prev_state.stats_reset_at
    if meta.flag("save") is False and prev_state.postmaster_start_at is not None:
        # PostgreSQL 13 has no stats_reset: a restart with save=off empties the statistics.
        return _ts(meta.postmaster_start_us) != prev_state.postmaster_start_at
    return False


def _read_server(conn: psycopg.Connection, server: Server, prev_state: ServerState | None, prev: Entries) -> _Read:
    meta = pgss.read_meta(conn)
    cmap = pgss.column_map(conn, server.pk, meta)
    dealloc, stats_reset_us = pgss.read_info(conn, meta)
    full_reset = _full_reset(meta, stats_reset_us, prev_state)
    reading = pgss.read_entries(conn, meta, cmap, prev, send_all=full_reset)
    notes: list[str] = []
    if reading.hidden:
        notes.append(
            f"{reading.hidden} entries of other roles are not visible: grant pg_monitor (pg_read_all_stats) "
            "to the monitoring role"
        )
    wait_reading = None
    if meta.wait_sampling_schema:
        try:
            wait_reading = waits.read_wait_sampling(conn, meta)
        except CollectionError as exc:
            notes.append(f"pg_wait_sampling unusable ({exc.message}); sampling pg_stat_activity instead")
    if wait_reading is None and prev_state is not None and settings.COLLECTOR["ACTIVITY_SAMPLES"] > 0:
        wait_reading = waits.sample_activity(
            conn, meta, samples=settings.COLLECTOR["ACTIVITY_SAMPLES"], span_s=settings.COLLECTOR["ACTIVITY_SPAN_S"]
        )
    # Texts only for keys never seen before: not in the state, and not in the dimension.
    unmatched = reading.entries.keys[reading.prev_index < 0]
    known = history.find_statements(server.pk, unmatched)
    unseen = np.array([k for k in unmatched.tolist() if tuple(k) not in known], dtype=np.int64).reshape(-1, 4)
    texts = pgss.read_texts(conn, meta, cmap, unseen)
    return _Read(meta, cmap, dealloc, stats_reset_us, full_reset, reading, wait_reading, texts, known, unseen, notes)


def _collect(server: Server) -> CollectionResult:
    result = CollectionResult(server_id=server.pk, server_name=server.name, ok=False)
    prev_state = ServerState.objects.filter(server_id=server.pk).first()
    prev = Entries.empty()
    if prev_state is not None:
        cached = state_cache.get(server.pk, prev_state.taken_at)
        prev = cached if cached is not None else history.load_statement_state(server.pk)

    target = _target(server)
    conn, reused = monitored.checkout(target)
    try:
        try:
            read = _read_server(conn, server, prev_state, prev)
        except CollectionError as exc:
            if not reused or exc.code not in ("unreachable", "error"):
                raise
            # A kept connection may have died with the server; one fresh try.
            monitored.discard(target, conn)
            conn = monitored.connect(target)
            read = _read_server(conn, server, prev_state, prev)
    except BaseException:
        monitored.discard(target, conn)
        raise
    monitored.checkin(target, conn)

    meta, cur = read.meta, read.reading.entries
    taken_at = _ts(meta.taken_at_us)
    result.notes = read.notes
    result.taken_at = taken_at
    result.entries = len(cur)

    full_reset = read.full_reset
    interval_s = None
    if prev_state is not None:
        if taken_at <= prev_state.taken_at:
            raise ClockWentBack(
                f"snapshot time {taken_at.isoformat()} is not after the previous one "
                f"({prev_state.taken_at.isoformat()}): the server clock went back"
            )
        interval_s = (taken_at - prev_state.taken_at).total_seconds()

    d = compute(prev, cur, full_reset=full_reset, prev_index=read.reading.prev_index)
    baseline = prev_state is None

    # Statement ids: from the state, the dimension, or new dimension rows.
    statement_id = np.zeros(len(cur), np.int64)
    matched = ~d.new
    if len(prev):
        statement_id[matched] = prev.statement_id[d.prev_index[matched]]
    max_bytes = settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"]
    new_rows = []
    for key in read.unseen.tolist():
        key_t = tuple(key)
        text = read.texts.by_key.get(key_t)
        truncated = False
        if text is not None:
            text, truncated = pgss.clip(pgss.redact(text), max_bytes)
        new_rows.append(
            history.NewStatement(
                key=key_t,
                database_name=read.texts.databases.get(key[1], ""),
                user_name=read.texts.users.get(key[0], ""),
                query=text,
                truncated=truncated,
            )
        )

    dealloc_delta = None
    if not baseline and read.dealloc is not None:
        if prev_state.dealloc is None or full_reset or read.dealloc < prev_state.dealloc:
            dealloc_delta = read.dealloc
        else:
            dealloc_delta = read.dealloc - prev_state.dealloc

    wait_rows: list[waits.WaitRow] = []
    previous_profile = waits.decode_profile(prev_state.wait_profile) if prev_state else None
    if read.waits is not None and not baseline:
        wait_rows = waits.rows_for_interval(read.waits, previous_profile, interval_s)

    # Partitions are created outside the snapshot's transaction, so their DDL never waits on it.
    partitions.ensure("collectors_snapshot", taken_at)
    if wait_rows:
        partitions.ensure("collectors_wait_event", taken_at)

    state_cache.drop(server.pk)  # until this transaction commits, the cached state may not be the stored one
    with transaction.atomic():
        # Facts and state commit together, so losing this commit in a crash of the history store
        # loses no count (the next snapshot spans the gap from the older state): no need to wait
        # for the WAL flush.
        with connection.cursor() as dcur:
            dcur.execute("SET LOCAL synchronous_commit = off")
        ids = history.insert_statements(server.pk, new_rows, taken_at)
        ids.update(read.known)
        for i in np.flatnonzero(d.new):
            statement_id[i] = ids[tuple(cur.keys[i].tolist())]
        cur.statement_id = statement_id

        block = None
        changed = 0
        if not baseline:
            rows = np.flatnonzero(d.changed)
            order = rows[np.argsort(statement_id[rows], kind="stable")]
            block = codec.Block(statement_id[order], d.deltas[order], d.fact_gauges[order])
            changed = len(order)
        sample_rate = meta.setting("sample_rate")
        max_setting = meta.setting("max")
        history.insert_snapshot(
            history.SnapshotRow(
                server_id=server.pk,
                taken_at=taken_at,
                prev_taken_at=None if baseline else prev_state.taken_at,
                interval_s=interval_s,
                kind="baseline" if baseline else "delta",
                server_version_num=meta.server_version_num,
                extension_version=meta.extension_version,
                entries=len(cur),
                entries_hidden=read.reading.hidden,
                entries_max=int(max_setting) if max_setting else None,
                changed=changed,
                new_entries=int(d.new.sum()) if not baseline else 0,
                gone_entries=len(d.gone),
                dealloc=read.dealloc,
                dealloc_delta=dealloc_delta,
                stats_reset_at=_ts(read.stats_reset_us),
                full_reset=full_reset,
                track=meta.setting("track"),
                track_utility=meta.flag("track_utility"),
                track_planning=meta.flag("track_planning"),
                save=meta.flag("save"),
                sample_rate=float(sample_rate) if sample_rate is not None else None,
                waits_source=None if baseline or read.waits is None else read.waits.source,
                waits_samples=read.waits.n_samples if read.waits is not None and not baseline else None,
                block=block,
            )
        )
        history.insert_waits(server.pk, taken_at, wait_rows)
        dirty = np.flatnonzero(d.state_dirty)
        history.write_statement_state(
            server.pk, cur.take(dirty), prev.statement_id[d.gone] if len(prev) else np.empty(0, np.int64)
        )
        profile = None
        if read.waits is not None and read.waits.profile is not None:
            profile = waits.encode_profile(read.waits.profile)
        with connection.cursor() as dcur:  # one round trip instead of update_or_create's four
            dcur.execute(
                "INSERT INTO collectors_serverstate (server_id, taken_at, postmaster_start_at, stats_reset_at, "
                "dealloc, wait_profile) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (server_id) DO UPDATE SET "
                "taken_at = EXCLUDED.taken_at, postmaster_start_at = EXCLUDED.postmaster_start_at, "
                "stats_reset_at = EXCLUDED.stats_reset_at, dealloc = EXCLUDED.dealloc, "
                "wait_profile = EXCLUDED.wait_profile",
                [server.pk, taken_at, _ts(meta.postmaster_start_us), _ts(read.stats_reset_us), read.dealloc,
                 None if profile is None else json.dumps(profile)],
            )
        Server.objects.filter(pk=server.pk).update(
            last_success_at=timezone.now(),
            consecutive_failures=0,
            last_error_class="",
            last_error_message="",
            status_notes="\n".join(read.notes),
            server_version_num=meta.server_version_num,
            extension_version=meta.extension_version,
        )

    state_cache.put(server.pk, taken_at, cur)
    result.ok = True
    result.kind = "baseline" if baseline else "delta"
    result.interval_s = interval_s
    result.changed = changed
    result.new_entries = 0 if baseline else int(d.new.sum())
    result.gone_entries = len(d.gone)
    result.dealloc_delta = dealloc_delta
    return result


def _record_failure(server: Server, exc: CollectionError) -> None:
    try:
        Server.objects.filter(pk=server.pk).update(
            consecutive_failures=server.consecutive_failures + 1,
            last_error_class=exc.code,
            last_error_message=exc.message[:2000],
        )
    except DatabaseError:
        log.warning("could not record the failure of %s: history store unavailable", server)


def server_collect(*, server_id: int) -> CollectionResult:
    """Collect one snapshot of one server. Never raises for the server's own problems; raises
    HistoryUnavailable when the history store cannot be reached (the caller retries)."""
    started = time.perf_counter()
    try:
        server = Server.objects.get(pk=server_id)
    except Server.DoesNotExist:
        # A task queued before the server was removed: nothing to do.
        log.info("server %s no longer exists: collection dropped", server_id)
        return CollectionResult(server_id=server_id, server_name=str(server_id), ok=False, kind="gone",
                                error_code="gone", error="the server no longer exists")  # fmt: skip
    except (OperationalError, InterfaceError) as exc:
        raise HistoryUnavailable(f"history store unavailable: {exc}") from exc
    result = CollectionResult(server_id=server.pk, server_name=server.name, ok=False)
    try:
        Server.objects.filter(pk=server.pk).update(last_attempt_at=timezone.now())
        with connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, server.pk])
            if not cur.fetchone()[0]:
                raise CollectionBusy("another collection of this server is running")
        try:
            result = _collect(server)
        finally:
            try:
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, server.pk])
            except DatabaseError:
                pass  # the session is gone, and its lock with it
    except CollectionBusy as exc:
        result.kind, result.error_code, result.error = "busy", exc.code, exc.message
    except (OperationalError, InterfaceError, psycopg.OperationalError) as exc:
        if connection.connection is not None and not connection.is_usable():
            connection.close()
        raise HistoryUnavailable(f"history store unavailable: {exc}") from exc
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
