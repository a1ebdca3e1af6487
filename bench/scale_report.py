"""A fleet-scale run's figures -> targets and verdict, its console table and its section of docs/benchmarks.md.

Pure functions over what bench/scale.py recorded (snapshot times and window edges in epoch seconds, counters
as read at a window's edges), so that the lag arithmetic and the judging are tested without running anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path

from bench import report
from bench.env import Machine
from bench.stats import median, pct

TARGET_SERVERS = 1000
LAG_P95_TARGET_S = 10.0
CPU_TARGET_MS = 15.0
# The wait sampler keeps up when the snapshots carry at least this share of the looks it should take.
SAMPLER_LOOKS_SHARE = 0.9
SPEEDUP_TARGET = 1.7
# Plans on against off (issue 37: the plan reading never delays a collection): the one-worker p95 lag at the target
# level may grow by at most this much, the windows' own noise.
PLANS_LAG_MARGIN_S = 2.0
# /metrics scraped every 15 s against not (issue 39: the scrapes leave the collection lag unchanged): the same margin;
# and every scrape answered whole within Prometheus' default scrape_timeout (10 s), past which Prometheus would count
# it failed. A scrape's own cost, alone, is the /metrics benchmark's (bench/metrics.py, 500 ms of server time); here
# it shares two cores with 1,000 servers' collections, and its times are shown, not judged against that.
SCRAPE_LAG_MARGIN_S = PLANS_LAG_MARGIN_S
SCRAPE_TIMEOUT_S = 10.0
#: Below this share of the machine idle during the two-worker step, a speed-up short of the target is the
#: machine's limit ("where CPU allows"), not the product's.
CPU_BOUND_IDLE = 0.10
FIRST_ERRORS = 8
START = "<!-- scale:start -->"
END = "<!-- scale:end -->"

COLLECTION = "collection workers"
OTHER_WORKERS = "other workers"
SAMPLER = "wait sampler"
BEAT = "beat"
WEB = "console web"
HISTORY = "history store"
MONITORED = "monitored clusters"
BENCH = "benchmark process"
ROLES = (COLLECTION, OTHER_WORKERS, SAMPLER, BEAT, WEB, HISTORY, MONITORED, BENCH)


# --------------------------------------------------------------------------
# Lag: when a snapshot was taken against when it was due
# --------------------------------------------------------------------------


def slot(t: float, interval_s: float, phase_s: float) -> int:
    """The index of the due time a snapshot taken at ``t`` answers: the latest one at or before it
    (due time k is k * interval_s + phase_s seconds past the epoch)."""
    return math.floor((t - phase_s) / interval_s)


@dataclass
class Lateness:
    """Snapshot lag and missed intervals of a set of servers over one window."""

    lags_s: list[float] = field(default_factory=list)  # every snapshot taken in the window
    due: int = 0  # due times whose whole interval lies in the window
    missed: int = 0  # those of them no snapshot answered
    servers_missed: int = 0  # servers with at least one missed


def lateness(
    times: dict[int, list[float]], phases: dict[int, float | None], *, interval_s: float, start: float, end: float
) -> Lateness:
    """``times``: server -> its snapshots' taken_at; ``phases``: server -> seconds past every multiple of the
    interval at which it is due, or None where the product has no fixed phase (then the server's first
    snapshot in the window sets its due times). A due time counts when its interval [due, due + interval)
    lies within [start, end): a snapshot in it answers it, none is a missed interval."""
    out = Lateness()
    for server, taken in times.items():
        inside = sorted(t for t in taken if start <= t < end)
        phase = phases.get(server)
        if phase is None:
            phase = (inside[0] if inside else start) % interval_s
        answered = {slot(t, interval_s, phase) for t in inside}
        out.lags_s += [t - (slot(t, interval_s, phase) * interval_s + phase) for t in inside]
        first = math.ceil((start - phase) / interval_s)
        last = math.floor((end - phase) / interval_s) - 1
        missed = sum(1 for k in range(first, last + 1) if k not in answered)
        out.due += max(0, last - first + 1)
        out.missed += missed
        out.servers_missed += missed > 0
    return out


# --------------------------------------------------------------------------
# What a run recorded
# --------------------------------------------------------------------------


@dataclass
class Usage:
    """Cumulative counters at one moment, or (subtracted) over a window: CPU seconds by role (ROLES), the
    machine's CPU seconds (all cores) and idle ones from /proc/stat, the history store's WAL and rows, and
    the Redis instance's commands and bytes."""

    cpu_s: dict[str, float]
    machine_cpu_s: float
    idle_cpu_s: float
    wal_bytes: int
    rows_inserted: int
    rows_updated: int
    history_sessions: int  # sessions opened on its database (pg_stat_database.sessions)
    redis_commands: int
    redis_in_bytes: int
    redis_out_bytes: int

    def __sub__(self, other: Usage) -> Usage:
        cpu = {role: s - other.cpu_s.get(role, 0.0) for role, s in self.cpu_s.items()}
        values = {f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self) if f.name != "cpu_s"}
        return Usage(cpu_s=cpu, **values)


@dataclass
class Step:
    """One level of the fleet measured with a number of collection workers."""

    servers: int
    workers: int
    start: float
    end: float
    interval_s: int
    snapshots: int  # taken in the window
    entries_mean: float  # per snapshot
    changed_mean: float
    late: Lateness
    usage: Usage  # over the window
    rss_max_kb: dict[str, int]  # per worker process
    failures: int  # failed collections recorded in the window
    failing_servers: int  # servers whose last collection failed, at the window's end
    log_errors: list[str] = field(default_factory=list)
    interrupted: bool = False
    plans: bool = True  # compose's plans worker and beat's plans rounds on (off: PLANS_ENABLED=false, the baseline)
    again: bool = False  # the target level run once more right after the baseline, as warm as it
    # The web server up and asked for /metrics every 15 s by an operator (the window before is its baseline): the
    # answers' times in ms (those that came whole), the largest one's bytes, the failures.
    scraped: bool = False
    scrape_ms: list[float] = field(default_factory=list)
    scrape_bytes_max: int = 0
    scrape_errors: list[str] = field(default_factory=list)
    # The wait sampler's health: looks per interval the snapshots carried (ACTIVITY_SAMPLES when it keeps up), its
    # connections to Redis at the window's end, its warnings about Redis in the window (looks at risk), and the
    # servers it could not look at for a while (their connection failing). None: not measured.
    sampler_looks: float | None = None
    sampler_looks_expected: int | None = None
    sampler_redis_connections: int | None = None
    sampler_warnings: int | None = None
    sampler_server_failures: int | None = None

    @property
    def workers_label(self) -> str:
        label = str(self.workers) + ("" if self.plans else ", plans off") + (", plans on again" if self.again else "")
        return label + (", /metrics every 15 s" if self.scraped else "")

    @property
    def sampler_healthy(self) -> bool | None:
        if self.sampler_looks is None or self.sampler_looks_expected is None:
            return None
        return self.sampler_looks >= SAMPLER_LOOKS_SHARE * self.sampler_looks_expected and not self.sampler_warnings

    @property
    def window_s(self) -> float:
        return self.end - self.start

    @property
    def due_per_min(self) -> float:
        return self.servers * 60 / self.interval_s

    @property
    def per_min(self) -> float:
        return self.snapshots / self.window_s * 60 if self.window_s > 0 else 0.0

    @property
    def p50_s(self) -> float:
        return median(self.late.lags_s)

    @property
    def p95_s(self) -> float:
        return pct(self.late.lags_s, 95)

    @property
    def max_s(self) -> float:
        return max(self.late.lags_s, default=float("nan"))

    @property
    def kept_up(self) -> bool:
        """Every due time answered, p95 lag within the target, no failed collection."""
        return (
            not self.interrupted
            and self.late.due > 0
            and self.late.missed == 0
            and self.p95_s <= LAG_P95_TARGET_S
            and self.failures == 0
        )

    def ms_per_snapshot(self, role: str) -> float | None:
        s = self.usage.cpu_s.get(role)
        return None if s is None or not self.snapshots else s * 1000 / self.snapshots

    def share(self, role: str) -> float | None:
        """CPU of ``role`` as a share of the whole machine (all cores) over the window."""
        s = self.usage.cpu_s.get(role)
        return None if s is None or self.usage.machine_cpu_s <= 0 else s / self.usage.machine_cpu_s

    @property
    def idle_share(self) -> float:
        return self.usage.idle_cpu_s / self.usage.machine_cpu_s if self.usage.machine_cpu_s > 0 else float("nan")

    def per_snapshot(self, total: float) -> float:
        return total / self.snapshots if self.snapshots else float("nan")


@dataclass
class Fleet:
    clusters: int
    major: int
    ports: str
    statements: int  # distinct statements per cluster
    changing_per_min: int  # of them run each minute, in rotation
    interval_s: int
    phases: str  # how due times were known


@dataclass
class ScaleRun:
    started_at: datetime
    elapsed_s: float
    ended: str  # why it ended
    command: str
    code: str
    machine: Machine
    fleet: Fleet
    levels: tuple[int, ...]
    window_s: float  # asked per step
    steps: list[Step]
    commands: dict[str, str]  # process -> command line, as started
    interrupted: bool = False


# --------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------


def _at_target(run: ScaleRun) -> tuple[Step | None, str]:
    """The one-worker step at TARGET_SERVERS; otherwise the largest one-worker step, with why it is not judged."""
    one = [s for s in run.steps if s.workers == 1 and s.plans and not s.again and not s.scraped and not s.interrupted]
    for s in one:
        if s.servers == TARGET_SERVERS:
            return s, ""
    if not one:
        return None, "not run"
    largest = max(one, key=lambda s: s.servers)
    return largest, f" (at {largest.servers:,} servers: {TARGET_SERVERS:,} was not run, not judged)"


def speedup(run: ScaleRun) -> tuple[str, bool | None]:
    """Two collection workers against one, at the largest level both ran: (measured, passed)."""
    steps = {(s.servers, s.workers): s for s in run.steps if s.plans and not s.scraped and not s.interrupted}
    common = sorted(n for n, w in steps if w == 1 and (n, 2) in steps)
    if not common:
        return "not run", None
    n = common[-1]
    one, two = steps[(n, 1)], steps[(n, 2)]
    ratio = two.per_min / one.per_min if one.per_min else float("nan")
    got = f"{ratio:.2f}× at {n:,} servers ({one.per_min:,.0f} → {two.per_min:,.0f} snapshots/min)"
    if one.kept_up:
        return f"{got}: one worker kept up there, nothing to split (not judged)", None
    if ratio >= SPEEDUP_TARGET:
        return got, True
    if two.idle_share < CPU_BOUND_IDLE:
        return f"{got}, machine {two.idle_share:.0%} idle: CPU did not allow (not judged)", None
    return f"{got}, machine {two.idle_share:.0%} idle", False


def plans_effect(run: ScaleRun) -> tuple[str, bool | None]:
    """The one-worker p95 lag at the target level with plans on against plans off, the two run back to back once
    the curves are done (both as warm: the curve's first windows carry the servers' first snapshots, and ran with
    a p95 several seconds above either): (measured, passed); None where either was not run."""
    off = [s for s in run.steps if not s.plans and s.workers == 1 and not s.interrupted]
    again = [s for s in run.steps if s.again and s.workers == 1 and not s.interrupted]
    if not off or not again or off[0].servers != again[0].servers:
        return "not run", None
    base, on = off[0], again[0]
    got = (
        f"p95 {_s(on.p95_s)} s on, {_s(base.p95_s)} s off; machine {_pct(on.idle_share)} idle on, "
        f"{_pct(base.idle_share)} off"
    )
    return got, on.p95_s <= base.p95_s + PLANS_LAG_MARGIN_S


def scrape_effect(run: ScaleRun) -> tuple[str, bool | None]:
    """The one-worker p95 lag at the target level with /metrics scraped every 15 s against the warm window run
    right before it without (`again`: the same level and workers, back to back; never a curve's first, cold
    window), and the scrapes' own times: (measured, passed); None where not run."""
    for i, on in enumerate(run.steps):
        if not on.scraped or on.interrupted or i == 0:
            continue
        base = run.steps[i - 1]
        if not base.again or base.interrupted or (base.servers, base.workers, base.plans) != (on.servers, 1, True):
            continue
        times = sorted(on.scrape_ms)
        answered = (
            f"{len(times)} scrapes answered in p50 {median(times):.0f} ms, max {times[-1]:.0f} ms, "
            f"{on.scrape_bytes_max / 1e6:.2f} MB"
            if times
            else "no scrape answered"
        )
        failed = f", {len(on.scrape_errors)} failed ({on.scrape_errors[0][:120]})" if on.scrape_errors else ""
        got = (
            f"p95 {_s(on.p95_s)} s scraped, {_s(base.p95_s)} s not; {on.late.missed:,} missed; {answered}{failed}; "
            f"web {_pct(on.share(WEB))} of the machine; machine {_pct(on.idle_share)} idle scraped, "
            f"{_pct(base.idle_share)} not"
        )
        ok = (
            on.p95_s <= base.p95_s + SCRAPE_LAG_MARGIN_S
            and on.late.missed <= base.late.missed
            and bool(times)
            and not on.scrape_errors
            and times[-1] <= SCRAPE_TIMEOUT_S * 1000
        )
        return got, ok
    return "not run", None


def checks(run: ScaleRun) -> list[tuple[str, str, str, bool | None]]:
    """(what, target, measured, passed) rows; passed is None where the run could not judge."""
    step, why = _at_target(run)
    fleet = f"{TARGET_SERVERS:,} servers every {run.fleet.interval_s} s, one worker"
    lag, missed, cpu = (
        f"{fleet}: p95 lag (snapshot taken − due)",
        f"{fleet}: missed intervals",
        "collector CPU per snapshot",
    )
    if step is None:
        rows = [(lag, "not run", None), (missed, "not run", None), (cpu, "not run", None)]
    else:
        ms = step.ms_per_snapshot(COLLECTION)
        late = step.late
        rows = [
            (
                lag,
                f"{_s(step.p95_s)} s (p50 {_s(step.p50_s)}, max {_s(step.max_s)})" + why,
                step.p95_s <= LAG_P95_TARGET_S,
            ),
            (
                missed,
                f"{late.missed:,} of {late.due:,} due ({late.servers_missed:,} servers)" + why,
                late.missed == 0 and late.due > 0,
            ),
            (
                f"{cpu} ({step.entries_mean:,.0f} entries, {step.changed_mean:,.0f} changed on average)",
                ("–" if ms is None else f"{ms:.1f} ms") + why,
                ms is not None and ms <= CPU_TARGET_MS,
            ),
        ]
        if why:  # measured at another level: shown, not judged
            rows = [(what, got, None) for what, got, _ in rows]
    targets = (f"≤ {LAG_P95_TARGET_S:g} s", "0", f"≤ {CPU_TARGET_MS:g} ms")
    out = [(what, target, got, ok) for (what, got, ok), target in zip(rows, targets, strict=True)]
    sampling = (
        f"{fleet}: wait sampler's looks per interval, warnings about Redis",
        f"≥ {SAMPLER_LOOKS_SHARE:.0%} of ACTIVITY_SAMPLES, 0",
    )
    if step is None or step.sampler_looks is None:
        out.append((*sampling, "not run", None))
    else:
        got = (
            f"{step.sampler_looks:.1f} of {step.sampler_looks_expected} looks, {step.sampler_warnings} warnings, "
            f"{step.sampler_redis_connections} Redis connections, {step.sampler_server_failures} servers failing" + why
        )
        out.append((*sampling, got, None if why else step.sampler_healthy))
    got, ok = speedup(run)
    speed = ("two collection workers / one: snapshots per minute", f"≥ {SPEEDUP_TARGET:g}× where CPU allows")
    out.append((*speed, got, ok))
    got, ok = plans_effect(run)
    plans = (f"{fleet}: lag with the plans worker's rounds on, against off", f"p95 ≤ off's + {PLANS_LAG_MARGIN_S:g} s")
    out.append((*plans, got, ok))
    got, ok = scrape_effect(run)
    scraped = (
        f"{fleet}: lag with /metrics scraped every 15 s (an operator's whole scrape), against not",
        f"p95 ≤ not's + {SCRAPE_LAG_MARGIN_S:g} s, no more missed, every scrape whole within {SCRAPE_TIMEOUT_S:g} s",
    )
    out.append((*scraped, got, ok))
    return out


def verdict(run: ScaleRun) -> str:
    results = [ok for *_, ok in checks(run)]
    if any(ok is False for ok in results):
        return "FAIL"
    return "PASS" if all(ok is True for ok in results[:3]) and not run.interrupted else "INCOMPLETE"


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def _s(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.1f}"


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.0%}"


def _mark(ok: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[ok]


CURVE_HEADER = [
    "servers",
    "workers",
    "due/min",
    "taken/min",
    "lag p50 / p95 / max s",
    "missed (servers)",
    "failed (servers failing at the end)",
    "collector CPU ms/snapshot",
    "history CPU ms/snapshot",
    "history sessions/snapshot",
    "WAL KB/snapshot",
    "rows/snapshot",
    "Redis commands/snapshot",
    "Redis KB in / out per snapshot",
    "worker RSS max MiB",
    "wait sampler: looks/interval (of), Redis connections, Redis warnings, servers failing",
    "kept up",
]


def curve_row(s: Step) -> list[str]:
    u = s.usage
    rss = ", ".join(f"{name} {kb / 1024:.0f}" for name, kb in s.rss_max_kb.items()) or "–"
    return [
        f"{s.servers:,}",
        s.workers_label,
        f"{s.due_per_min:,.0f}",
        f"{s.per_min:,.0f}",
        f"{_s(s.p50_s)} / {_s(s.p95_s)} / {_s(s.max_s)}",
        f"{s.late.missed:,} ({s.late.servers_missed:,})",
        f"{s.failures:,} ({s.failing_servers:,})",
        _s(s.ms_per_snapshot(COLLECTION)),
        _s(s.ms_per_snapshot(HISTORY)),
        f"{s.per_snapshot(u.history_sessions):.2f}",
        _s(s.per_snapshot(u.wal_bytes) / 1024),
        _s(s.per_snapshot(u.rows_inserted + u.rows_updated)),
        _s(s.per_snapshot(u.redis_commands)),
        f"{_s(s.per_snapshot(u.redis_in_bytes) / 1024)} / {_s(s.per_snapshot(u.redis_out_bytes) / 1024)}",
        rss,
        _sampler(s),
        ("yes" if s.kept_up else "no") + (" (interrupted)" if s.interrupted else ""),
    ]


def _sampler(s: Step) -> str:
    if s.sampler_looks is None:
        return "–"
    return (
        f"{s.sampler_looks:.1f} ({s.sampler_looks_expected}), {s.sampler_redis_connections}, {s.sampler_warnings}, "
        f"{s.sampler_server_failures}"
    )


TIME_HEADER = ["servers", "workers", *ROLES, "other", "idle"]


def time_row(s: Step) -> list[str]:
    """CPU shares of the whole machine; "other" is what /proc/stat saw busy beyond the processes above."""
    shares = [s.share(role) for role in ROLES]
    busy = 1 - s.idle_share
    other = max(0.0, busy - sum(x for x in shares if x is not None))
    return [f"{s.servers:,}", s.workers_label, *(_pct(x) for x in shares), _pct(other), _pct(s.idle_share)]


def _errors(run: ScaleRun) -> list[str]:
    return [f"n={s.servers} w={s.workers_label}: {line}" for s in run.steps for line in s.log_errors]


def text(run: ScaleRun) -> str:
    lines = [
        f"FLEET SCALE (levels {', '.join(map(str, run.levels))}, {run.window_s / 60:g} min windows, every "
        f"{run.fleet.interval_s} s; {run.ended}; {run.elapsed_s / 60:.1f} min)"
    ]
    lines += [f"  [{_mark(ok)}] {w}: {got} (target {t})" for w, t, got, ok in checks(run)]
    rows = [curve_row(s) for s in run.steps]
    lines += ["  " + line for line in _columns(rows, CURVE_HEADER)]
    lines.append("  where the time goes (share of the machine's CPU):")
    lines += ["  " + line for line in _columns([time_row(s) for s in run.steps], TIME_HEADER)]
    errors = _errors(run)
    lines.append(f"  error lines in the processes' logs: {len(errors)}")
    lines += [f"    {e[:300]}" for e in errors[:FIRST_ERRORS]]
    lines.append(f"  verdict: {verdict(run)}")
    return "\n".join(lines)


def summary(s: Step) -> str:
    """One line on a step, printed as it ends."""
    return (
        f"{s.per_min:,.0f} snapshots/min of {s.due_per_min:,.0f} due, lag p95 {_s(s.p95_s)} s, {s.late.missed:,} "
        f"missed, {s.failures:,} failed, collector {_s(s.ms_per_snapshot(COLLECTION))} ms/snapshot, machine "
        f"{_pct(s.idle_share)} idle"
    )


def _columns(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows]]


def markdown_section(run: ScaleRun) -> str:
    """The fleet-scale section of docs/benchmarks.md, between its markers."""
    m, f, table = run.machine, run.fleet, report._table
    one = run.commands
    L = [
        START,
        "## Fleet scale",
        "",
        f"Date: {run.started_at:%Y-%m-%d} (started {run.started_at:%H:%M} UTC). Command: `{run.command}`, "
        f"{run.elapsed_s / 60:.0f} min ({run.ended}). This section is written by that command (and by a "
        f"whole `make bench`). Code measured: {run.code}.",
        "",
        f"Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib:.0f} GiB, {m.os}; Python {m.python}. The "
        "monitored clusters, the history store, Redis and the product's processes all share it.",
        "",
        f"Fleet: {f.clusters} PostgreSQL {f.major} clusters (ports {f.ports}, `pg_stat_statements.max = 5000`), "
        f"each holding {f.statements:,} distinct statements (`SELECT count(*) FROM scale.tNNNN WHERE id = $1`, "
        f"one small table each); {f.changing_per_min} of them run every minute, in rotation, so a snapshot of "
        f"a cluster finds about {f.changing_per_min / f.statements:.0%} of its entries changed. The servers "
        f"are registered round-robin over the clusters (one DSN per cluster, distinct names), every "
        f"{f.interval_s} s; each level enables more of them. Due times: {f.phases}.",
        "",
        "Processes as docker-compose.yml starts them (its `command:`s, the venv's celery, beat's schedule in a "
        "temporary file, a node name each), `DEBUG=false`, product defaults otherwise (wait sampling on: "
        "`COLLECTOR_ACTIVITY_SAMPLES` unset, beat's plans rounds every minute: `PLANS_TICK_S=60`, against 15 "
        "minutes by default, so that every window holds some); the two-worker rows start the collection worker "
        'twice, as two hosts would; then the one-worker target level runs twice more, back to back and as warm: "1, '
        'plans off" with `PLANS_ENABLED=false`, and "1, plans on again", the two the plans worker\'s rounds are '
        'judged by; and once more, "1, /metrics every 15 s", with compose\'s web server (gunicorn on 127.0.0.1:57181) '
        "and a thread of this process asking it for `/metrics` every 15 s with an operator's token (every server "
        "and the console's health, OpenMetrics, as Prometheus asks), judged against the window before it:",
        "",
        *[f"- {name}: `{argv}`" for name, argv in one.items()],
        "",
        f"Per level: warm-up until every newly enabled server has 2 snapshots (at most 2 intervals), then "
        f"{run.window_s / 60:g} min measured. Lag = a snapshot's `taken_at` (the monitored server's clock, same "
        "machine) minus the due time it answers (the latest one at or before it); a due time whose whole interval "
        "lies in the window and has no snapshot is a missed interval. CPU: utime + stime of each process and its "
        "children (/proc), per snapshot taken in the window; history store and monitored clusters: postmaster "
        "and every backend. WAL: `pg_current_wal_lsn()` difference on the history store; rows: "
        "`tup_inserted + tup_updated` of its database; sessions: `sessions` of its database (connections opened). "
        "Redis: INFO stats of the whole instance on 6379 (database 13 is the run's, but other databases' traffic "
        "counts too). RSS: the largest of the samples "
        "taken every 5 s, per worker (a prefork worker: its processes summed, shared pages counted in each).",
        "",
        "The collection workers also run the dispatcher (`dispatch_due_collections`, every 5 s) and Celery's own "
        "upkeep: at a few servers those fixed costs dominate their CPU per snapshot"
        + (
            "; the advisor, rollups and partitions run on the other worker."
            if any(OTHER_WORKERS in s.usage.cpu_s for s in run.steps)
            else ", and so do the advisor, rollups and partitions (one worker for everything)."
        )
        + " The dispatcher sends each server due before its next tick with a countdown to its due time: the lag is"
        " the wait for a free worker thread and the read itself, not the tick.",
        "",
    ]
    L += table([[w, t, got, f"**{_mark(ok)}**"] for w, t, got, ok in checks(run)], ["figure", "target", "measured", ""])
    L += ["", f"Verdict: **{verdict(run)}**.", "", "### The curve", ""]
    L += table([curve_row(s) for s in run.steps], CURVE_HEADER)
    L += ["", "### Where the time goes (share of the machine's CPU over each window)", ""]
    L += table([time_row(s) for s in run.steps], TIME_HEADER)
    L += [
        "",
        "Every monitored server here shares its cluster with a third of the fleet: each snapshot's 10 "
        "`pg_stat_activity` samples list that cluster's hundreds of monitoring connections, which a real "
        "server would not have, so the monitored clusters' share is larger than a fleet of real servers would "
        'show on their own hosts. "other" is the rest of the machine (the kernel, other jobs).',
        "",
    ]
    errors = _errors(run)
    L.append(f"Error lines in the processes' logs: {len(errors)}" + ("." if not errors else ", the first ones:"))
    L += [f"- `{e[:300]}`" for e in errors[:FIRST_ERRORS]]
    L.append(END)
    return "\n".join(L)


def section(text: str) -> str:
    """The fleet-scale section of a benchmarks file, markers included; '' when it has none."""
    return report.marked_section(text, START, END)


def with_section(text: str, new: str) -> str:
    """``text`` with its fleet-scale section replaced by ``new`` (appended at the end when it has none)."""
    return report.with_marked_section(text, START, END, new)


def write_section(run: ScaleRun | str, path: str | Path = report.DOC) -> Path:
    """Replace only the fleet-scale section of ``path`` (a run's, or a section kept from before)."""
    return report.write_marked_section(run if isinstance(run, str) else markdown_section(run), START, END, path)
