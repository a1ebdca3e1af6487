"""Rule 8 (what pg_stat_statements can see and keep) against constructed evidence."""

from __future__ import annotations

from advisor.evidence import Settings
from advisor.rules import r8_scope
from tests.advisor.rules.evidence import TH, assert_sane, ev


def test_rule8_scope_and_partial() -> None:
    assert r8_scope.check(ev(), TH) == []
    recs = r8_scope.check(
        ev(settings=Settings(save=False, track="none"), sees_all_statements=False, monitoring_role="Mon"), TH
    )
    assert {r.subject for r in recs} == {"save", "track", "visibility"}
    assert_sane(recs)
    assert any(r.change and r.change.text == 'GRANT pg_read_all_stats TO "Mon";' for r in recs)
