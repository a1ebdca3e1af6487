"""Evidence for one server, built only from the selectors (the rules never touch the ORM or SQL).

Windows: the last hour (ADVISOR_SHORT_WINDOW_S), day and week ending now. Rates are per second of history the
window holds, so a server monitored for ten minutes is judged on those ten minutes (and says so in `notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings as django_settings

from advisor.evidence import (
    Evidence,
    HelpedStatement,
    MadeIndexFact,
    MissingIndexFact,
    Settings,
    StatementEffect,
    StatementFact,
)
from inventory.models import Server
from readtier import (
    SchemaOverview,
    Window,
    all_statements,
    fleet_summary,
    index_candidates,
    schema_overview,
    server_facts,
    server_series,
    server_settings,
    statement_series,
    statements_using,
    wait_events,
)

DAY, WEEK = timedelta(days=1), timedelta(days=7)
# Fewer delta snapshots than this in the last hour: rates are not judged yet (one interval is not "sustained").
MIN_SNAPSHOTS = 2
LWLOCK_EVENT = "LWLock:pg_stat_statements"
SPINDELAY_EVENT = "Timeout:SpinDelay"
NO_SNAPSHOT = "No snapshot yet: the advisor waits for the first collections."


@dataclass
class Gathered:
    evidence: Evidence | None  # None: nothing to judge yet (never collected)
    notes: list[str] = field(default_factory=list)  # what the evidence lacks, in sentences
    partial: bool = False  # the monitoring role cannot see every statement


def _share(rows, event: str) -> float:
    """The event's share of sampled session time (0 when sampled sessions never waited on it)."""
    return next((r.share or 0.0 for r in rows if r.event == event), 0.0)


def _sessions(series, event: str) -> tuple:
    """Average active sessions in `event` per point (0 where sampled without it; None in gaps)."""
    return tuple((p.start, p.active_sessions.get(event, 0.0) if p.span_s else None, p.end) for p in series.points)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _name(length: timedelta) -> str:
    """A window's name as the evidence and the advice show it: 1h, 24h, 7d; 1min or 90s for a shortened one."""
    s = int(length.total_seconds())
    return f"{s // 3600}h" if s % 3600 == 0 else f"{s // 60}min" if s % 60 == 0 else f"{s}s"


def windows() -> dict[str, timedelta]:
    """The advisor's windows ending now, by name, shortest first: the last hour (ADVISOR_SHORT_WINDOW_S, which a
    test shortens to see a condition end within minutes), day and week."""
    short = timedelta(seconds=django_settings.ADVISOR_SHORT_WINDOW_S)
    return {_name(short): short, "24h": DAY, "7d": WEEK}


def server_evidence(*, server: Server, now: datetime) -> Gathered:
    """Read what the rules need about `server` as of `now`."""
    settings = server_settings(server_id=server.pk)
    if settings.taken_at is None or settings.server_version_num is None:
        return Gathered(None, [NO_SNAPSHOT])
    notes: list[str] = []
    version = settings.server_version_num // 10000
    w = {name: Window(now - length, now) for name, length in windows().items()}
    rows = {name: fleet_summary(server_ids=[server.pk], window=win, now=now)[0] for name, win in w.items()}
    short = next(iter(rows))
    hour = rows[short]
    judged = hour.snapshots >= MIN_SNAPSHOTS
    if not judged:
        last = "the last hour" if short == "1h" else f"the last {short}"
        notes.append(f"Only {hour.snapshots} snapshot(s) in {last}: rates are judged from {MIN_SNAPSHOTS} on.")
    dealloc = None
    if version >= 14 and judged:
        dealloc = {name: r.dealloc_per_s for name, r in rows.items() if r.dealloc_per_s is not None}
    elif version < 14:
        notes.append(
            f"PostgreSQL {version} has no deallocation counter: evictions are inferred from disappearing keys."
        )

    day, week = rows["24h"], rows["7d"]
    if week.span_s < DAY.total_seconds():
        notes.append(f"The history holds {_duration(week.span_s)}: day and week figures cover that much.")
    facts_day = server_facts(server_id=server.pk, window=w["24h"])
    facts_week = server_facts(server_id=server.pk, window=w["7d"])
    # The charts cover the day, or the history when it is younger (then drawn from its snapshots).
    began = facts_week.read_from
    chart = Window(max(w["24h"].start, began), now) if began is not None and began < now else w["24h"]
    series = server_series(server_id=server.pk, window=chart, top_events=50)
    sees_all = facts_day.reads_all_stats is not False
    if facts_day.reads_all_stats is False:
        notes.append(
            f"The monitoring role {server.user} lacks pg_read_all_stats: other roles' statements are hidden, "
            "so the evidence is partial and statement-level rules are withheld."
        )
    if server.cpu_count is None:
        notes.append("The CPU count is not set on the server: the distance to the spinlock cliff is unknown.")

    statements_day, _ = all_statements(server_id=server.pk, window=w["24h"])
    statements_week, _ = all_statements(server_id=server.pk, window=w["7d"])
    facts = tuple(
        StatementFact(
            queryid=s.queryid,
            query=s.query or "",
            calls=s.calls,
            total_exec_ms=s.exec_ms,
            total_plan_ms=s.plan_ms or 0.0,
            statement_id=s.statement_id,
        )
        for s in statements_day
    )
    hottest = max(statements_day, key=lambda s: s.calls, default=None)
    hottest_peak = None
    hottest_series: tuple = ()
    waits = wait_events(server_id=server.pk, window=w["24h"], top=50)
    spindelay_hot = False
    if hottest is not None and hottest.calls > 0:
        peaks = []
        recent = Window(max(now - timedelta(hours=6), w["24h"].start), now)
        for win in (recent, w["24h"], chart):
            points = statement_series(statement_id=hottest.statement_id, window=win).points
            peaks += [p.calls_per_s for p in points if p.calls_per_s is not None]
        hottest_peak = max(peaks, default=None)
        hottest_series = tuple((p.start, p.calls_per_s, p.end) for p in points)  # over the charts' window
        if version >= 16 and waits.rows:
            hot_waits = wait_events(server_id=server.pk, window=w["24h"], statement_id=hottest.statement_id, top=50)
            spindelay_hot = _share(hot_waits.rows, SPINDELAY_EVENT) > 0
    sampled = waits.span_s > 0  # sampled, even if no session was active in the samples
    if not sampled:
        notes.append("No wait events sampled in the last day: lock contention cannot be judged.")
    schema = schema_overview(server_id=server.pk, window=w["24h"])
    if schema.read_at is None:
        notes.append("No reading of the server's tables and indexes yet: indexes cannot be judged.")

    evidence = Evidence(
        server=server.name,
        version=version,
        settings=Settings(
            max=settings.entries_max or 5000,
            track=settings.track or "top",
            track_utility=settings.track_utility if settings.track_utility is not None else True,
            track_planning=settings.track_planning,
            save=settings.save if settings.save is not None else True,
            sample_rate=settings.sample_rate,
        ),
        cpu_count=server.cpu_count,
        sees_all_statements=sees_all,
        monitoring_role=server.user,
        dealloc_per_s=dealloc,
        dealloc_series=tuple((p.start, p.dealloc_per_s, p.end) for p in series.points) if version >= 14 else (),
        entries_series=tuple((p.start, p.entries_peak, p.end) for p in series.points),
        hottest_series=hottest_series,
        lwlock_series=_sessions(series, LWLOCK_EVENT),
        spindelay_series=_sessions(series, SPINDELAY_EVENT) if version >= 16 else (),
        distinct_keys_1d=len(statements_day),
        distinct_keys_7d=len(statements_week),
        entries_peak=max((x for x in (day.entries_peak, facts_day.entries_peak) if x is not None), default=None),
        keys_disappeared_1d=facts_day.gone_entries if judged else None,
        mean_query_len=facts_day.mean_text_bytes,
        stats_resets=tuple(facts_week.stats_resets),
        hottest_queryid=hottest.queryid if hottest else None,
        hottest_calls_per_s=hottest_peak,
        lwlock_pgss_share=_share(waits.rows, LWLOCK_EVENT) if sampled else None,
        spindelay_share=_share(waits.rows, SPINDELAY_EVENT) if sampled and version >= 16 else None,
        spindelay_on_hot_statements=spindelay_hot,
        server_db_time_ms=sum(s.exec_ms + (s.plan_ms or 0.0) for s in statements_day),
        statements=facts,
        schema_read_at=schema.read_at,
        indexes=tuple(schema.indexes),
        in_recovery=schema.in_recovery,
        standbys=schema.standbys,
        missing_indexes=_missing_indexes(server.pk, statements_day, schema),
        made_indexes=_made_indexes(server.pk, schema, now),
    )
    return Gathered(evidence, notes, partial=not sees_all)


def _missing_indexes(server_id: int, statements_day, schema: SchemaOverview) -> tuple[MissingIndexFact, ...]:
    """The indexes the statements' last plans ask for, each once with every statement it helps (their time of
    the last day), and its table's writes a day from the schema reading."""
    time_of = {s.statement_id: (s.exec_ms + (s.plan_ms or 0.0), s.query or "") for s in statements_day}
    tables = {(t.database, t.schema_name, t.name): t for t in schema.tables}
    groups: dict[tuple, list] = {}
    for c in index_candidates(server_id=server_id):
        if c.asks:
            # A partition's index is its partitioned table's: one index of the root, made on each partition.
            root = c.partition_of or {"schema": c.schema_name, "table": c.table_name}
            groups.setdefault((c.database, root["schema"], root["table"], tuple(c.columns)), []).append(c)
    found = []
    for (database, schema_name, table, columns), rows in sorted(groups.items()):
        per_statement: dict[int, list] = {}
        for r in rows:
            per_statement.setdefault(r.statement_id, []).append(r)
        helped = tuple(
            # Each of its scans the index serves (a partition each, say) saves what its own costing said.
            HelpedStatement(sid, query, spent_ms, before, max(0.0, before - sum(before - r.cost_after for r in own)))
            for sid, own in per_statement.items()
            for spent_ms, query in [time_of.get(sid, (0.0, ""))]
            for before in [max(r.cost_before for r in own)]
        )
        read = {(r.schema_name, r.table_name): r for r in rows}  # the tables (partitions) the plans read
        measured = [tables.get((database, *key)) for key in read]
        writes = [t.per_day(t.index_writes) for t in measured if t is not None]
        first = rows[0]
        found.append(
            MissingIndexFact(
                database=database,
                schema_name=schema_name,
                table_name=table,
                columns=columns,
                method=min(r.method for r in rows),  # cost-verified before estimated: the planner's own word
                size_bytes=sum(r.size_bytes or 0 for r in read.values()) or None,
                reltuples=sum(r.reltuples for r in read.values()),
                selectivity=first.selectivity,
                statements=helped,
                table_writes_per_day=None if not writes or None in writes else sum(writes),
                table_indexes=None if measured[0] is None else measured[0].indexes,
                partition_tree=tuple(tuple(x) for x in (first.partition_of or {}).get("tree", ())),
                partitions_read=len(read) if first.partition_of else 0,
            )
        )
    return tuple(found)


def _made_indexes(server_id: int, schema: SchemaOverview, now: datetime) -> tuple[MadeIndexFact, ...]:
    """The indexes made in the last week (first seen after their database's first reading), with the statements
    whose current plan reads each and their mean time the week before it and since."""
    first_read: dict[str, datetime] = {}
    for i in schema.indexes:
        first_read[i.database] = min(first_read.get(i.database, i.first_seen_at), i.first_seen_at)
    made = [i for i in schema.indexes if i.first_seen_at > first_read[i.database] and now - i.first_seen_at <= WEEK]
    if not made:
        return ()
    using = statements_using(server_id=server_id, index_names={i.name for i in made})
    windows: dict[datetime, tuple] = {}  # indexes found by the same reading share their windows
    found = []
    for i in made:
        ids = set(using.get(i.name, []))
        if i.first_seen_at not in windows:
            windows[i.first_seen_at] = (
                all_statements(server_id=server_id, window=Window(i.first_seen_at - WEEK, i.first_seen_at))[0],
                all_statements(server_id=server_id, window=Window(i.first_seen_at, now))[0],
            )
        before, after = windows[i.first_seen_at]
        mean_before = {s.statement_id: s.exec_ms / s.calls for s in before if s.statement_id in ids and s.calls}
        since = {s.statement_id: s for s in after if s.statement_id in ids}
        effects = tuple(
            StatementEffect(
                statement_id=sid,
                query=(since[sid].query or "") if sid in since else "",
                mean_before_ms=mean_before.get(sid),
                mean_after_ms=since[sid].exec_ms / since[sid].calls if sid in since and since[sid].calls else None,
                calls_after=since[sid].calls if sid in since else 0,
            )
            for sid in sorted(ids)
        )
        found.append(MadeIndexFact(index=i, made_at=i.first_seen_at, statements=effects))
    return tuple(found)
