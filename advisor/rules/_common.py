"""Helpers shared by the rules: the partial-view note, identifiers, the spinlock-cliff model."""

from __future__ import annotations

from advisor.evidence import Evidence
from advisor.thresholds import Thresholds


def cliff_calls_per_s(evidence: Evidence, thresholds: Thresholds, *, track_planning: bool) -> float | None:
    """Calls/s of one queryid at which its entry spinlock saturates; None when the CPU count is unknown.

    Linear per-vCPU model calibrated on one public point (sources.POSTGRES_FM_TRACK_PLANNING: ≈400k calls/s
    on 192 vCPUs); track_planning doubles the spinlock updates per statement, so the cliff halves (≈200k).
    """
    if not evidence.cpu_count:
        return None
    cliff = thresholds.cliff_calls_per_s_per_cpu * evidence.cpu_count
    return cliff / 2 if track_planning else cliff


def headroom(evidence: Evidence, thresholds: Thresholds, *, track_planning: bool) -> float | None:
    """Cliff / hottest queryid's peak calls/s (a multiple); None when either is unknown."""
    cliff = cliff_calls_per_s(evidence, thresholds, track_planning=track_planning)
    if cliff is None or not evidence.hottest_calls_per_s:
        return None
    return cliff / evidence.hottest_calls_per_s


def partial_note(evidence: Evidence) -> str:
    """Sentence appended where the monitoring role cannot see every statement."""
    if evidence.sees_all_statements:
        return ""
    return " The monitoring role lacks pg_read_all_stats, so other roles' statements are hidden: this is partial."
