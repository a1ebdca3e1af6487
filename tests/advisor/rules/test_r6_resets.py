"""Rule 6 (statistics resets) against constructed evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from advisor.rules import r6_resets
from tests.advisor.rules.evidence import TH, ev

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_rule6_resets() -> None:
    assert r6_resets.check(ev(stats_resets=(T0,)), TH) == []
    assert r6_resets.check(ev(stats_resets=(T0, T0 + timedelta(days=8))), TH) == []
    (r,) = r6_resets.check(ev(stats_resets=(T0, T0 + timedelta(days=1), T0 + timedelta(days=2))), TH)
    assert "3 times in 7 days" in r.title
