"""Rule 4 (LWLock contention on pg_stat_statements) against constructed evidence: the share's edges."""

from __future__ import annotations

import pytest

from advisor.rules import r4_lwlock
from tests.advisor.rules.evidence import TH, ev


@pytest.mark.parametrize(("share", "sev"), [(0.049, None), (0.05, "warning"), (0.2, "critical"), (None, None)])
def test_rule4_edges(share: float | None, sev: str | None) -> None:
    recs = r4_lwlock.check(ev(lwlock_pgss_share=share, dealloc_per_s={"1h": 30.0}, distinct_keys_1d=9000), TH)
    assert [r.severity for r in recs] == ([sev] if sev else [])
    if sev:
        assert "30.0/s" in recs[0].explanation and "9,000" in recs[0].explanation
