"""The plans benchmark's figures and report (bench/plans_report.py): a day's planning per hour and bytes per day
add up from its rounds, the verdicts follow the figures against the issue's targets, and the section lands in the
report with its method."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bench import plans_report, report
from bench.env import Machine
from bench.plans_report import Day, Explained, Locked, PlansRun, RoundCost

MACHINE = Machine(nproc=2, cpu_model="cpu", mem_gib=24, os="Debian", python="3.11")
SETTINGS = {"ENABLED": True, "TOP_N": 20, "INTERVAL_S": 21600, "STATEMENT_TIMEOUT_MS": 2000, "LOCK_TIMEOUT_MS": 100}


def _explained(sid: int, code: str = "planned", *, explain_ms: float | None = 10.0, bare_ms: float = 2.0, **kw):
    return Explained(sid, code, call_ms=70.0, explain_ms=explain_ms, bare_ms=bare_ms, bare_planning_ms=1.0, **kw)


def _round(hour: int, planning_ms: float, new_bytes: int, explained: list[Explained]) -> RoundCost:
    at = datetime(2026, 12, 1, hour, tzinfo=UTC)
    return RoundCost(at, len(explained), planning_ms, new_bytes, new_shapes=1 if new_bytes else 0, explained=explained)


def _day(planning_ms=(200.0, 190.0, 185.0, 195.0), new_bytes=(30_000, 0, 0, 0), disk: int = 170_000, **kw) -> Day:
    explained = [_explained(1), _explained(2, "permission", explain_ms=8.0), _explained(3, "syntax", own=True)]
    rounds = [_round(h, ms, b, explained) for h, ms, b in zip((1, 7, 13, 19), planning_ms, new_bytes, strict=True)]
    growth = {"collectors_plan_shape": disk - 40_000, "collectors_plan_attempt": 40_000}
    return Day("defaults", 1, rounds, growth, row_bytes={"collectors_plan_shape": 18_000}, shapes=2, **kw)


LOCKED = Locked(
    relation="plans_t02",
    lock_timeout_ms=100,
    call_ms=170.0,
    explain_ms=107.0,
    code="timeout",
    reason="planning took longer than its timeout, or waited for a lock",
    holder_kept=True,
    waiting_after=0,
    rows_before=3000,
    rows_after=3000,
    hold_s=1.0,
    bare_ms=1015.0,
)


def _run(defaults: Day | None = None, worst: Day | None = None, locked: Locked = LOCKED) -> PlansRun:
    return PlansRun(
        quick=False,
        tables=40,
        rows=3000,
        workload={"join": 40, "report": 10, "update": 10},
        plans_settings=SETTINGS,
        defaults=defaults or _day(),
        worst=worst or replace(_day(new_bytes=(40_000,) * 4, disk=350_000), label="worst case"),
        locked=locked,
        seconds=30.0,
    )


def test_a_days_figures_add_up_from_its_rounds():
    day = _day()
    assert day.explains == 12
    assert day.planning_s == pytest.approx(0.77)
    assert day.planning_s_per_hour == pytest.approx(0.77 / 24)
    assert day.worst_hour_s == pytest.approx(0.2)
    assert (day.budget_bytes, day.disk_bytes) == (30_000, 170_000)
    assert day.codes() == {"planned": 4, "permission": 4, "syntax": 4}
    assert day.own_codes() == {"syntax": 4}
    assert day.explain_ms(planned=True) == [10.0] * 4 and len(day.explain_ms()) == 12
    assert [e.statement_id for e in day.paired()] == [1] * 4  # planned, and EXPLAINed by hand too


def test_refusals_by_the_budget_are_counted_and_have_no_explain():
    refused = _explained(4, "budget", explain_ms=None)
    day = _day()
    day.rounds[3] = replace(day.rounds[3], explained=[*day.rounds[3].explained, refused])
    assert day.refused == 1
    assert len(day.explain_ms()) == 12  # the refused one never ran on the server


def test_the_verdicts_follow_the_figures():
    def verdicts(run: PlansRun) -> list[bool]:
        return [ok for *_, ok in plans_report.checks(run)]

    assert verdicts(_run()) == [True] * 5
    # One round over a second of planning in its hour fails, whatever the day's mean.
    assert verdicts(_run(defaults=_day(planning_ms=(1200.0, 0.0, 0.0, 0.0))))[0] is False
    assert verdicts(_run(defaults=_day(disk=1_000_001)))[2] is False
    assert verdicts(_run(worst=replace(_day(disk=1_200_000), label="worst case")))[3] is False
    assert verdicts(_run(locked=replace(LOCKED, explain_ms=151.0)))[4] is False
    assert verdicts(_run(locked=replace(LOCKED, rows_after=2999)))[4] is False
    assert verdicts(_run(locked=replace(LOCKED, holder_kept=False)))[4] is False
    assert verdicts(_run(locked=replace(LOCKED, code="planned")))[4] is False  # the lock was never waited for


def test_the_worst_case_says_whether_the_budget_stopped_it():
    worst = replace(_day(), label="worst case")
    worst.rounds[3] = replace(worst.rounds[3], explained=[_explained(9, "budget", explain_ms=None)])
    measured = plans_report.checks(_run(worst=worst))[3][2]
    assert "the budget (PLANS_BYTES_PER_DAY) refused 1 EXPLAINs" in measured
    assert "the budget not reached" in plans_report.checks(_run())[3][2]


def test_the_section_and_its_method_are_in_the_report():
    results = {
        "machine": MACHINE,
        "started_at": datetime(2026, 12, 1, tzinfo=UTC),
        "code": "c",
        "date": "d",
        "elapsed_s": 60.0,
        "plans": _run(),
    }
    text = report.markdown(results)
    assert "### 8. Plans of the top statements" in text
    assert "| defaults, 1 | 01:00 | 3 | planned 1, permission 1, syntax 1 | 200 | 10.0 / 10.0 | 1 | 30,000 |" in text
    assert "`PLANS_ENABLED` on, `PLANS_TOP_N` 20" in text
    assert "the console's own statements" in text and "syntax 8" in text  # both days' own statements
    assert text.index("- **Plans (8).**") < text.index("- **Statistics.**")
    assert text.count("| **pass** |") == 5
    assert "plans, locked table: gave up after 107 ms (timeout)" in report.text(results)


def test_the_plan_tabs_time_is_a_target_of_its_own():
    tab = plans_report.PlanTab(200, [40.0] * 19 + [310.0], [30.0] * 20, 250_000)
    rows = plans_report.checks(replace(_run(), tab=tab))
    assert len(rows) == 6 and rows[5][1] == "≤ 300 ms"
    assert rows[5][2].startswith("310.0 ms, median 40.0") and rows[5][3] is False  # the p95 of 20 is the slowest
    fast = plans_report.checks(replace(_run(), tab=replace(tab, ms=[40.0] * 20)))[5]
    assert fast[3] is True and "the statement page median 30.0 ms" in fast[2]
    assert "median 40.0 ms, p95 310.0 ms over 20 requests" in "\n".join(
        plans_report.markdown(replace(_run(), tab=tab), lambda rows, header: [])
    )
