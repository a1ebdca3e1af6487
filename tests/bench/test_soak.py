"""The soak's arithmetic and its section of docs/benchmarks.md, without running anything: the duration
parser, RSS growth and the verdict, missed intervals, and that each writer keeps the other's part."""

import argparse
from datetime import UTC, datetime

import pytest

from bench import report, soak, soak_report
from bench.env import Machine
from bench.soak_report import Error, Sample, SoakRun

HOUR = 3600.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("10m", 600), ("10min", 600), ("600", 600), ("90s", 90), ("1h30m", 5400), (" 1.5h ", 5400)],
)
def test_parse_duration(text, seconds):
    assert soak.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "h", "-10m", "10 m", "30s", "59"])
def test_parse_duration_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        soak.parse_duration(text)


def _run(*, elapsed_s: float, rss, errors=(), lags=None, asked_s: float | None = None) -> SoakRun:
    """A run sampled every 30 s; ``rss(t)`` gives each process's kB at t seconds."""
    times = [min(i * 30.0, elapsed_s) for i in range(int(elapsed_s // 30) + 2)]
    samples = [Sample(t, rss(t), 10_000_000 + int(t) * 1000, 1_000_000 + int(t) * 500) for t in sorted(set(times))]
    lag = soak_report.ServerLag("pg16", 100, 15.0, 17.0, 19.0, 0, 16.0)
    return SoakRun(
        started_at=datetime(2026, 11, 26, 8, 0, tzinfo=UTC),
        duration_s=asked_s or elapsed_s,
        elapsed_s=elapsed_s,
        ended="the duration elapsed",
        command=".venv/bin/python -m bench --soak 2h",
        code="commit abc",
        machine=Machine(nproc=2, cpu_model="cpu", mem_gib=24, os="Debian", python="3.11"),
        interval_s=15,
        samples=samples,
        lags=[lag] if lags is None else lags,
        errors=list(errors),
        requests=1000,
        failed_requests=0,
        request_ms=[50.0, 60.0, 70.0],
    )


def test_flat_memory_passes_over_the_last_hour():
    # A little noise around a flat line, after a warm-up in which memory doubles.
    run = _run(elapsed_s=2 * HOUR, rss=lambda t: {"worker": (100_000 if t < 600 else 200_000) + int(t) % 7 * 100})
    v = soak_report.verdict(run)
    assert v.window.label == "the last hour"
    assert (v.window.warmup_end_s, v.window.start_s, v.window.end_s) == (soak_report.WARMUP_S, HOUR, 2 * HOUR)
    [g] = v.growth
    assert abs(g.growth) < 0.01 and g.passed
    assert v.memory_ok and v.passed


def test_growing_memory_fails():
    # 100 -> 140 MB over 2 hours; over the last hour, from the median of its first 6 minutes (121 MB) to that
    # of its last 6 (139 MB): +14.9%.
    run = _run(elapsed_s=2 * HOUR, rss=lambda t: {"worker": 100_000, "beat": int(100_000 + 40_000 * t / (2 * HOUR))})
    v = soak_report.verdict(run)
    by_name = {g.process: g for g in v.growth}
    assert by_name["worker"].passed
    assert not by_name["beat"].passed
    assert by_name["beat"].growth == pytest.approx(18 / 121, abs=0.002)
    assert not v.memory_ok and not v.passed
    assert "FAIL" in soak_report.text(run)


def test_short_run_is_measured_over_its_second_half():
    # Grows during the first half (its warm-up), flat after.
    run = _run(elapsed_s=600, rss=lambda t: {"worker": int(100_000 + 500 * min(t, 300))})
    v = soak_report.verdict(run)
    assert (v.window.warmup_end_s, v.window.start_s, v.window.end_s) == (300, 300, 600)
    assert "second half" in v.window.label and "warm-up" in v.window.label
    [g] = v.growth
    assert g.growth == pytest.approx(0, abs=0.01) and g.passed


def test_errors_and_missed_intervals_fail_the_verdict():
    flat = {"worker": 100_000}
    assert soak_report.verdict(_run(elapsed_s=600, rss=lambda t: flat)).passed
    errors = [Error("client", 12.0, "/fleet/: HTTP 500")]
    v = soak_report.verdict(_run(elapsed_s=600, rss=lambda t: flat, errors=errors))
    assert not v.errors_ok and not v.passed
    missed = soak_report.ServerLag("pg16", 10, 15.0, 40.0, 45.0, 2, 20.0)
    v = soak_report.verdict(_run(elapsed_s=600, rss=lambda t: flat, lags=[missed]))
    assert not v.missed_ok and not v.passed
    interrupted = _run(elapsed_s=600, rss=lambda t: flat)
    interrupted.interrupted = True
    assert soak_report.text(interrupted).endswith("verdict: PASS (interrupted after 0:10:00: not a whole run)")


def test_missed_intervals():
    every_15 = [i * 15.0 for i in range(20)]
    assert soak_report.missed_intervals(every_15, 15) == 0
    # Beat ticks every 5 s: a collection comes up to a tick late, which is not a missed interval.
    assert soak_report.missed_intervals([0, 15, 35, 45, 67, 75], 15) == 0
    assert soak_report.missed_intervals([0, 15, 30, 60, 75], 15) == 1  # 30 s: one interval missed
    assert soak_report.missed_intervals([0, 15, 30, 75], 15) == 2  # 45 s: two
    assert soak_report.missed_intervals([0, 15, 38], 15) == 1  # 23 s: more than 1.5 intervals
    # A collector that stopped: the run went on for a minute after the last snapshot.
    assert soak_report.missed_intervals([0, 15, 30], 15, until=90) == 3
    assert soak_report.missed_intervals([0, 15, 30], 15, until=40) == 0


def test_server_lag():
    lag = soak_report.server_lag("pg16", [0, 15, 30, 60], 15, until=70, newest_ages=[3.0, 14.0, 9.0])
    assert (lag.snapshots, lag.p50_s, lag.max_s, lag.missed, lag.newest_age_max_s) == (4, 15.0, 30.0, 1, 14.0)
    none = soak_report.server_lag("pg18", [], 15, until=70, newest_ages=[])
    assert none.snapshots == 0 and none.missed and none.p50_s is None


def _results() -> dict:
    machine = Machine(nproc=2, cpu_model="cpu", mem_gib=24, os="Debian", python="3.11")
    return {
        "machine": machine,
        "started_at": datetime(2026, 11, 26, tzinfo=UTC),
        "code": "commit abc",
        "date": "2026-11-26",
        "elapsed_s": 60.0,
    }


SOAK = f"{report.SOAK_START}\n## Soak\n\nthe last 2-hour run\n{report.SOAK_END}"


def test_write_markdown_keeps_the_soak_section(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(f"# Benchmarks\n\nold figures\n\n{SOAK}\n\nan old note\n")
    report.write_markdown(_results(), path)
    text = path.read_text()
    assert "old figures" not in text and "an old note" not in text
    assert text.startswith(report.markdown(_results()).rstrip("\n"))
    assert text.count(SOAK) == 1
    # Without a soak section, the file is the report alone.
    report.write_markdown(_results(), other := tmp_path / "other.md")
    assert other.read_text() == report.markdown(_results())


def test_the_soak_writer_replaces_only_its_section(tmp_path):
    run = _run(elapsed_s=2 * HOUR, rss=lambda t: {"celery worker": 150_000, "gunicorn worker 1": 130_000})
    path = tmp_path / "benchmarks.md"
    before, after = "# Benchmarks\n\nthe bench figures\n\n", "\n\n## Methodology\n\nunchanged\n"
    path.write_text(before + SOAK + after)
    soak_report.write_section(run, path)
    text = path.read_text()
    assert text.startswith(before) and text.endswith(after)
    section = report.soak_section(text)
    assert "the last 2-hour run" not in section
    assert "`.venv/bin/python -m bench --soak 2h`" in section and "celery worker" in section
    assert "**PASS**" in section
    # Again: still one section; and a file without one gets it at the end, a missing file gets only it.
    soak_report.write_section(run, path)
    assert path.read_text().count(report.SOAK_START) == 1
    bare = tmp_path / "bare.md"
    bare.write_text("# Benchmarks\n\nfigures\n")
    soak_report.write_section(run, bare)
    assert bare.read_text().startswith("# Benchmarks\n\nfigures\n\n" + report.SOAK_START)
    soak_report.write_section(run, new := tmp_path / "new.md")
    assert report.soak_section(new.read_text()) == section


def test_clock():
    assert [soak_report.clock(s) for s in (0, 59.6, 3725, 7200, -12)] == [
        "0:00:00",
        "0:01:00",
        "1:02:05",
        "2:00:00",
        "-0:00:12",
    ]
