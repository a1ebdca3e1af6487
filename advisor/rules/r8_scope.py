"""Rule 8: persistence and scope — save = off, track = none, and partial evidence (no pg_read_all_stats)."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change
from advisor.evidence import Evidence
from advisor.thresholds import Thresholds
from collectors.sql_names import quote_ident

CODE = "scope"


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 8."""
    out = []
    s = evidence.settings
    if not s.save:
        out.append(
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject="save",
                title="pg_stat_statements.save is off: statistics are lost at every restart",
                explanation="save = off discards the table at shutdown; every restart starts from zero.",
                change=Change("ALTER SYSTEM SET pg_stat_statements.save = on;", "reload"),
                effect="Statistics survive restarts.",
                references=(sources.PGSS_DOCS,),
            )
        )
    if s.track == "none":
        out.append(
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject="track",
                title="pg_stat_statements.track is none: nothing is recorded",
                explanation="track = none records no statement, while the shared memory for max entries is still used.",
                change=Change("ALTER SYSTEM SET pg_stat_statements.track = 'top';", "reload"),
                effect="Top-level statements are recorded.",
                references=(sources.PGSS_DOCS,),
            )
        )
    if not evidence.sees_all_statements:
        out.append(
            Advice(
                rule=CODE,
                severity="info",
                server=evidence.server,
                subject="visibility",
                title="Evidence is partial: the monitoring role cannot see other roles' statements",
                explanation="Without pg_read_all_stats the texts of other roles' statements are hidden; "
                "statement-level advice (families, planning) is withheld.",
                change=Change(f"GRANT pg_read_all_stats TO {quote_ident(evidence.monitoring_role)};", "none"),
                references=(sources.PGSS_DOCS,),
            )
        )
    return out
