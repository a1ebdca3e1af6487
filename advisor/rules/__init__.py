"""The advisor's rules (issue 8), one module each; `evaluate` runs them all."""

from __future__ import annotations

from collections.abc import Callable

from advisor.evidence import Evidence
from advisor.recommendation import SEVERITY_ORDER, Recommendation
from advisor.rules import (
    r1_max,
    r2_track_planning,
    r3_sample_rate,
    r4_lwlock,
    r5_families,
    r6_resets,
    r7_planning,
    r8_scope,
)
from advisor.thresholds import Thresholds

RULES: tuple[Callable[[Evidence, Thresholds], list[Recommendation]], ...] = (
    r1_max.check,
    r2_track_planning.check,
    r3_sample_rate.check,
    r4_lwlock.check,
    r5_families.check,
    r6_resets.check,
    r7_planning.check,
    r8_scope.check,
)


def evaluate(evidence: Evidence, thresholds: Thresholds | None = None) -> list[Recommendation]:
    """Run every rule; one recommendation per dedup key, most severe first."""
    th = thresholds or Thresholds()
    seen: dict[tuple[str, str, str], Recommendation] = {}
    for rule in RULES:
        for rec in rule(evidence, th):
            old = seen.get(rec.key)
            if old is None or SEVERITY_ORDER[rec.severity] > SEVERITY_ORDER[old.severity]:
                seen[rec.key] = rec
    return sorted(seen.values(), key=lambda r: (-SEVERITY_ORDER[r.severity], r.rule, r.subject))
