"""Rule 3 (sample_rate) against constructed evidence: the setting missing (alternatives, never a failing ALTER), a
fork that has it, and back to 1.0."""

from __future__ import annotations

from advisor.evidence import Settings
from advisor.rules import r3_sample_rate
from tests.advisor.rules.evidence import TH, assert_sane, ev


def test_rule3_missing_guc_gives_alternatives_not_a_failing_setting() -> None:
    (r,) = r3_sample_rate.check(ev(spindelay_share=0.4, spindelay_on_hot_statements=True), TH)
    assert "does not exist" in r.explanation
    assert r.change is None  # track_planning already off: no server-side setting to give
    (r,) = r3_sample_rate.check(
        ev(spindelay_share=0.4, spindelay_on_hot_statements=True, settings=Settings(track_planning=True)), TH
    )
    assert r.change and "sample_rate" not in r.change.text and r.change.text.endswith("track_planning = off;")
    assert r3_sample_rate.check(ev(spindelay_share=0.01), TH) == []


def test_rule3_fork_with_contention() -> None:
    (r,) = r3_sample_rate.check(
        ev(settings=Settings(sample_rate=1.0), spindelay_share=0.1, spindelay_on_hot_statements=True), TH
    )
    assert r.change and r.change.text == "ALTER SYSTEM SET pg_stat_statements.sample_rate = 0.5;"
    (r,) = r3_sample_rate.check(
        ev(settings=Settings(sample_rate=1.0), spindelay_share=0.5, spindelay_on_hot_statements=True), TH
    )
    assert r.change and r.change.text.endswith("= 0.25;")
    assert "unrecorded" in r.cost
    assert_sane([r])


def test_rule3_back_to_one_without_contention_and_no_advice_at_one() -> None:
    (r,) = r3_sample_rate.check(ev(settings=Settings(sample_rate=0.5), spindelay_share=0.0), TH)
    assert r.change and r.change.text.endswith("sample_rate = 1;")
    assert r3_sample_rate.check(ev(settings=Settings(sample_rate=1.0), spindelay_share=0.0), TH) == []
