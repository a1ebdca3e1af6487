"""A soak run's figures -> targets and verdict, its console summary and its section of docs/benchmarks.md.

Pure functions over what bench/soak.py recorded (times are seconds: epoch seconds for snapshots, seconds
since the start of the run for samples), so that the arithmetic is tested without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench import report
from bench.env import Machine
from bench.stats import median, pct

HOUR_S = 3600.0
#: A run this long is measured over its last hour; a shorter one over its second half.
FULL_RUN_S = 2 * HOUR_S
#: In a full run, the figures "after warm-up" are read here: every periodic task but the hourly partition
#: maintenance has run a few times by then.
WARMUP_S = 15 * 60.0
GROWTH_TARGET = 0.10
#: A gap between snapshots longer than this many intervals is a missed interval.
MISSED_FACTOR = 1.5
#: Start and end RSS of a window: the median of the samples in this share of the window at either end (a
#: single sample would make a passing allocation spike look like a leak).
EDGE_SHARE = 0.1
MB = report.MB  # history sizes in decimal MB, as the footprint benchmark gives them (RSS is in MiB, as ps shows it)
FIRST_ERRORS = 8


@dataclass
class Sample:
    """What the sampler read at one time (every 30 s, and at the start and the end)."""

    at_s: float
    rss_kb: dict[str, int]
    database_bytes: int
    history_bytes: int


@dataclass
class Error:
    source: str  # collection, advisor, log:worker, log:beat, log:gunicorn, client, process
    at_s: float
    text: str


@dataclass
class ServerLag:
    server: str
    snapshots: int
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    missed: int
    newest_age_max_s: float | None  # the oldest "newest snapshot" the sampler saw


@dataclass
class Window:
    warmup_end_s: float
    start_s: float
    end_s: float
    label: str


@dataclass
class ProcessGrowth:
    process: str
    warmup_end_kb: int | None
    window_start_kb: int | None
    end_kb: int | None
    growth: float | None  # over the window, as a fraction of its start
    since_warmup: float | None

    @property
    def passed(self) -> bool:
        return self.growth is not None and self.growth < GROWTH_TARGET


@dataclass
class SoakRun:
    """Everything a soak run recorded; the verdict and the report are computed from it."""

    started_at: datetime
    duration_s: float  # asked
    elapsed_s: float  # measured (shorter when interrupted)
    ended: str  # why it ended
    command: str
    code: str
    machine: Machine
    interval_s: int
    samples: list[Sample]
    lags: list[ServerLag]
    errors: list[Error]
    requests: int
    failed_requests: int
    request_ms: list[float] = field(default_factory=list)
    workloads: list[tuple[str, float, str, int]] = field(default_factory=list)  # name, rate, unit, errors
    interrupted: bool = False  # by a signal (Ctrl-C): not a whole run


@dataclass
class Verdict:
    window: Window
    growth: list[ProcessGrowth]
    memory_ok: bool
    errors_ok: bool
    missed_ok: bool

    @property
    def passed(self) -> bool:
        return self.memory_ok and self.errors_ok and self.missed_ok


def measure_window(elapsed_s: float) -> Window:
    """The last hour of a run of 2 hours or more (after a 15-minute warm-up); otherwise the second half,
    the first half being the warm-up."""
    if elapsed_s >= FULL_RUN_S:
        return Window(WARMUP_S, elapsed_s - HOUR_S, elapsed_s, "the last hour")
    half = elapsed_s / 2
    return Window(half, half, elapsed_s, "the second half (a run shorter than 2 hours: its first half is the warm-up)")


def _edge(series: list[tuple[float, int]], lo: float, hi: float) -> int | None:
    """Median of the values within [lo, hi]; else the value of the sample nearest to that span."""
    inside = [kb for t, kb in series if lo <= t <= hi]
    if inside:
        return int(median(inside))
    if not series:
        return None
    return min(series, key=lambda s: min(abs(s[0] - lo), abs(s[0] - hi)))[1]


def growth(process: str, series: list[tuple[float, int]], window: Window) -> ProcessGrowth:
    """RSS growth of one process over the window, from its (seconds since start, kB) samples."""
    edge = (window.end_s - window.start_s) * EDGE_SHARE
    warm = _edge(series, window.warmup_end_s, window.warmup_end_s + edge)
    start = _edge(series, window.start_s, window.start_s + edge)
    end = _edge(series, window.end_s - edge, window.end_s)

    def change(a: int | None, b: int | None) -> float | None:
        return (b - a) / a if a and b is not None else None

    return ProcessGrowth(process, warm, start, end, change(start, end), change(warm, end))


def gaps(times: list[float]) -> list[float]:
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def missed_intervals(times: list[float], interval_s: float, until: float | None = None) -> int:
    """Intervals without a snapshot: each gap longer than 1.5 intervals misses the intervals it spans
    (at least one); ``until`` (the end of the run) counts a collector that stopped before it."""
    spans = gaps(times)
    if until is not None and times:
        spans.append(until - max(times))
    return sum(max(1, round(g / interval_s) - 1) for g in spans if g > MISSED_FACTOR * interval_s)


def server_lag(
    server: str, times: list[float], interval_s: float, *, until: float, newest_ages: list[float]
) -> ServerLag:
    g = gaps(times)
    return ServerLag(
        server=server,
        snapshots=len(times),
        p50_s=median(g) if g else None,
        p95_s=pct(g, 95) if g else None,
        max_s=max(g) if g else None,
        missed=missed_intervals(times, interval_s, until=until) if times else 1,
        newest_age_max_s=max(newest_ages) if newest_ages else None,
    )


def rss_series(samples: list[Sample]) -> dict[str, list[tuple[float, int]]]:
    out: dict[str, list[tuple[float, int]]] = {}
    for s in samples:
        for name, kb in s.rss_kb.items():
            out.setdefault(name, []).append((s.at_s, kb))
    return out


def verdict(run: SoakRun) -> Verdict:
    window = measure_window(run.elapsed_s)
    grown = [growth(name, series, window) for name, series in rss_series(run.samples).items()]
    memory_ok = bool(grown) and all(g.passed for g in grown)
    missed_ok = bool(run.lags) and all(lag.missed == 0 and lag.snapshots for lag in run.lags)
    return Verdict(window, grown, memory_ok, errors_ok=not run.errors, missed_ok=missed_ok)


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def _mb(kb: int | None) -> str:
    return "–" if kb is None else f"{kb / 1024:.1f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def clock(seconds: float) -> str:
    """h:mm:ss since the start of the run (an error of the start-up, before it, is negative)."""
    h, rest = divmod(abs(int(round(seconds))), 3600)
    return f"{'-' if seconds <= -0.5 else ''}{h}:{rest // 60:02d}:{rest % 60:02d}"


def duration_text(seconds: float) -> str:
    if seconds >= HOUR_S and seconds % HOUR_S == 0:
        return f"{seconds / HOUR_S:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def checks(run: SoakRun, v: Verdict) -> list[tuple[str, str, str, bool]]:
    """(what, target, measured, passed) rows."""
    worst = max(v.growth, key=lambda g: g.growth if g.growth is not None else float("inf"), default=None)
    grew = f"at most {_pct(worst.growth)} ({worst.process})" if worst else "no samples"
    missed = sum(lag.missed for lag in run.lags)
    return [
        (
            f"RSS growth of every process over {v.window.label.split(' (')[0]}",
            f"< {GROWTH_TARGET:.0%}",
            grew,
            v.memory_ok,
        ),
        ("errors (collection, advisor, logs, client, processes)", "0", str(len(run.errors)), v.errors_ok),
        (f"missed {run.interval_s} s intervals (gap > {MISSED_FACTOR:g} intervals)", "0", str(missed), v.missed_ok),
    ]


def _history(run: SoakRun) -> list[str]:
    first, last = run.samples[0], run.samples[-1]
    hours = max(last.at_s - first.at_s, 1.0) / HOUR_S
    out = []
    for what, start, end in (
        ("database", first.database_bytes, last.database_bytes),
        ("history tables", first.history_bytes, last.history_bytes),
    ):
        out.append(f"{what} {start / MB:.1f} → {end / MB:.1f} MB ({(end - start) / MB / hours:.1f} MB/h)")
    return out


def _partial(run: SoakRun) -> str:
    return f" (interrupted after {clock(run.elapsed_s)}: not a whole run)" if run.interrupted else ""


def _workloads(run: SoakRun) -> str:
    return ", ".join(f"{n} {r:.0f} {u}/s" + (f" ({e} errors)" if e else "") for n, r, u, e in run.workloads)


def _requests(run: SoakRun) -> str:
    ms = run.request_ms
    timing = f", p50 {median(ms):.0f} ms, p95 {pct(ms, 95):.0f} ms, max {max(ms):.0f} ms" if ms else ""
    return f"{run.requests:,} requests, {run.failed_requests} failed{timing}"


def text(run: SoakRun) -> str:
    v = verdict(run)
    lines = [f"SOAK RESULTS ({duration_text(run.duration_s)} asked, ran {clock(run.elapsed_s)}, {run.ended})"]
    lines += [f"  [{'PASS' if ok else 'FAIL'}] {w}: {got} (target {t})" for w, t, got, ok in checks(run, v)]
    lines.append(f"  RSS MiB after warm-up / at the window's start / at the end, growth over {v.window.label}:")
    for g in v.growth:
        lines.append(
            f"    {g.process:<20} {_mb(g.warmup_end_kb):>7} {_mb(g.window_start_kb):>7} {_mb(g.end_kb):>7}"
            f"  {_pct(g.growth):>7}  {'ok' if g.passed else 'FAIL'}"
        )
    for lag in run.lags:
        lines.append(
            f"  {lag.server}: {lag.snapshots} snapshots, gaps p50 {_s(lag.p50_s)} s, p95 {_s(lag.p95_s)} s, "
            f"max {_s(lag.max_s)} s, {lag.missed} missed; newest snapshot at most "
            f"{_s(lag.newest_age_max_s)} s old"
        )
    if run.samples:
        lines += [f"  history: {part}" for part in _history(run)]
    lines.append(f"  client: {_requests(run)}")
    if run.workloads:
        lines.append(f"  workloads: {_workloads(run)}")
    lines.append(f"  errors: {len(run.errors)}")
    lines += [f"    [{e.source} at {clock(e.at_s)}] {e.text[:300]}" for e in run.errors[:FIRST_ERRORS]]
    lines.append(f"  verdict: {'PASS' if v.passed else 'FAIL'}{_partial(run)}")
    return "\n".join(lines)


def series_step_s(elapsed_s: float) -> float:
    """Every 10 minutes in a run of an hour or more; about 6 rows in a shorter one (30 s at least)."""
    if elapsed_s >= HOUR_S:
        return 600.0
    return max(30.0, round(elapsed_s / 6 / 30) * 30)


def rss_rows(samples: list[Sample], step_s: float) -> list[Sample]:
    """The sample at (or just before) every step, and the last one."""
    rows: list[Sample] = []
    mark = 0.0
    for s in samples:
        if s.at_s >= mark:
            rows.append(s)
            mark = (s.at_s // step_s + 1) * step_s
    if samples and rows[-1] is not samples[-1]:
        rows.append(samples[-1])
    return rows


def markdown_section(run: SoakRun) -> str:
    """The soak section of docs/benchmarks.md, between its markers."""
    v = verdict(run)
    m = run.machine
    table = report._table
    L = [
        report.SOAK_START,
        "## Soak",
        "",
        f"Date: {run.started_at:%Y-%m-%d} (started {run.started_at:%H:%M} UTC). Command: `{run.command}`, "
        f"{duration_text(run.duration_s)} asked, ran {clock(run.elapsed_s)} ({run.ended}). This section is written "
        f"by that command (a `make bench` keeps it). Code measured: {run.code}.",
        "",
        f"Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib:.0f} GiB, {m.os}; Python {m.python}.",
        "",
        "The demo's two monitored servers (PostgreSQL 16 with `pg_stat_statements.max = 100` under a "
        "deallocation storm and two-phase commits, PostgreSQL 18 with `track_planning` under a planning-heavy "
        f"join and a hot prepared statement) on private clusters, collected every {run.interval_s} s by "
        "processes run as docker-compose.yml runs them: `celery -A console worker --pool threads --concurrency 8`, "
        "`celery -A console beat`, `gunicorn console.wsgi --workers 2 --threads 4`, with `DEBUG=false` and the "
        "advisor every 60 s; the history store has production durability. A client logged in to the console "
        "reads the fleet, server, statement, planning and advisor pages and the API (servers, top statements, a "
        "statement series, fleet, recommendations) every few seconds. Resident memory (`VmRSS`) of every "
        "process is sampled every 30 s.",
        "",
    ]
    L += table(
        [[w, t, g, "**pass**" if ok else "**FAIL**"] for w, t, g, ok in checks(run, v)],
        ["figure", "target", "measured", ""],
    )
    L += ["", f"Verdict: **{'PASS' if v.passed else 'FAIL'}**{_partial(run)}.", "", "### Resident memory (MiB)", ""]
    w = v.window
    rows = [
        [
            g.process,
            _mb(g.warmup_end_kb),
            _mb(g.window_start_kb),
            _mb(g.end_kb),
            _pct(g.growth),
            _pct(g.since_warmup),
            "pass" if g.passed else "**FAIL**",
        ]
        for g in v.growth
    ]
    header = [
        f"after warm-up ({clock(w.warmup_end_s)})",
        f"window start ({clock(w.start_s)})",
        f"end ({clock(w.end_s)})",
        "growth over the window",
        "since warm-up",
        f"< {GROWTH_TARGET:.0%}",
    ]
    L += table(rows, ["process", *header])
    L += [
        "",
        f"Growth is measured over {w.label}; each edge is the median of the samples in the first or last "
        f"{EDGE_SHARE:.0%} of the window.",
    ]
    names = list(rss_series(run.samples))
    step = series_step_s(run.elapsed_s)
    L += ["", f"RSS every {duration_text(step)}:", ""]
    rows = [[clock(s.at_s)] + [_mb(s.rss_kb.get(n)) for n in names] for s in rss_rows(run.samples, step)]
    L += table(rows, ["time", *names])
    L += ["", "### Snapshots", ""]
    rows = [
        [
            lag.server,
            str(lag.snapshots),
            _s(lag.p50_s),
            _s(lag.p95_s),
            _s(lag.max_s),
            str(lag.missed),
            _s(lag.newest_age_max_s),
        ]
        for lag in run.lags
    ]
    L += table(rows, "server|snapshots|gap p50 s|gap p95 s|gap max s|missed intervals|newest's age, max s".split("|"))
    L += ["", "### Errors, history, client", ""]
    if run.samples:
        L += [f"- History: {part}." for part in _history(run)]
    L.append(f"- Client: {_requests(run)}.")
    if run.workloads:
        L.append(f"- Workloads: {_workloads(run)}.")
    L.append(f"- Errors: {len(run.errors)}" + ("." if not run.errors else ", the first ones:"))
    L += [f"  - `{e.source}` at {clock(e.at_s)}: {e.text[:300]}" for e in run.errors[:FIRST_ERRORS]]
    L.append(report.SOAK_END)
    return "\n".join(L)


def write_section(run: SoakRun, path: str | Path = report.DOC) -> Path:
    """Replace only the soak section of ``path`` (appended when it has none; a new file holds only it)."""
    return report.write_marked_section(markdown_section(run), report.SOAK_START, report.SOAK_END, path)
