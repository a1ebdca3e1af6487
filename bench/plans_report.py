"""The plans benchmark's figures (bench/plans.py) and its part of the report: target rows, console lines, its
section of docs/benchmarks.md and its method. No database here: the figures are plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from bench.stats import median

MB = 1_000_000
# The targets at the defaults, per monitored server.
PLANNING_S_PER_HOUR = 1.0
BYTES_PER_DAY = 1_000_000
# What an EXPLAIN given up at its lock timeout may take beyond it: its own round trips around the wait (the
# search path's lookup, BEGIN, the settings, the rollback) on a fresh backend of a shared machine.
LOCK_MARGIN_MS = 50.0


@dataclass(frozen=True)
class Explained:
    """One statement of a round: the console's EXPLAIN, and the same text by hand beside it."""

    statement_id: int
    code: str  # the console's outcome: planned, permission, budget, ...
    call_ms: float  # statement_plan end to end: budget, two connections, the text read, the EXPLAIN, the store
    explain_ms: float | None  # the EXPLAIN as the budget measures it (None: the budget refused it first)
    bare_ms: float | None = None  # by hand over a kept connection (None: not EXPLAINed by hand)
    bare_planning_ms: float | None = None  # the server's own "Planning Time" of that EXPLAIN (None: refused)
    cold_ms: float | None = None  # by hand as the first statement of a new connection
    cold_connect_ms: float | None = None  # opening that connection (SCRAM)
    own: bool = False  # one of the console's own statements (history.own: its mark and its role)


@dataclass(frozen=True)
class RoundCost:
    """One round as the budget recorded it (collectors_plan_spend), and its EXPLAINs."""

    hour: datetime  # the hour of the day the round stands for
    explains: int
    planning_ms: float
    new_bytes: int  # new shapes, as the budget counts them (their JSON text)
    new_shapes: int
    explained: list[Explained]


@dataclass
class Day:
    """Four rounds of one server, and what the day left in the history's plan tables."""

    label: str
    server_id: int
    rounds: list[RoundCost]
    relation_growth: dict[str, int]  # table -> pg_total_relation_size after the day minus before
    row_bytes: dict[str, int]  # table -> pg_column_size of the server's rows after the day
    shapes: int
    breakdown: list[tuple[str, float]] = field(default_factory=list)  # (step, mean ms per statement_plan call)

    @property
    def explains(self) -> int:
        return sum(r.explains for r in self.rounds)

    @property
    def planning_s(self) -> float:
        return sum(r.planning_ms for r in self.rounds) / 1000

    @property
    def planning_s_per_hour(self) -> float:
        """The day's planning spread over its 24 hours."""
        return self.planning_s / 24

    @property
    def worst_hour_s(self) -> float:
        """The most planning in one hour: each round falls in an hour of its own."""
        return max((r.planning_ms for r in self.rounds), default=0.0) / 1000

    @property
    def budget_bytes(self) -> int:
        return sum(r.new_bytes for r in self.rounds)

    @property
    def disk_bytes(self) -> int:
        return sum(self.relation_growth.values())

    @property
    def explained(self) -> list[Explained]:
        return [e for r in self.rounds for e in r.explained]

    @property
    def refused(self) -> int:
        """EXPLAINs the budget refused (each round stops at its first)."""
        return sum(1 for e in self.explained if e.code == "budget")

    def codes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.explained:
            out[e.code] = out.get(e.code, 0) + 1
        return out

    def own_codes(self) -> dict[str, int]:
        """What the console's own statements, ranked among the top ones, got."""
        out: dict[str, int] = {}
        for e in self.explained:
            if e.own:
                out[e.code] = out.get(e.code, 0) + 1
        return out

    def explain_ms(self, *, planned: bool | None = None) -> list[float]:
        """Each EXPLAIN the server ran, as the budget measures it; only those that gave a plan (or did not)."""
        return [
            e.explain_ms
            for e in self.explained
            if e.explain_ms is not None and (planned is None or (e.code == "planned") == planned)
        ]

    def paired(self) -> list[Explained]:
        """The planned statements also EXPLAINed by hand: the comparison with the baseline."""
        return [e for e in self.explained if e.code == "planned" and e.explain_ms is not None and e.bare_ms]


@dataclass(frozen=True)
class Locked:
    """One EXPLAIN of a statement whose table another session holds under ACCESS EXCLUSIVE."""

    relation: str
    lock_timeout_ms: int
    call_ms: float  # statement_plan end to end
    explain_ms: float  # the EXPLAIN, lock wait included
    code: str  # what the console stored for the statement
    reason: str
    holder_kept: bool  # the holder's backend, transaction and lock the same after the EXPLAIN
    waiting_after: int  # backends still waiting for the table's lock once statement_plan returned
    rows_before: int
    rows_after: int
    hold_s: float
    bare_ms: float  # a DBA's EXPLAIN by hand (no lock_timeout) under the same lock, released after hold_s

    def passed(self, margin_ms: float = LOCK_MARGIN_MS) -> bool:
        return (
            self.code == "timeout"
            and self.explain_ms <= self.lock_timeout_ms + margin_ms
            and self.holder_kept
            and self.waiting_after == 0
            and self.rows_before == self.rows_after
        )


@dataclass
class PlanTab:
    """The statement's Plan tab for a plan of `nodes` nodes, server-side (Django's test client, DEBUG off), beside
    the statement page of the same statement in the same run."""

    nodes: int
    ms: list[float]
    statement_page_ms: list[float]
    bytes: int


PLAN_TAB_TARGET_MS = 300.0


@dataclass
class PlansRun:
    quick: bool
    tables: int
    rows: int
    workload: dict[str, int]  # kind -> distinct statements of the application
    plans_settings: dict  # settings.PLANS as the run had them
    defaults: Day
    worst: Day
    locked: Locked
    seconds: float
    tab: PlanTab | None = None


def _ms(xs: list[float]) -> str:
    return f"{median(xs):.1f}" if xs else "–"


def _p95(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def _max(xs: list[float]) -> str:
    return f"{max(xs):.1f}" if xs else "–"


def _setting(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _stored(day: Day) -> str:
    return f"{day.disk_bytes / MB:.3f} MB on disk (budget's count {day.budget_bytes / MB:.3f} MB, {day.shapes} shapes)"


def _budget_verdict(day: Day) -> str:
    if day.refused:
        return f"the budget (PLANS_BYTES_PER_DAY) refused {day.refused} EXPLAINs"
    return "every plan stored, the budget not reached"


def checks(run: PlansRun) -> list[tuple[str, str, str, bool]]:
    """(figure, target, measured, passed) rows."""
    d, w, lk = run.defaults, run.worst, run.locked
    timeout = run.plans_settings["STATEMENT_TIMEOUT_MS"]
    longest = max(d.explain_ms(), default=0.0)
    return [
        (
            f"plans at the defaults: planning on the monitored server, worst hour of a day of {len(d.rounds)} rounds "
            "(measured from the console, round trips included; mean per server-hour beside)",
            f"≤ {PLANNING_S_PER_HOUR:g} s per hour",
            f"{d.worst_hour_s:.3f} s (mean {d.planning_s_per_hour:.4f} s; {d.explains} EXPLAINs a day)",
            d.worst_hour_s <= PLANNING_S_PER_HOUR,
        ),
        (
            "plans at the defaults: longest EXPLAIN on the monitored server",
            f"≤ {timeout:,} ms (PLANS_STATEMENT_TIMEOUT_MS)",
            f"{longest:.1f} ms (median {_ms(d.explain_ms())})",
            longest <= timeout,
        ),
        (
            "plans stored per server-day at the defaults (shapes stored once): growth of the plan tables",
            f"≤ {BYTES_PER_DAY / MB:g} MB",
            _stored(d),
            d.disk_bytes <= BYTES_PER_DAY,
        ),
        (
            "plans stored per server-day, worst case (a new shape for every planned statement in every round)",
            f"≤ {BYTES_PER_DAY / MB:g} MB",
            f"{_stored(w)}; {_budget_verdict(w)}",
            w.disk_bytes <= BYTES_PER_DAY,
        ),
        (
            "an EXPLAIN of a statement whose table another session holds under ACCESS EXCLUSIVE",
            f"≤ {lk.lock_timeout_ms} + {LOCK_MARGIN_MS:g} ms (PLANS_LOCK_TIMEOUT_MS), the holder untouched",
            f"{lk.explain_ms:.0f} ms ({lk.code}); holder {'kept its lock' if lk.holder_kept else '**disturbed**'}, "
            f"rows {lk.rows_before:,} → {lk.rows_after:,}",
            lk.passed(),
        ),
    ] + (
        [
            (
                f"the Plan tab of a statement with a plan of {run.tab.nodes} nodes, server-side (p95 of "
                f"{len(run.tab.ms)}; the statement page beside)",
                f"≤ {PLAN_TAB_TARGET_MS:g} ms",
                f"{_p95(run.tab.ms):.1f} ms, median {_ms(run.tab.ms)} ({run.tab.bytes:,} bytes; the statement page "
                f"median {_ms(run.tab.statement_page_ms)} ms)",
                _p95(run.tab.ms) <= PLAN_TAB_TARGET_MS,
            )
        ]
        if run.tab
        else []
    )


def summary_lines(run: PlansRun) -> list[str]:
    d, w, lk = run.defaults, run.worst, run.locked
    paired = d.paired()
    lines = [
        f"  plans, a day at the defaults: {d.explains} EXPLAINs, {d.planning_s:.2f} s of planning "
        f"(worst hour {d.worst_hour_s:.3f} s, mean {d.planning_s_per_hour:.4f} s per hour); "
        f"codes {', '.join(f'{k} {n}' for k, n in d.codes().items())}",
        f"    per EXPLAIN (planned): console median {_ms([e.explain_ms for e in paired])} ms, by hand "
        f"{_ms([e.bare_ms for e in paired])} ms; statement_plan end to end {_ms([e.call_ms for e in paired])} ms",
        f"    stored: {_stored(d)}",
        f"  plans, worst case for storage: {_stored(w)}; {_budget_verdict(w)}",
        f"  plans, locked table: gave up after {lk.explain_ms:.0f} ms ({lk.code}), by hand waited {lk.bare_ms:.0f} ms",
    ]
    return lines


def _round_rows(day: Day) -> list[list[str]]:
    rows = []
    for i, r in enumerate(day.rounds, 1):
        codes: dict[str, int] = {}
        for e in r.explained:
            codes[e.code] = codes.get(e.code, 0) + 1
        explain = [e.explain_ms for e in r.explained if e.explain_ms is not None]
        rows.append(
            [
                f"{day.label}, {i}",
                f"{r.hour:%H:%M}",
                str(r.explains),
                ", ".join(f"{k} {n}" for k, n in sorted(codes.items(), key=lambda kv: -kv[1])),
                f"{r.planning_ms:.0f}",
                f"{_ms(explain)} / {_max(explain)}",
                str(r.new_shapes),
                f"{r.new_bytes:,}",
            ]
        )
    return rows


def markdown(run: PlansRun, table) -> list[str]:
    d, w, lk, cfg = run.defaults, run.worst, run.locked, run.plans_settings
    kinds = ", ".join(f"{n} {k}" for k, n in run.workload.items())
    L = [
        "",
        "### 8. Plans of the top statements (real PostgreSQL 17, the defaults)",
        "",
        f"An application on the monitored server: {run.tables} tables of {run.rows:,} rows (primary key and two "
        f"indexes each, analyzed), {sum(run.workload.values())} distinct statements run as its own role with bind "
        f"parameters ({kinds}) between the two collections of a server registered through the product. The "
        "monitoring role has `pg_monitor` and `pg_read_all_data`, no write privilege (docs/monitoring-role.md): "
        "planning the DML is refused (`permission`). Settings: "
        + ", ".join(f"`PLANS_{k}` {_setting(v)}" for k, v in cfg.items())
        + ".",
        "",
        "Each row is one round of `plan_top_statements` (its top statements by total time, each at most once per "
        "interval), at the hour of the day it stands for: planning ms is what the budget recorded "
        "(`collectors_plan_spend`, measured from the console around each EXPLAIN), EXPLAIN ms each one's "
        "median / max, new bytes the new shapes as the budget counts them.",
        "",
    ]
    L += table(
        _round_rows(d) + _round_rows(w),
        ["day, round", "as at (UTC)", "EXPLAINs", "outcomes", "planning ms", "EXPLAIN ms", "new shapes", "new bytes"],
    )
    own = {**d.own_codes()}
    for code, n in w.own_codes().items():
        own[code] = own.get(code, 0) + n
    if own:
        L += [
            "",
            "Among them, EXPLAINs of the console's own statements (run as its monitoring role, their texts ending "
            "with its `/* pgconsole … */` mark), "
            "ranked with the application's: "
            + ", ".join(f"{code} {n}" for code, n in own.items())
            + ". They should not be there: a round ranks the top statements as the pages do, the console's own "
            "left out (collectors/plans/auto.py).",
        ]
    paired = d.paired()
    refused = [e for e in d.explained if e.code != "planned" and e.explain_ms is not None]
    L += [
        "",
        f"A day at the defaults: {d.explains} EXPLAINs, {d.planning_s:.2f} s of planning measured from the console "
        f"(worst hour {d.worst_hour_s:.3f} s, {d.planning_s_per_hour:.4f} s per server-hour over the day); the "
        f"server's own planning time of the same statements by hand (`SUMMARY`) was median "
        f"{_ms([e.bare_planning_ms for e in paired if e.bare_planning_ms is not None])} ms.",
        "",
        f"Per EXPLAIN, the {len(paired)} planned statements of the day's rounds, each also EXPLAINed by hand in the "
        "same round (before it in rounds 1 and 3, after it in 2 and 4):",
        "",
    ]
    ratios = [e.explain_ms / e.bare_ms for e in paired]
    L += table(
        [
            [
                "by hand: `EXPLAIN (GENERIC_PLAN, FORMAT JSON, SUMMARY)` on a kept connection of the same role",
                _ms([e.bare_ms for e in paired]),
                _max([e.bare_ms for e in paired]),
            ],
            [
                "by hand, as the first statement of a new connection (opening it not counted)",
                _ms([e.cold_ms for e in paired if e.cold_ms is not None]),
                _max([e.cold_ms for e in paired if e.cold_ms is not None]),
            ],
            [
                "opening that connection (SCRAM), for scale",
                _ms([e.cold_connect_ms for e in paired if e.cold_connect_ms is not None]),
                _max([e.cold_connect_ms for e in paired if e.cold_connect_ms is not None]),
            ],
            [
                "the console's EXPLAIN, as the budget measures it (new connection: search path lookup, read-only "
                "transaction, settings, EXPLAIN, commit)",
                _ms([e.explain_ms for e in paired]),
                _max([e.explain_ms for e in paired]),
            ],
            [
                "the console's `statement_plan` end to end (budget, two new connections, the text read, the "
                "EXPLAIN, the store)",
                _ms([e.call_ms for e in paired]),
                _max([e.call_ms for e in paired]),
            ],
            [
                f"the console's EXPLAIN of the {len(refused)} statements refused (DML: `permission`; others)",
                _ms([e.explain_ms for e in refused]),
                _max([e.explain_ms for e in refused]),
            ],
        ],
        ["per EXPLAIN", "median ms", "max ms"],
    )
    L += [
        "",
        f"The console's EXPLAIN / by hand on a kept connection, paired per statement: median {median(ratios):.1f}×."
        if ratios
        else "",
    ]
    if d.breakdown:
        total = d.breakdown[-1][1]
        L += ["", "Where a `statement_plan` call's time goes (mean of the day's calls, wrapped):", ""]
        L += table(
            [[step, f"{ms:.1f}", f"{ms / total:.0%}" if total else "–"] for step, ms in d.breakdown],
            ["step", "ms / call", "share"],
        )
    L += ["", "Plans stored in the day (the plan tables emptied before it; only this server writes them):", ""]
    L += table(
        [
            [
                day.label,
                f"{day.budget_bytes:,}",
                f"{sum(day.row_bytes.values()):,}",
                f"{day.disk_bytes:,}",
                ", ".join(f"{t.removeprefix('collectors_')} {b:,}" for t, b in day.relation_growth.items()),
                _budget_verdict(day),
            ]
            for day in (d, w)
        ],
        ["day", "budget's count (bytes)", "rows (bytes)", "on disk (bytes)", "on disk per table", "budget"],
    )
    L += [
        "",
        f"Locked table: while another session held `{lk.relation}` under ACCESS EXCLUSIVE, the console's EXPLAIN of "
        f"a statement reading it gave up after {lk.explain_ms:.0f} ms (`statement_plan` {lk.call_ms:.0f} ms end to "
        f"end; `PLANS_LOCK_TIMEOUT_MS` {lk.lock_timeout_ms}) and stored `{lk.code}`: {lk.reason}. The holder kept "
        f"its backend, transaction and lock: {'yes' if lk.holder_kept else '**no**'}; backends left waiting for "
        f"the table: {lk.waiting_after}; its rows {lk.rows_before:,} before, {lk.rows_after:,} after. Baseline: a "
        f"DBA's EXPLAIN by hand (no `lock_timeout`) under the same lock waited {lk.bare_ms:.0f} ms, until the "
        f"holder ended {lk.hold_s:g} s later.",
    ]
    if run.tab:
        t = run.tab
        L += [
            "",
            f"The Plan tab (`/statements/{{id}}/plan/`) of a statement whose current plan has {t.nodes} nodes (an "
            f"Append of {t.nodes - 1} filtered scans), server-side through Django's test client with DEBUG off: "
            f"median {_ms(t.ms)} ms, p95 {_p95(t.ms):.1f} ms over {len(t.ms)} requests, {t.bytes:,} bytes; the same "
            f"statement's page in the same run: median {_ms(t.statement_page_ms)} ms.",
        ]
    return L


METHOD = """- **Plans (8).** `bench/plans.py`, on the monitored cluster: the application of `bench/plans_workload.py`
  runs between a registered server's baseline collection and its second one (`pg_stat_statements_reset()`
  first), so the read tier ranks exactly its statements. A day is four rounds of
  `collectors.plans.auto.plan_top_statements`, as `PLANS_INTERVAL_S` (6 h) gives them: between rounds the
  server's `collectors_plan_attempt` times are moved back by the interval, and each round's
  `collectors_plan_spend` row is moved to the hour of the same UTC day the round stands for, so that each
  round has its own hour's budget and the day's bytes add up; nothing else changes. The worst case is a second
  server whose top statements are the application's SELECTs only, with every index of the tables renamed
  between rounds (`ALTER INDEX ... RENAME`): the same plans naming other indexes, so each round stores a new
  shape for each statement it plans. Baseline by hand in the same rounds: the same texts (read from
  `pg_stat_statements`) with `EXPLAIN (GENERIC_PLAN, FORMAT JSON, SUMMARY)` as the monitoring role, on a
  kept connection and on a new one, no read-only transaction and no search path set. Per-EXPLAIN times are
  wall times in this process around `collectors.plans.explain.explain` (the span the budget records) and
  `statement_plan`; the breakdown wraps the functions `statement_plan` calls. Stored bytes: the budget's
  count (the JSON text of each new shape), `pg_column_size` of the server's rows, and the growth of
  `pg_total_relation_size` of the five plan tables (heap, TOAST, indexes, dead row versions not yet
  vacuumed), emptied before each day. Locked table: a session takes ACCESS EXCLUSIVE on a table one of the
  day's planned statements reads, `statement_plan` runs, then an EXPLAIN by hand waits for the same lock
  until the holder rolls back."""
