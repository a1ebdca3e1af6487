"""Rule 6: statistics reset often (stats_reset moving)."""

from __future__ import annotations

from datetime import datetime

from advisor import sources
from advisor.advice import Advice, Change
from advisor.evidence import Evidence
from advisor.thresholds import Thresholds

CODE = "stats_resets"


def check(evidence: Evidence, thresholds: Thresholds, *, now: datetime | None = None) -> list[Advice]:
    """Rule 6: more than `resets_max` resets within `resets_window` of the latest one (or of `now`)."""
    if not evidence.stats_resets:
        return []
    end = now or max(evidence.stats_resets)
    recent = sorted(t for t in evidence.stats_resets if end - thresholds.resets_window <= t <= end)
    if len(recent) <= thresholds.resets_max:
        return []
    days = thresholds.resets_window.days
    return [
        Advice(
            rule=CODE,
            severity="warning",
            server=evidence.server,
            subject="server",
            title=f"pg_stat_statements was reset {len(recent)} times in {days} days",
            explanation=(
                f"stats_reset moved {len(recent)} times (last {recent[-1]:%Y-%m-%d %H:%M} UTC). Each reset empties "
                "the table; the console keeps the history, so periodic resets only add entry-creation churn."
            ),
            change=Change("-- remove the scheduled SELECT pg_stat_statements_reset(); job", "client"),
            effect="Continuous counters; no burst of new entries after each reset.",
            references=(sources.PGSS_DOCS,),
        )
    ]
