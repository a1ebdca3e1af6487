"""Rule 2: track_planning — turn it on where far from the spinlock cliff, off (or sample) where near it."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change, EvidenceSeries
from advisor.evidence import Evidence
from advisor.rules._common import cliff_calls_per_s, headroom, partial_note
from advisor.thresholds import Thresholds

CODE = "track_planning"
MODEL = (
    "cliff model: ≈400k calls/s of one queryid on 192 vCPUs (Postgres.FM, episode on track_planning), "
    "scaled linearly per vCPU"
)


def _hottest(evidence: Evidence) -> tuple[EvidenceSeries, ...]:
    if not evidence.hottest_series:
        return ()
    return (EvidenceSeries.of(f"queryid {evidence.hottest_queryid}", "calls/s", evidence.hottest_series),)


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 2."""
    tp = evidence.settings.track_planning
    if tp is None:
        return []
    hot = evidence.hottest_calls_per_s or 0.0
    if tp is False:
        h_off = headroom(evidence, thresholds, track_planning=False)
        h_on = headroom(evidence, thresholds, track_planning=True)
        if evidence.cpu_count is None:
            distance = "The server's CPU count is unknown (set it on the server page), so the cliff cannot be placed."
            severity = "info"
        elif h_on is None:
            distance = "No hot statement recorded; far from the cliff."
            severity = "info"
        else:
            cliff = cliff_calls_per_s(evidence, thresholds, track_planning=True) or 0
            distance = (
                f"Hottest queryid peaks at {hot:,.0f} calls/s; with {evidence.cpu_count} vCPUs the headroom is "
                f"×{h_off:.1f} today and ×{h_on:.1f} with track_planning on (cliff ≈{cliff:,.0f} calls/s; {MODEL})."
            )
            if h_on < thresholds.cliff_safe_headroom:
                return [
                    Advice(
                        rule=CODE,
                        severity="info",
                        server=evidence.server,
                        subject="server",
                        title="Keep track_planning off: this server is near the spinlock cliff",
                        explanation="Planning time is not tracked. "
                        + distance
                        + " track_planning doubles the spinlock updates per statement.",
                        evidence=_hottest(evidence),
                        references=(sources.POSTGRES_FM_TRACK_PLANNING, sources.PGSS_DOCS),
                    )
                ]
            severity = "warning"
        return [
            Advice(
                rule=CODE,
                severity=severity,  # type: ignore[arg-type]
                server=evidence.server,
                subject="server",
                title="Turn track_planning on: planning time is invisible",
                explanation="pg_stat_statements.track_planning is off, so plan time and plans are 0. "
                + distance
                + partial_note(evidence),
                change=Change("ALTER SYSTEM SET pg_stat_statements.track_planning = on;", "reload"),
                effect="Planning time per statement becomes visible (rule 7 can then name planning-heavy statements).",
                cost="A second spinlock-protected update per statement: halves the distance to the cliff.",
                evidence=_hottest(evidence),
                references=(sources.POSTGRES_FM_TRACK_PLANNING, sources.PGSS_DOCS),
            )
        ]
    h_on = headroom(evidence, thresholds, track_planning=True)
    if h_on is not None and h_on < thresholds.cliff_near_headroom:
        alt = (
            "or lower pg_stat_statements.sample_rate (rule 3)"
            if evidence.settings.sample_rate is not None
            else "(sample_rate does not exist on this server)"
        )
        return [
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject="server",
                title="Turn track_planning off: near the spinlock cliff",
                explanation=(
                    f"Hottest queryid peaks at {hot:,.0f} calls/s; headroom ×{h_on:.1f} with track_planning on, "
                    f"×{h_on * 2:.1f} with it off ({evidence.cpu_count} vCPUs; {MODEL}). Turn it off {alt}."
                ),
                change=Change("ALTER SYSTEM SET pg_stat_statements.track_planning = off;", "reload"),
                effect="Halves the spinlock updates of the hottest statement.",
                cost="Planning time becomes invisible.",
                evidence=_hottest(evidence),
                references=(sources.POSTGRES_FM_TRACK_PLANNING, sources.PGSS_DOCS),
            )
        ]
    return []
