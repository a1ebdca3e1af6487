"""The fleet-scale benchmark's arithmetic and judging, without running anything: lag against due times and
missed intervals from synthetic snapshot times, the targets' verdicts, and its section of docs/benchmarks.md."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bench import report, scale, scale_report
from bench.env import Machine
from bench.scale_report import COLLECTION, HISTORY, WEB, Fleet, Lateness, ScaleRun, Step, Usage, lateness

INTERVAL = 60.0
T0 = 1_800_000_000.0  # a multiple of 60: due times are T0 + k * 60 + phase


def test_lag_is_taken_minus_the_due_time_it_answers():
    # Phase 10 s: due at T0+10, T0+70, T0+130, ...; each snapshot a little late.
    times = {1: [T0 + 10 + 2.0, T0 + 70 + 3.5, T0 + 130 + 0.5]}
    late = lateness(times, {1: 10.0}, interval_s=INTERVAL, start=T0, end=T0 + 190)
    assert late.lags_s == pytest.approx([2.0, 3.5, 0.5])
    assert (late.due, late.missed, late.servers_missed) == (3, 0, 0)


def test_a_due_time_counts_only_when_its_whole_interval_is_in_the_window():
    # Due at T0+10 (interval ends T0+70, inside) and T0+70 (ends T0+130, after the window's end): one counts.
    late = lateness({1: [T0 + 11]}, {1: 10.0}, interval_s=INTERVAL, start=T0, end=T0 + 100)
    assert (late.due, late.missed) == (1, 0)
    # A due time before the window's start does not count, even when its snapshot falls in the window.
    late = lateness({1: [T0 + 5]}, {1: 50.0}, interval_s=INTERVAL, start=T0, end=T0 + 100)
    assert late.lags_s == pytest.approx([15.0])  # answers T0 - 10
    assert (late.due, late.missed) == (0, 0)  # T0+50 would end at T0+110


def test_a_skipped_interval_is_missed_and_a_very_late_snapshot_answers_the_next_due_time():
    # Due at T0+10, +70, +130, +190: the one due at +70 is taken at +135, after the next due time.
    times = {1: [T0 + 12, T0 + 135, T0 + 191]}
    late = lateness(times, {1: 10.0}, interval_s=INTERVAL, start=T0, end=T0 + 250)
    assert late.lags_s == pytest.approx([2.0, 5.0, 1.0])
    assert (late.due, late.missed, late.servers_missed) == (4, 1, 1)


def test_snapshots_outside_the_window_are_left_out():
    times = {1: [T0 - 50, T0 + 12, T0 + 72, T0 + 132]}
    late = lateness(times, {1: 10.0}, interval_s=INTERVAL, start=T0, end=T0 + 130)
    assert late.lags_s == pytest.approx([2.0, 2.0])
    assert (late.due, late.missed) == (2, 0)


def test_a_server_without_snapshots_misses_every_due_time():
    times = {1: [T0 + 12, T0 + 72, T0 + 132], 2: []}
    late = lateness(times, {1: 10.0, 2: 40.0}, interval_s=INTERVAL, start=T0, end=T0 + 200)
    # Server 1: due +10, +70, +130 (+190 ends after 200); server 2: due +40, +100 (+160 ends at 220).
    assert (late.due, late.missed, late.servers_missed) == (5, 2, 1)


def test_without_fixed_phases_the_first_snapshot_in_the_window_sets_the_due_times():
    # Due at the first snapshot (T0+7) and every 60 s from there: +67 taken at +69.5, +127 missed.
    times = {1: [T0 + 7, T0 + 69.5, T0 + 190]}
    late = lateness(times, {1: None}, interval_s=INTERVAL, start=T0, end=T0 + 200)
    assert late.lags_s == pytest.approx([0.0, 2.5, 3.0])
    assert (late.due, late.missed) == (3, 1)  # +7, +67, +127 (+187 ends after 200)


def test_usage_over_a_window_is_the_difference_of_two_readings():
    a = _usage(cpu={COLLECTION: 10.0, HISTORY: 5.0}, machine=1000.0, idle=400.0, wal=1_000, redis=50)
    b = _usage(cpu={COLLECTION: 13.0, HISTORY: 5.5}, machine=1240.0, idle=520.0, wal=6_000, redis=250)
    d = b - a
    assert d.cpu_s == pytest.approx({COLLECTION: 3.0, HISTORY: 0.5})
    assert (d.machine_cpu_s, d.idle_cpu_s, d.wal_bytes, d.redis_commands) == (240.0, 120.0, 5_000, 200)


def test_step_rates_and_costs_per_snapshot():
    s = _step(servers=100, snapshots=500, window_s=300.0, cpu={COLLECTION: 6.0, HISTORY: 1.5}, machine=600.0)
    assert (s.due_per_min, s.per_min) == (100.0, 100.0)
    assert s.ms_per_snapshot(COLLECTION) == pytest.approx(12.0)
    assert s.ms_per_snapshot("beat") is None
    assert s.share(COLLECTION) == pytest.approx(0.01)
    assert s.kept_up


@pytest.mark.parametrize(
    ("change", "kept_up"),
    [
        ({}, True),
        ({"late": Lateness([1.0] * 10, 10, 1, 1)}, False),  # a missed interval
        ({"late": Lateness([1.0] * 19 + [30.0], 20, 0, 0)}, True),  # p95 1 + 0.05 * 29 = 2.45 s (interpolated)
        ({"late": Lateness([1.0] * 9 + [30.0], 10, 0, 0)}, False),  # p95 1 + 0.55 * 29 = 16.95 s
        ({"failures": 1}, False),
        ({"interrupted": True}, False),
    ],
)
def test_a_level_keeps_up_with_every_due_time_answered_soon_enough(change, kept_up):
    assert replace(_step(), **change).kept_up is kept_up


def test_the_targets_are_judged_at_a_thousand_servers_with_one_worker():
    run = _run(
        [
            _step(servers=500, workers=1),
            _step(servers=1000, workers=1, cpu={COLLECTION: 3000 * 0.012}, snapshots=3000),
            _step(servers=1000, workers=2),
        ]
    )
    rows = scale_report.checks(run)
    # The sampler not measured; nothing to split; no plans-off baseline run; no scraped window.
    assert [ok for *_, ok in rows] == [True, True, True, None, None, None, None]
    assert "12.0 ms" in rows[2][2]
    assert scale_report.verdict(run) == "PASS"


def test_a_thousand_servers_with_missed_intervals_fail():
    slow = _step(servers=1000, workers=1, late=Lateness([4.0] * 90 + [50.0] * 10, 1000, 120, 80))
    rows = scale_report.checks(_run([slow]))
    assert [ok for *_, ok in rows[:2]] == [False, False]
    assert "120 of 1,000 due (80 servers)" in rows[1][2]
    assert scale_report.verdict(_run([slow])) == "FAIL"


def test_a_wait_sampler_that_falls_behind_or_warns_fails_the_run():
    """Defect 4 of issue 35: the sampler's looks lost to Redis at 1,000 servers went unseen by the benchmark."""
    healthy = replace(
        _step(servers=1000, workers=1, cpu={COLLECTION: 3000 * 0.012}, snapshots=3000),
        sampler_looks=9.8,
        sampler_looks_expected=10,
        sampler_redis_connections=2,
        sampler_warnings=0,
        sampler_server_failures=3,
    )
    rows = scale_report.checks(_run([healthy]))
    assert rows[3][3] is True and "9.8 of 10 looks, 0 warnings, 2 Redis connections, 3 servers failing" in rows[3][2]
    assert scale_report.verdict(_run([healthy])) == "PASS"
    assert "9.8 (10), 2, 0, 3" in scale_report.text(_run([healthy]))
    for behind in (
        replace(healthy, sampler_looks=6.1),
        replace(healthy, sampler_warnings=1072),
    ):
        assert scale_report.checks(_run([behind]))[3][3] is False
        assert scale_report.verdict(_run([behind])) == "FAIL"


def test_a_quick_run_is_shown_but_not_judged():
    run = _run([_step(servers=20), _step(servers=50)])
    rows = scale_report.checks(run)
    assert [ok for *_, ok in rows] == [None] * 7
    assert "at 50 servers: 1,000 was not run" in rows[0][2]
    assert scale_report.verdict(run) == "INCOMPLETE"


def test_speedup_of_two_workers_where_one_could_not_keep_up():
    saturated = Lateness([40.0] * 100, 1000, 500, 500)
    one = _step(servers=1000, workers=1, snapshots=2500, late=saturated)  # 500/min of 1,000 due
    for snapshots, idle, expected in [(4500, 0.30, True), (3500, 0.30, False), (3500, 0.02, None)]:
        two = _step(servers=1000, workers=2, snapshots=snapshots, machine=600.0, idle=600.0 * idle)
        got, ok = scale_report.speedup(_run([one, two]))
        assert ok is expected, got
    assert got.startswith("1.40× at 1,000 servers (500 → 700 snapshots/min)")
    assert "CPU did not allow" in got


def test_the_plans_rounds_are_judged_by_the_target_level_with_plans_off_then_on_again():
    """Issue 37: the plan reading never delays a collection. Once the curves are done, the one-worker target level
    runs with PLANS_ENABLED=false, then with plans on again, back to back and as warm: the second's p95 lag may
    exceed the first's by the windows' noise (2 s), no more. The curve's own (cold) step stays the one judged for
    the lag target, and neither of the two is."""
    cold = _step(servers=1000, late=Lateness([6.7] * 5000, 4000, 0, 0))
    off = replace(_step(servers=1000, late=Lateness([1.8] * 5000, 4000, 0, 0), idle=180.0), plans=False)
    for p95, expected in [(1.5, True), (3.7, True), (4.2, False)]:
        again = replace(_step(servers=1000, late=Lateness([p95] * 5000, 4000, 0, 0)), again=True)
        run = _run([cold, off, again])
        got, ok = scale_report.plans_effect(run)
        assert ok is expected, got
        assert scale_report.checks(run)[0][2].startswith("6.7 s")  # the curve's step is the target's
    assert got == "p95 4.2 s on, 1.8 s off; machine 50% idle on, 30% off"
    assert scale_report.plans_effect(_run([cold, off]))[0] == "not run"
    table = scale_report.markdown_section(_run([cold, off, again]))
    assert "| 1,000 | 1, plans off |" in table and "| 1,000 | 1, plans on again |" in table


def test_the_scrapes_are_judged_by_the_window_run_right_before_without():
    """Issue 39: a scrape of /metrics every 15 s leaves the collection lag unchanged. The scraped window is judged
    against the warm one-worker window just before it (the plans' "on again"): p95 within the noise (2 s), no
    more intervals missed, every scrape answered whole within Prometheus' default scrape_timeout (10 s). Neither is
    judged for the lag target."""
    cold = _step(servers=1000, late=Lateness([6.7] * 5000, 4000, 0, 0))
    base = replace(_step(servers=1000, late=Lateness([1.8] * 5000, 4000, 0, 0)), again=True)

    def scraped(p95: float, *, missed: int = 0, ms=(120.0, 180.0, 240.0), errors=()) -> Step:
        step = _step(servers=1000, late=Lateness([p95] * 5000, 4000, missed, missed), cpu={COLLECTION: 3.0, WEB: 6.0})
        return replace(step, scraped=True, scrape_ms=list(ms), scrape_bytes_max=1_700_000, scrape_errors=list(errors))

    for step, expected in [
        (scraped(2.5), True),
        (scraped(3.9), False),  # the lag grew past the noise
        (scraped(2.0, missed=3), False),  # intervals missed that the window before did not
        (scraped(2.0, ms=(120.0, 640.0)), True),  # slower than alone (bench/metrics.py's figure), shown, not judged
        (scraped(2.0, ms=(120.0, 10_500.0)), False),  # past Prometheus' default scrape_timeout: a failed scrape
        (scraped(2.0, errors=["TimeoutError: timed out"]), False),  # a scrape that did not come whole
        (scraped(2.0, ms=()), False),  # nothing answered: nothing shown
    ]:
        got, ok = scale_report.scrape_effect(_run([cold, base, step]))
        assert ok is expected, got
    got, ok = scale_report.scrape_effect(_run([cold, base, scraped(2.5)]))
    assert got.startswith("p95 2.5 s scraped, 1.8 s not; 0 missed; 3 scrapes answered in p50 180 ms, max 240 ms")
    assert "1.70 MB" in got and "web 1% of the machine" in got
    assert scale_report.scrape_effect(_run([cold, scraped(2.5)]))[0] == "not run"  # a cold window is no baseline
    assert scale_report.scrape_effect(_run([cold, base]))[0] == "not run"
    run = _run([cold, base, scraped(2.5)])
    assert scale_report.checks(run)[0][2].startswith("6.7 s")  # the curve's own step stays the one judged
    assert scale_report.checks(run)[-1][0].endswith(
        "lag with /metrics scraped every 15 s (an operator's whole scrape), against not"
    )
    table = scale_report.markdown_section(run)
    assert "| 1,000 | 1, plans on again, /metrics every 15 s |" not in table
    assert "| 1,000 | 1, /metrics every 15 s |" in table and "console web" in table


def test_the_web_server_joins_compose_processes_bound_to_the_bench_port(tmp_path):
    schedule = tmp_path / "celerybeat-schedule"
    plain = scale.compose_processes(1, schedule)
    assert WEB not in {p.role for p in plain}
    (web,) = [p for p in scale.compose_processes(1, schedule, web_port=57181) if p.role == WEB]
    assert web.name == "web" and web.argv[0].endswith("/gunicorn") and web.argv[1] == "console.wsgi"
    assert web.argv[web.argv.index("--bind") + 1] == "127.0.0.1:57181" and "0.0.0.0:8000" not in web.argv


def test_text_and_markdown_render_every_step():
    run = _run([_step(servers=20, workers=1), _step(servers=20, workers=2, log_errors=["worker1: ERROR boom"])])
    text = scale_report.text(run)
    assert "FLEET SCALE" in text and "ERROR boom" in text
    section = scale_report.markdown_section(run)
    assert section.startswith(scale_report.START) and section.endswith(scale_report.END)
    assert section.count("\n| 20 | ") == 4  # the curve and where the time goes, one row per step each


def test_the_section_replaces_only_its_own_part(tmp_path):
    path = tmp_path / "benchmarks.md"
    soak = f"{report.SOAK_START}\n## Soak\n{report.SOAK_END}"
    path.write_text(f"# Benchmarks\n\nmain\n\n{soak}\n\n## After\n")
    first = scale_report.markdown_section(_run([_step(servers=20)]))
    scale_report.write_section(first, path)
    assert scale_report.section(path.read_text()) == first
    second = scale_report.markdown_section(_run([_step(servers=50)]))
    scale_report.write_section(second, path)
    text = path.read_text()
    assert scale_report.section(text) == second and first not in text
    assert text.startswith("# Benchmarks\n\nmain\n") and report.soak_section(text) == soak and "## After" in text


# --------------------------------------------------------------------------
# A synthetic world
# --------------------------------------------------------------------------


def _usage(*, cpu=None, machine=600.0, idle=300.0, wal=10_000_000, redis=30_000) -> Usage:
    return Usage(
        cpu_s=dict(cpu or {COLLECTION: 3.0}),
        machine_cpu_s=machine,
        idle_cpu_s=idle,
        wal_bytes=wal,
        rows_inserted=100_000,
        rows_updated=500,
        history_sessions=40,
        redis_commands=redis,
        redis_in_bytes=redis * 100,
        redis_out_bytes=redis * 50,
    )


def _step(
    *,
    servers=100,
    workers=1,
    snapshots=None,
    window_s=300.0,
    cpu=None,
    machine=600.0,
    idle=300.0,
    late=None,
    log_errors=(),
) -> Step:
    snapshots = servers * 5 if snapshots is None else snapshots
    return Step(
        servers=servers,
        workers=workers,
        start=T0,
        end=T0 + window_s,
        interval_s=60,
        snapshots=snapshots,
        entries_mean=1020.0,
        changed_mean=104.0,
        late=late or Lateness([2.0] * snapshots, servers * 4, 0, 0),
        usage=_usage(cpu=cpu, machine=machine, idle=idle),
        rss_max_kb={f"worker{i + 1}": 150_000 for i in range(workers)},
        failures=0,
        failing_servers=0,
        log_errors=list(log_errors),
    )


def _run(steps: list[Step]) -> ScaleRun:
    return ScaleRun(
        started_at=datetime(2026, 11, 26, 19, 0, tzinfo=UTC),
        elapsed_s=3600.0,
        ended="every level measured",
        command=".venv/bin/python -m bench --only scale",
        code="commit abc",
        machine=Machine(nproc=2, cpu_model="cpu", mem_gib=24, os="Debian", python="3.11"),
        fleet=Fleet(3, 17, "57140–57142", 1000, 100, 60, "fixed phases"),
        levels=tuple(sorted({s.servers for s in steps})),
        window_s=300.0,
        steps=steps,
        commands={"worker1": "celery -A console worker --queues collection", "beat": "celery -A console beat"},
    )
