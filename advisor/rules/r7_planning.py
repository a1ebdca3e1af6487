"""Rule 7: planning-dominated statements (plan share above 50% with material total time)."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice
from advisor.evidence import Evidence
from advisor.thresholds import Thresholds

CODE = "planning_dominated"


def _snippet(query: str, length: int = 100) -> str:
    text = " ".join(query.split())
    return text if len(text) <= length else text[: length - 1] + "…"


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 7; needs track_planning on and a role that sees every statement."""
    if not evidence.settings.track_planning or not evidence.sees_all_statements:
        return []
    db = evidence.server_db_time_ms
    out = []
    for st in evidence.statements:
        total = st.total_exec_ms + st.total_plan_ms
        if db <= 0 or st.plan_share <= thresholds.plan_share or total / db < thresholds.material_time_share:
            continue
        subject = f"statement:{st.statement_id}" if st.statement_id is not None else f"queryid:{st.queryid}"
        out.append(
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject=subject,
                title=f"Planning is {st.plan_share:.0%} of this statement's time",
                explanation=(
                    f"`{_snippet(st.query)}` (queryid {st.queryid}): {st.total_plan_ms:,.0f} ms planning vs "
                    f"{st.total_exec_ms:,.0f} ms execution "
                    f"over {st.calls:,} calls; {total / db:.1%} of the server's db time."
                ),
                effect="Use prepared statements or plan caching (e.g. driver-side prepare, plan_cache_mode); "
                "check partition counts (planning grows with partitions and their locks).",
                references=(sources.POSTGRES_FM_TRACK_PLANNING, sources.PGSS_DOCS),
            )
        )
    return out
