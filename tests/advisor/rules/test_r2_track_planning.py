"""Rule 2 (track_planning) against constructed evidence: on or off, far from or near the spinlock cliff, and an
unknown CPU count said so."""

from __future__ import annotations

from advisor.evidence import Settings
from advisor.rules import r2_track_planning
from tests.advisor.rules.evidence import TH, assert_sane, ev


def test_rule2_off_far_from_cliff_recommends_on() -> None:
    e = ev(cpu_count=192, hottest_calls_per_s=10_000)
    (r,) = r2_track_planning.check(e, TH)
    assert r.change and r.change.text.endswith("track_planning = on;")
    assert "×40.0" in r.explanation and "×20.0" in r.explanation  # 400k/10k and 200k/10k
    assert_sane([r])


def test_rule2_off_near_cliff_keeps_off() -> None:
    (r,) = r2_track_planning.check(ev(cpu_count=192, hottest_calls_per_s=60_000), TH)  # 200k/60k = ×3.3 < 4
    assert r.change is None and "Keep track_planning off" in r.title


def test_rule2_unknown_cpu_says_so() -> None:
    (r,) = r2_track_planning.check(ev(hottest_calls_per_s=60_000), TH)
    assert "unknown" in r.explanation and r.severity == "info"
    (r,) = r2_track_planning.check(ev(hottest_calls_per_s=60_000, sees_all_statements=False), TH)
    assert "partial" in r.explanation


def test_rule2_on_near_cliff_recommends_off_and_on_far_nothing() -> None:
    (r,) = r2_track_planning.check(
        ev(cpu_count=192, hottest_calls_per_s=150_000, settings=Settings(track_planning=True)), TH
    )
    assert r.change and r.change.text.endswith("track_planning = off;")
    assert (
        r2_track_planning.check(
            ev(cpu_count=192, hottest_calls_per_s=50_000, settings=Settings(track_planning=True)), TH
        )
        == []
    )
