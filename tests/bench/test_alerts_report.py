"""The alert evaluation benchmark's report: its verdicts follow the figures measured (the whole fleet against half
of ALERTS_EVALUATE_S, the baselines faster and the same both ways), and its section of docs/benchmarks.md survives
a main report written after it."""

from __future__ import annotations

from datetime import UTC, datetime

from bench import alerts_report, report
from bench.alerts import FULL, AlertsRun, Timed
from bench.env import Machine

MACHINE = Machine(nproc=2, cpu_model="cpu", mem_gib=24, os="Debian", python="3.11")


def _run(*, steady_s: list[float], before_s: float = 4.0, now_s: float = 0.5, agree: bool = True) -> AlertsRun:
    return AlertsRun(
        size=FULL,
        servers=500,
        groups=10,
        group_size=50,
        evaluate_s=60,
        history_s=600.0,
        snapshots=1_152_000,
        first=Timed("first evaluation", [9.0], 6000),
        steady=Timed("evaluation", steady_s, 4850),
        group_s=[s / 10 for s in steady_s for _ in range(10)],
        rules=[Timed("server_down", [0.01], 0), Timed("regression", [5.0], 3000)],
        baselines_before=Timed("before", [before_s], 17_500),
        baselines_now=Timed("now", [now_s], 500),
        baseline_days=7,
        agree=agree,
        alerts_open=25,
        deliveries=25,
        seconds_total=900.0,
    )


def _verdicts(run: AlertsRun) -> list[bool | None]:
    return [ok for *_, ok in alerts_report.checks(run)]


def test_the_verdicts_follow_the_figures():
    assert _verdicts(_run(steady_s=[8.0, 9.0, 10.0])) == [True, None, True]
    assert _verdicts(_run(steady_s=[8.0, 9.0, 45.0])) == [False, None, True]  # a p95 above 30 s
    assert _verdicts(_run(steady_s=[8.0], before_s=0.4, now_s=0.5)) == [True, None, False]  # slower now
    assert _verdicts(_run(steady_s=[8.0], agree=False)) == [True, None, False]  # not the same baselines
    text = alerts_report.text(_run(steady_s=[8.0, 9.0, 10.0]))
    assert "8.0× faster; 500 / 17,500 queries" in text and "9.7 queries a server" in text


def test_the_section_is_kept_when_the_main_report_is_written(tmp_path):
    section = alerts_report.markdown_section(_run(steady_s=[8.0]), machine=MACHINE, code="c", command="x", date="d")
    assert section.startswith(report.ALERTS_START) and section.endswith(report.ALERTS_END)
    assert "| server_down | 0.01 | 0.01 | 0 |" in section
    path = tmp_path / "benchmarks.md"
    alerts_report.write_section(section, path)
    results = {"machine": MACHINE, "started_at": datetime(2026, 11, 27, tzinfo=UTC), "code": "c", "date": "d"}
    report.write_markdown({**results, "elapsed_s": 1.0}, path)
    text = path.read_text()
    assert report.marked_section(text, report.ALERTS_START, report.ALERTS_END) == section
    again = alerts_report.markdown_section(_run(steady_s=[50.0]), machine=MACHINE, code="c", command="x", date="d")
    alerts_report.write_section(again, path)
    assert path.read_text().count(report.ALERTS_START) == 1 and "**FAIL**" in path.read_text()


def test_the_test_suites_section_is_kept_too(tmp_path):
    path = tmp_path / "benchmarks.md"
    section = f"{report.TESTS_START}\n## Test suite\n\n| folder | seconds |\n{report.TESTS_END}"
    report.write_marked_section(section, report.TESTS_START, report.TESTS_END, path)
    results = {"machine": MACHINE, "started_at": datetime(2026, 11, 28, tzinfo=UTC), "code": "c", "date": "d"}
    report.write_markdown({**results, "elapsed_s": 1.0}, path)
    assert report.marked_section(path.read_text(), report.TESTS_START, report.TESTS_END) == section


def test_the_measurements_by_hand_are_kept_too(tmp_path):
    path = tmp_path / "benchmarks.md"
    section = (
        f"{report.BY_HAND_START}\n## The wait sampler at 1,000 servers\n\n| | before | after |\n{report.BY_HAND_END}"
    )
    report.write_marked_section(section, report.BY_HAND_START, report.BY_HAND_END, path)
    results = {"machine": MACHINE, "started_at": datetime(2026, 11, 28, tzinfo=UTC), "code": "c", "date": "d"}
    report.write_markdown({**results, "elapsed_s": 1.0}, path)
    assert report.marked_section(path.read_text(), report.BY_HAND_START, report.BY_HAND_END) == section
