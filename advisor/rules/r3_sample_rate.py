"""Rule 3: pg_stat_statements.sample_rate — only where the GUC exists (a fork such as Tantor Postgres)."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change, EvidenceSeries
from advisor.evidence import Evidence
from advisor.rules._common import headroom
from advisor.thresholds import Thresholds

CODE = "sample_rate"
ALTERNATIVES = (
    "pg_stat_statements.sample_rate does not exist on this server (no community release 13-18 has it; "
    "the patch was never committed). Alternatives: turn track_planning off (halves the spinlock updates), "
    "spread the hot statement over distinct texts or roles at the client, cache its result in the application, "
    "or set pg_stat_statements.track = none for the hottest role with ALTER ROLE ... SET."
)


def _series(evidence: Evidence) -> tuple[EvidenceSeries, ...]:
    out = []
    if evidence.spindelay_series:
        out.append(EvidenceSeries.of("Timeout:SpinDelay", "active sessions", evidence.spindelay_series))
    if evidence.hottest_series:
        out.append(EvidenceSeries.of(f"queryid {evidence.hottest_queryid}", "calls/s", evidence.hottest_series))
    return tuple(out)


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 3."""
    rate = evidence.settings.sample_rate
    spin = evidence.spindelay_share
    h = headroom(evidence, thresholds, track_planning=bool(evidence.settings.track_planning))
    contended = (spin is not None and spin >= thresholds.spindelay_share and evidence.spindelay_on_hot_statements) or (
        h is not None and h < thresholds.cliff_near_headroom
    )
    numbers = []
    if spin is not None:
        numbers.append(f"Timeout:SpinDelay is {spin:.0%} of sampled active time")
    if h is not None:
        numbers.append(f"cliff headroom ×{h:.1f}")
    why = "; ".join(numbers) or "no contention measured"
    if rate is None:
        if not contended:
            return []
        return [
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject="server",
                title="Hot-statement spinlock contention; sample_rate is not available here",
                explanation=f"{why}. {ALTERNATIVES}",
                # Turning track_planning off is the only server-side change; none when it is already off.
                change=(
                    Change("ALTER SYSTEM SET pg_stat_statements.track_planning = off;", "reload")
                    if evidence.settings.track_planning
                    else None
                ),
                effect="Fewer spinlock updates on the hottest entry.",
                cost="Planning time becomes invisible." if evidence.settings.track_planning else "",
                evidence=_series(evidence),
                references=(sources.TANTOR_SAMPLE_RATE, sources.PGSS_DOCS),
            )
        ]
    if contended and rate > thresholds.sample_rate_moderate:
        strong = spin is not None and spin >= 4 * thresholds.spindelay_share
        target = thresholds.sample_rate_strong if strong else thresholds.sample_rate_moderate
        return [
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject="server",
                title=f"Sample statements: set pg_stat_statements.sample_rate to {target:g}",
                explanation=(
                    f"{why}. Tantor Labs' table (192 CPUs, one hot statement): 484k TPS at 1.0, 1.02M at 0.5 "
                    "(SpinDelay 11,107 → 174), none at 0.25."
                ),
                change=Change(f"ALTER SYSTEM SET pg_stat_statements.sample_rate = {target:g};", "reload"),
                effect="Removes nearly all SpinDelay waits on the hot entry.",
                cost="Rare statements may go unrecorded; counters become estimates (scale by 1/rate).",
                evidence=_series(evidence),
                references=(sources.TANTOR_SAMPLE_RATE, sources.PGSS_DOCS),
            )
        ]
    if not contended and rate < 1.0:
        return [
            Advice(
                rule=CODE,
                severity="info",
                server=evidence.server,
                subject="server",
                title="Set pg_stat_statements.sample_rate back to 1",
                explanation=f"sample_rate is {rate:g} but {why}: sampling hides rare statements for nothing.",
                change=Change("ALTER SYSTEM SET pg_stat_statements.sample_rate = 1;", "reload"),
                effect="Every statement is recorded again.",
                cost="One spinlock update per execution again.",
                references=(sources.TANTOR_SAMPLE_RATE, sources.PGSS_DOCS),
            )
        ]
    return []
