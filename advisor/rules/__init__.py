"""The advisor's rules (issue 8), one module each; `evaluate` runs them all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from advisor.advice import SEVERITY_ORDER, Advice
from advisor.evidence import Evidence
from advisor.rules import (
    r1_max,
    r2_track_planning,
    r3_sample_rate,
    r4_lwlock,
    r5_families,
    r6_resets,
    r7_planning,
    r8_scope,
    r9_unused_indexes,
    r10_redundant_indexes,
    r11_missing_indexes,
    r12_index_effects,
)
from advisor.thresholds import Thresholds

MODULES = (
    r1_max,
    r2_track_planning,
    r3_sample_rate,
    r4_lwlock,
    r5_families,
    r6_resets,
    r7_planning,
    r8_scope,
    r9_unused_indexes,
    r10_redundant_indexes,
    r11_missing_indexes,
    r12_index_effects,
)
_RANK = {m.CODE: i for i, m in enumerate(MODULES)}  # the rule about a setting comes before those that touch it

RULES: tuple[Callable[[Evidence, Thresholds], list[Advice]], ...] = tuple(m.check for m in MODULES)


def evaluate(evidence: Evidence, thresholds: Thresholds | None = None) -> list[Advice]:
    """Run every rule; one recommendation per dedup key and per change, most severe first."""
    th = thresholds or Thresholds()
    seen: dict[tuple[str, str, str], Advice] = {}
    for rule in RULES:
        for rec in rule(evidence, th):
            old = seen.get(rec.key)
            if old is None or SEVERITY_ORDER[rec.severity] > SEVERITY_ORDER[old.severity]:
                seen[rec.key] = rec
    ordered = sorted(seen.values(), key=lambda r: (-SEVERITY_ORDER[r.severity], r.rule, r.subject))
    return one_per_change(ordered)


def one_per_change(recs: list[Advice]) -> list[Advice]:
    """Recommendations that ask for the same change (the same statement, to the letter) become one: the most
    severe leads (between equals, the rule about that setting before a rule that reaches it from elsewhere:
    track_planning's before sample_rate's "turn track_planning off instead"), and every other one's reason is
    added to its explanation, with their sources and evidence. A DBA reads one card per change to make, never
    two with the same ALTER SYSTEM line."""
    groups: dict[str, list[Advice]] = {}
    out: list[Advice | str] = []
    for rec in recs:
        key = rec.change.text if rec.change else None
        if key is None:
            out.append(rec)
        elif key in groups:
            groups[key].append(rec)
        else:
            groups[key] = [rec]
            out.append(key)  # the place of the group: its most severe member's
    return [_merged(groups[r]) if isinstance(r, str) else r for r in out]


def _merged(recs: list[Advice]) -> Advice:
    first, *others = sorted(recs, key=lambda r: (-SEVERITY_ORDER[r.severity], _RANK.get(r.rule, len(_RANK))))
    for rec in others:
        labels = {s.label for s in first.evidence}
        first = replace(
            first,
            explanation=f"{first.explanation} Also ({rec.title}): {rec.explanation}",
            evidence=first.evidence + tuple(s for s in rec.evidence if s.label not in labels),
            references=first.references + tuple(r for r in rec.references if r not in first.references),
        )
    return first
