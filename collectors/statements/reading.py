"""The statements reading: pg_stat_statements' counters (pgss.py), and whether they continue the previous
snapshot's (lineage.py).

The previous state goes to the server, which sends back only the entries that are new or changed; deltas follow
DESIGN.md's rules (deltas.py). Its read also decides whether the snapshot is a baseline, which every other
reading follows.
"""

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings

from collectors import redact
from collectors.errors import ClockWentBack
from collectors.settings import instance
from collectors.state_cache import state_cache
from collectors.statements import lineage, pgss
from collectors.statements.columns import ColumnMap
from collectors.statements.deltas import DeltaResult, restarted_rows
from collectors.statements.deltas import compute as compute_deltas
from collectors.texts import texts
from collectors.unit import Collection, Failure, Previous, Reading, Sql
from history.public import (
    TABLES,
    TOTAL_NAMES,
    Block,
    NewStatement,
    ServerState,
    SnapshotWriter,
    StatementLookup,
    TextStatus,
    lookup_returning,
    totals_of,
)


@dataclass
class StatementsRead:
    identity: lineage.Identity
    dealloc: int | None
    stats_reset_us: int | None
    continuity: lineage.Continuity
    reading: pgss.PgssReading
    cmap: ColumnMap  # of the installed extension version
    statements: StatementLookup
    restarted: np.ndarray  # rows counting from zero again (deltas.restarted_rows): for texts, then deltas


@dataclass
class StatementsComputed:
    deltas: DeltaResult
    booked: np.ndarray  # rows whose deltas are this interval's facts
    # the dimension rows of the keys never seen, with their texts: the texts reading's compute (which comes after
    # this one) sets them; None when it did not run (failed, or its texts put off), and they are stored pending
    new_statements: list[NewStatement] | None = None


def read(snap: Collection) -> StatementsRead:
    conn, meta, server, previous = snap.conn, snap.meta, snap.server, snap.previous
    cmap = pgss.column_map(conn, server.pk, meta)
    identity = lineage.read_identity(conn, meta)
    dealloc, stats_reset_us = pgss.read_info(conn, meta)
    continuity = lineage.assess(previous.state, meta, identity, stats_reset_us)
    snap.baseline = previous.state is None or continuity.baseline_reason is not None
    budget = texts.TextBudget.from_settings()
    max_chars = texts.server_cut(settings.COLLECTOR["QUERY_TEXT_MAX_BYTES"])
    # Churning (new keys at the last snapshot, or entries evicted since: pg_stat_statements_info.dealloc moved,
    # 14+, for a storm's lull with no new key): the text file is read at every snapshot anyway, so the new keys'
    # texts come with their counters, before a storm can evict them in between; and so do those of known
    # statements still without one, when the server sends their entries. A baseline (a first snapshot, or one
    # after a restart or another server's statistics) reads every key as new and the text file for them anyway:
    # their texts come with the counters too, so that a server already churning when its history begins (or
    # begins again) loses none in between.
    churning = not snap.baseline and (
        bool(previous.state.new_entries)
        or None not in (dealloc, previous.state.dealloc)
        and dealloc != previous.state.dealloc
    )
    wanting = _wanting_text(previous) if churning else None
    reading = pgss.read_entries(
        conn,
        meta,
        cmap,
        previous.entries,
        send_all=continuity.full_reset or snap.baseline,
        texts_of_new=(max_chars, budget.in_scan(max_chars)) if churning or snap.baseline else None,
        wanting_text=wanting,
    )
    snap.notes.extend(lineage.notes(meta))
    if reading.hidden:
        snap.notes.append(
            f"{reading.hidden} entries of other roles are not visible: grant pg_monitor (pg_read_all_stats) "
            "to the monitoring role"
        )
    statements = StatementLookup.from_previous(
        previous.entries, reading.prev_index, reading.sent_rows, previous.texts_missing
    )
    restarted = restarted_rows(previous.entries, reading.entries, reading.prev_index)
    return StatementsRead(identity, dealloc, stats_reset_us, continuity, reading, cmap, statements, restarted)


def _wanting_text(previous: Previous) -> np.ndarray:
    """Which previous entries' statements still want a text that pg_stat_statements has (evicted before it was
    read, not visible to the role then, or put off): read with the previous state."""
    wanting = [i for i, status in previous.texts_missing.items() if status != TextStatus.UNAVAILABLE]
    return np.isin(previous.entries.statement_id, wanting)


def settle(snap: Collection, got: StatementsRead) -> None:
    """The keys the previous state did not hold, looked up in the statements' dimension (evicted and back, or
    hidden then): their texts were read as if new (the texts reading), and are kept only where none is stored."""
    got.statements = lookup_returning(snap.server.pk, got.statements, got.reading.entries.keys)


def compute(snap: Collection, got: StatementsRead) -> StatementsComputed:
    meta, cur, previous, continuity = snap.meta, got.reading.entries, snap.previous, got.continuity
    prev_state = previous.state
    snap.taken_at = taken_at = instance.timestamp(meta.taken_at_us)
    if prev_state is not None and taken_at <= prev_state.taken_at:
        raise ClockWentBack(
            f"snapshot time {taken_at.isoformat()} is not after the previous one "
            f"({prev_state.taken_at.isoformat()}): the server clock went back"
        )
    baseline = snap.baseline
    if continuity.baseline_reason:
        snap.notes.insert(0, continuity.baseline_reason)
    # After another lineage every entry is read again from zero, so the whole state is rewritten.
    d = compute_deltas(
        previous.entries,
        cur,
        full_reset=continuity.full_reset or baseline,
        prev_index=got.reading.prev_index,
        restarted=got.restarted,
    )
    booked = np.zeros(len(cur), bool) if baseline else d.changed.copy()
    newly_visible = continuity.newly_visible(cur.keys, d.new)
    if not baseline and newly_visible.any():
        booked &= ~newly_visible
        snap.notes.append(
            f"the monitoring role now sees statements it could not see before (pg_read_all_stats granted, or "
            f"another role): the {int(newly_visible.sum())} that became visible are counted from the next snapshot "
            "on (their earlier activity was not visible)"
        )
    dealloc_delta = None
    if not baseline:
        snap.interval_s = (taken_at - prev_state.taken_at).total_seconds()
        if got.dealloc is not None:
            if prev_state.dealloc is None or continuity.full_reset or got.dealloc < prev_state.dealloc:
                dealloc_delta = got.dealloc
            else:
                dealloc_delta = got.dealloc - prev_state.dealloc
    new_entries = 0 if baseline else int(d.new.sum())  # a baseline's entries are all "new": not churn
    snap.facts |= {
        "taken_at": taken_at,
        "prev_taken_at": None if baseline else prev_state.taken_at,
        "interval_s": snap.interval_s,
        "kind": "baseline" if baseline else "delta",
        "entries": len(cur),
        "entries_hidden": got.reading.hidden,
        "changed": int(booked.sum()),
        "new_entries": new_entries,
        "gone_entries": len(d.gone),
        "dealloc": got.dealloc,
        "dealloc_delta": dealloc_delta,
        "stats_reset_at": instance.timestamp(got.stats_reset_us),
        "full_reset": continuity.full_reset,
    }
    # The interval's server totals, once: the snapshot's row stores them and the running totals add them.
    snap.totals = None if baseline else totals_of(d.deltas[booked]).sum(axis=0)
    snap.state |= running_totals(
        prev_state,
        taken_at,
        snap.totals,
        dealloc_delta=None if baseline else dealloc_delta,
        planning=meta.flag("track_planning") is True,
    )
    snap.state |= {
        "taken_at": taken_at,
        "stats_reset_at": instance.timestamp(got.stats_reset_us),
        "dealloc": got.dealloc,
        "system_identifier": got.identity.system_identifier,
        "timeline_id": got.identity.timeline_id,
        "in_recovery": got.identity.in_recovery,
        "new_entries": new_entries,
    }
    return StatementsComputed(d, booked)


_CALLS, _EXEC, _PLAN = (TOTAL_NAMES.index(name) for name in ("calls", "exec_us", "plan_us"))


def running_totals(
    previous: ServerState | None,
    taken_at: datetime,
    sums: np.ndarray | None,
    *,
    dealloc_delta: int | None,
    planning: bool,
) -> dict:
    """The server's running totals (ServerState's counted_since, calls_total, …) after a snapshot: the previous
    ones plus this delta's `sums` (TOTAL_NAMES, its booked statements'; None for a baseline, which adds nothing).
    Planning is added only while tracked and deallocations only where known: until then each stays None."""
    if previous is None or previous.counted_since is None:
        since, calls, exec_us, plan_us, dealloc = taken_at, 0, 0, None, None
    else:
        since, calls, exec_us = previous.counted_since, previous.calls_total or 0, previous.exec_us_total or 0
        plan_us, dealloc = previous.plan_us_total, previous.dealloc_total
    if sums is not None:
        calls, exec_us = calls + int(sums[_CALLS]), exec_us + int(sums[_EXEC])
        if planning:
            plan_us = (plan_us or 0) + int(sums[_PLAN])
        if dealloc_delta is not None:
            dealloc = (dealloc or 0) + dealloc_delta
    return {
        "counted_since": since,
        "calls_total": calls,
        "exec_us_total": exec_us,
        "plan_us_total": plan_us,
        "dealloc_total": dealloc,
    }


def persist(snap: Collection, computed: StatementsComputed, writer: SnapshotWriter) -> None:
    """The statements' dimension (the new ones with what the texts reading found of them), the interval's block of
    deltas (snap.block, which the collection stores in the snapshot's row), and the state the next snapshot
    compares with."""
    got = snap.found(READING)
    cur, d, server_id = got.reading.entries, computed.deltas, snap.server.pk
    state_cache.drop(server_id)  # until this transaction commits, the cached state may not be the stored one
    new = computed.new_statements
    if new is None:
        new = texts.nothing_read(cur.keys, got.statements).new_statements
    cur.statement_id = writer.statements(got.statements, cur.keys, new, redacted_with=redact.VERSION)
    if not snap.baseline:
        rows = np.flatnonzero(computed.booked)
        order = rows[np.argsort(cur.statement_id[rows], kind="stable")]
        snap.block = Block(cur.statement_id[order], d.deltas[order], d.fact_gauges[order])
    previous = snap.previous.entries
    gone_ids = previous.statement_id[d.gone] if len(previous) else np.empty(0, np.int64)
    writer.statement_state(cur.take(np.flatnonzero(d.state_dirty)), gone_ids, back_ids=cur.statement_id[d.new])


def committed(snap: Collection, computed: StatementsComputed) -> None:
    state_cache.put(snap.server.pk, snap.taken_at, snap.found(READING).reading.entries)


READING = Reading(
    name="statements",
    what="pg_stat_statements' counters",
    sql=Sql(((instance.MIN_SERVER_VERSION, pgss.entries_sql),)),  # its columns are the installed extension's
    tables=(TABLES.SNAPSHOT, TABLES.STATEMENT, TABLES.STATEMENT_STATE),
    delta_rules=(
        "DESIGN.md, 'Counters are cumulative': now − before for a key seen before with counters not smaller and "
        "the same stats_since; now for a key new or restarted; nothing for a key gone; a baseline when the "
        "statistics are not the previous snapshot's (lineage.py)"
    ),
    failure=Failure.SNAPSHOT,
    read=read,
    compute=compute,
    settle=settle,
    persist=persist,
    committed=committed,
    after=("settings",),
)
