"""One collection of one server: read the monitored server, compute deltas, store them atomically.

`server_collect` is the only entry point; tasks and management commands call it. A collection reads
(_read), computes (_compute, no I/O) and persists (_persist): everything is stored in one
transaction of the history store or nothing is, and the server's status says why.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import psycopg
import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from history import codec, partitions, store, tables
from history.deltas import DeltaResult, Entries, compute, restarted_rows
from history.models import FailedCollection, ServerState
from history.snapshot_facts import SnapshotFacts
from history.store import LOCK_NAMESPACE
from inventory.models import Server
from readings import connection as monitored
from readings import lineage, pgss, sampler, shares, texts, waits
from readings.errors import (
    ClockWentBack,
    CollectionBusy,
    CollectionError,
    HistoryUnavailable,
    OverShare,
    history_full,
)
from readings.state_cache import state_cache

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


@dataclass
class _Previous:
    """What the previous snapshot left: the server's state (None before the first) and the statements'."""

    state: ServerState | None
    entries: Entries


def _load_previous(server_id: int) -> _Previous:
    state = ServerState.objects.filter(server_id=server_id).first()
    if state is None:
        return _Previous(None, Entries.empty())
    cached = state_cache.get(server_id, state.taken_at)
    return _Previous(state, cached if cached is not None else store.load_statement_state(server_id))


# --- read: the monitored server, and what the history store knows of its statements ---------


@dataclass
class _Read:
    meta: pgss.ServerMeta
    identity: lineage.Identity
    dealloc: int | None
    stats_reset_us: int | None
    continuity: lineage.Continuity
    reading: pgss.Reading
    statements: store.StatementLookup
    restarted: np.ndarray  # rows counting from zero again (deltas.restarted_rows): for texts, then deltas
    text_rows: np.ndarray  # rows whose text was asked for (keys never seen, and retries)
    texts: pgss.Texts
    waits: waits.WaitReading | None
    notes: list[str]


def _read(conn: psycopg.Connection, server: Server, previous: _Previous) -> _Read:
    meta = pgss.read_meta(conn, lineage.FUNCTIONS)
    cmap = pgss.column_map(conn, server.pk, meta)
    identity = lineage.read_identity(conn, meta)
    dealloc, stats_reset_us = pgss.read_info(conn, meta)
    continuity = lineage.assess(previous.state, meta, identity, stats_reset_us)
    baseline = previous.state is None or continuity.baseline_reason is not None
    budget = texts.Budget.from_settings()
    max_chars = texts.server_cut(settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"])
    # Churning (new keys at the last snapshot, or entries evicted since: pg_stat_statements_info.dealloc moved,
    # 14+, for a storm's lull with no new key): the text file is read at every snapshot anyway, so the new keys'
    # texts come with their counters, before a storm can evict them in between; and so do those of known
    # statements still without one, when the server sends their entries.
    churning = not baseline and (
        bool(previous.state.new_entries)
        or None not in (dealloc, previous.state.dealloc)
        and dealloc != previous.state.dealloc
    )
    wanting = store.statements_wanting_text(server.pk, previous.entries.statement_id) if churning else None
    reading = pgss.read_entries(
        conn,
        meta,
        cmap,
        previous.entries,
        send_all=continuity.full_reset or baseline,
        texts_of_new=(max_chars, budget.in_scan(max_chars)) if churning else None,
        wanting_text=wanting,
    )
    notes = lineage.notes(meta)
    if reading.hidden:
        notes.append(
            f"{reading.hidden} entries of other roles are not visible: grant pg_monitor (pg_read_all_stats) "
            "to the monitoring role"
        )
    statements = store.lookup_statements(
        server.pk, reading.entries, previous.entries, reading.prev_index, reading.sent_rows
    )
    restarted = restarted_rows(previous.entries, reading.entries, reading.prev_index)
    text_rows = texts.rows_to_read(reading, statements, restarted)
    text_reads = pgss.read_texts(
        conn,
        meta,
        cmap,
        reading.entries.keys[text_rows],
        max_chars=max_chars,
        max_texts=budget.texts,
        budget_chars=budget.chars,
        already=reading.texts,
    )
    if text_reads.deferred:
        notes.append(
            f"{text_reads.deferred} query texts put off to the next snapshots: this one read its limit "
            f"({budget.texts:,} texts or {budget.chars / 2**20:g} MB of text; COLLECTOR_TEXTS_PER_SNAPSHOT, "
            "COLLECTOR_TEXT_BYTES_PER_SNAPSHOT)"
        )
    wait_reading = None
    if meta.wait_sampling_schema:
        try:
            wait_reading = waits.read_wait_sampling(conn, meta)
        except CollectionError as exc:
            notes.append(f"pg_wait_sampling unusable ({exc.message}); sampling pg_stat_activity instead")
    if wait_reading is None and settings.COLLECTOR["ACTIVITY_SAMPLES"] > 0:
        wait_reading = _sampled_activity(conn, server, meta, baseline)
    return _Read(
        meta,
        identity,
        dealloc,
        stats_reset_us,
        continuity,
        reading,
        statements,
        restarted,
        text_rows,
        text_reads,
        wait_reading,
        notes,
    )


def _sampled_activity(
    conn: psycopg.Connection, server: Server, meta: pgss.ServerMeta, baseline: bool
) -> waits.WaitReading | None:
    """pg_stat_activity's samples for this interval: those the sampler took since the previous snapshot while
    one runs (none at a baseline: they belong to no interval, and are dropped), else a few looks now, inline.
    Redis not answering: no sampler can be reached either, so the looks are taken inline."""
    try:
        alive, reading = sampler.take(server.pk)
    except redis.RedisError:
        alive, reading = False, None
    if alive:
        return None if baseline else reading
    if baseline:
        return None
    cfg = settings.COLLECTOR
    return waits.sample_activity(conn, meta, samples=cfg["ACTIVITY_SAMPLES"], span_s=cfg["ACTIVITY_SPAN_S"])


def _read_with_retry(server: Server, previous: _Previous) -> _Read:
    target = monitored.monitoring_target(server)
    budget_s = target.limits().snapshot_s
    deadline = time.monotonic() + budget_s  # connecting (bounded by connect_timeout) counts too
    conn, reused = monitored.checkout(target)
    try:
        try:
            conn.limit_to(deadline, budget_s)
            read = _read(conn, server, previous)
        except CollectionError as exc:
            if not reused or exc.code not in ("unreachable", "error"):
                raise
            # A kept connection may have died with the server; one fresh try, within the same deadline.
            monitored.discard(target, conn)
            conn = monitored.connect(target)
            conn.limit_to(deadline, budget_s)
            read = _read(conn, server, previous)
    except BaseException:
        monitored.discard(target, conn)
        raise
    monitored.checkin(target, conn)
    return read


# --- compute: deltas, facts, texts and the new state, without I/O -----------------------------


@dataclass
class _Computed:
    snapshot: store.NewSnapshot  # its block is built in _persist, once new statements have ids
    deltas: DeltaResult
    booked: np.ndarray  # rows whose deltas are this interval's facts
    new_statements: list[store.NewStatement]  # for the rows of keys never seen, in order
    texts_found: dict[int, store.StatementText]  # statement id -> text read again (or a new reason)
    wait_rows: list[waits.IntervalWait]
    state: ServerState
    notes: list[str]


def _compute(server: Server, previous: _Previous, read: _Read) -> _Computed:
    meta, cur, prev_state, continuity = read.meta, read.reading.entries, previous.state, read.continuity
    taken_at = pgss.timestamp(meta.taken_at_us)
    if prev_state is not None and taken_at <= prev_state.taken_at:
        raise ClockWentBack(
            f"snapshot time {taken_at.isoformat()} is not after the previous one "
            f"({prev_state.taken_at.isoformat()}): the server clock went back"
        )
    baseline = prev_state is None or continuity.baseline_reason is not None
    notes = ([continuity.baseline_reason] if continuity.baseline_reason else []) + read.notes
    # After another lineage every entry is read again from zero, so the whole state is rewritten.
    d = compute(
        previous.entries,
        cur,
        full_reset=continuity.full_reset or baseline,
        prev_index=read.reading.prev_index,
        restarted=read.restarted,
    )
    booked = np.zeros(len(cur), bool) if baseline else d.changed.copy()
    newly_visible = continuity.newly_visible(cur.keys, d.new)
    if not baseline and newly_visible.any():
        booked &= ~newly_visible
        notes.append(
            f"the monitoring role now sees statements it could not see before (pg_read_all_stats granted, or "
            f"another role): the {int(newly_visible.sum())} that became visible are counted from the next snapshot "
            "on (their earlier activity was not visible)"
        )

    interval_s = dealloc_delta = None
    wait_rows: list[waits.IntervalWait] = []
    if not baseline:
        interval_s = (taken_at - prev_state.taken_at).total_seconds()
        if read.dealloc is not None:
            if prev_state.dealloc is None or continuity.full_reset or read.dealloc < prev_state.dealloc:
                dealloc_delta = read.dealloc
            else:
                dealloc_delta = read.dealloc - prev_state.dealloc
        if read.waits is not None:
            wait_rows = waits.rows_for_interval(read.waits, waits.decode_profile(prev_state.wait_profile), interval_s)

    sample_rate, max_setting = meta.setting("sample_rate"), meta.setting("max")
    facts = SnapshotFacts(
        taken_at=taken_at,
        prev_taken_at=None if baseline else prev_state.taken_at,
        interval_s=interval_s,
        kind="baseline" if baseline else "delta",
        server_version_num=meta.server_version_num,
        extension_version=meta.extension_version,
        entries=len(cur),
        entries_hidden=read.reading.hidden,
        entries_max=int(max_setting) if max_setting else None,
        changed=int(booked.sum()),
        new_entries=0 if baseline else int(d.new.sum()),
        gone_entries=len(d.gone),
        dealloc=read.dealloc,
        dealloc_delta=dealloc_delta,
        stats_reset_at=pgss.timestamp(read.stats_reset_us),
        full_reset=continuity.full_reset,
        track=meta.setting("track"),
        track_utility=meta.flag("track_utility"),
        track_planning=meta.flag("track_planning"),
        save=meta.flag("save"),
        sample_rate=float(sample_rate) if sample_rate is not None else None,
        waits_source=None if baseline or read.waits is None else read.waits.source,
        waits_samples=None if baseline or read.waits is None else read.waits.n_samples,
    )
    profile = read.waits.profile if read.waits is not None else None
    state = ServerState(
        server_id=server.pk,
        taken_at=taken_at,
        postmaster_start_at=pgss.timestamp(meta.postmaster_start_us),
        stats_reset_at=pgss.timestamp(read.stats_reset_us),
        dealloc=read.dealloc,
        wait_profile=None if profile is None else waits.encode_profile(profile),
        system_identifier=read.identity.system_identifier,
        timeline_id=read.identity.timeline_id,
        in_recovery=read.identity.in_recovery,
        reads_all_stats=meta.reads_all_stats,
        role_oid=meta.role_oid,
        new_entries=0 if baseline else int(d.new.sum()),  # a baseline's entries are all "new": not churn
    )
    new_statements, texts_found = texts.outcome(
        cur.keys, read.text_rows, read.statements, read.texts, settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"]
    )
    snapshot = store.NewSnapshot(server_id=server.pk, facts=facts, block=None)
    return _Computed(snapshot, d, booked, new_statements, texts_found, wait_rows, state, notes)


# --- persist: one transaction ------------------------------------------------------------------


def _persist(server: Server, previous: _Previous, read: _Read, computed: _Computed) -> None:
    cur, d, new = read.reading.entries, computed.deltas, computed.snapshot
    snapshot = new.facts
    # Partitions are created outside the snapshot's transaction, so their DDL never waits on it.
    partitions.ensure(tables.SNAPSHOT.name, snapshot.taken_at)
    if computed.wait_rows:
        partitions.ensure(tables.WAIT_EVENT.name, snapshot.taken_at)

    state_cache.drop(server.pk)  # until this transaction commits, the cached state may not be the stored one
    with transaction.atomic():
        # Facts and state commit together, so losing this commit in a crash of the history store
        # loses no count (the next snapshot spans the gap from the older state): no need to wait
        # for the WAL flush.
        with connection.cursor() as dcur:
            dcur.execute("SET LOCAL synchronous_commit = off")
        cur.statement_id = store.statement_ids(
            server.pk, read.statements, cur.keys, computed.new_statements, snapshot.taken_at
        )
        if snapshot.kind == "delta":
            rows = np.flatnonzero(computed.booked)
            order = rows[np.argsort(cur.statement_id[rows], kind="stable")]
            new.block = codec.Block(cur.statement_id[order], d.deltas[order], d.fact_gauges[order])
        store.insert_snapshot(new)
        store.insert_waits(server.pk, snapshot.taken_at, computed.wait_rows)
        store.update_texts(server.pk, computed.texts_found)
        gone_ids = previous.entries.statement_id[d.gone] if len(previous.entries) else np.empty(0, np.int64)
        store.write_statement_state(
            server.pk,
            cur.take(np.flatnonzero(d.state_dirty)),
            gone_ids,
            snapshot.taken_at,
            back_ids=cur.statement_id[d.new],
        )
        store.save_server_state(computed.state)
        Server.objects.filter(pk=server.pk).update(
            last_success_at=timezone.now(),
            consecutive_failures=0,
            last_error_class="",
            last_error_message="",
            status_notes="\n".join(computed.notes),
            server_version_num=read.meta.server_version_num,
            extension_version=read.meta.extension_version,
        )
    state_cache.put(server.pk, snapshot.taken_at, cur)


def _collect(server: Server) -> CollectionResult:
    previous = _load_previous(server.pk)
    read = _read_with_retry(server, previous)
    computed = _compute(server, previous, read)
    _persist(server, previous, read, computed)
    snapshot = computed.snapshot.facts
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
        notes=computed.notes,
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
