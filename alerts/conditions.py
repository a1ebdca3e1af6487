"""What is wrong now, per rule kind: pure functions from what the selectors returned to the conditions that are
true, each with its words (which server, what happened, how bad, since when) and the figures that raised it.
No database here, so that each threshold is tested on plain values (alerts/evidence.py reads the history)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from advisor.models import SEVERITY_RANK
from advisor.selectors import CHANGE_APPLY_TEXT, RecommendationRow
from advisor.thresholds import DEALLOC_CRITICAL_PER_S
from readtier import ConfigChange, PlanChangeRow, ServerPoint, StatementTotals

# dealloc: above the rate for at least this share of the collected time in the window (a weighted median: one
# snapshot's burst among fifteen is not a storm), and the window collected for at least this share of it.
SUSTAINED_SHARE = 0.5
COVERED_SHARE = 0.5
QUERY_EXCERPT = 120  # characters of a statement's text in a message (the console has the whole of it)


@dataclass(frozen=True)
class Condition:
    key: str  # its identity within the rule: the same condition keeps it from one evaluation to the next
    server_id: int
    severity: str  # critical | warning | info
    title: str  # what happened (the server's name is added by the message)
    summary: str  # how bad and since when, in words with the figures
    since: datetime
    figures: dict
    path: str  # where the console shows it
    change_text: str = ""
    config_changes: tuple[dict, ...] = field(default=())
    statement_id: int | None = None  # a regression's statement: its plan is read while the alert is pending


def when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def duration(d: timedelta) -> str:
    """A length as people say it: 25 min, 3 h 5 min, 2 d 4 h."""
    minutes = max(0, int(d.total_seconds() // 60))
    days, hours, minutes = minutes // 1440, minutes % 1440 // 60, minutes % 60
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"


def server_down(
    *,
    server_id: int,
    status: str,
    last_success_at: datetime | None,
    registered_at: datetime,
    failures: int,
    error_class: str,
    error_message: str,
    down_minutes: int,
    now: datetime,
) -> Condition | None:
    """A server failing (its last collection failed) or stale (no snapshot for several intervals) with no
    successful collection for at least `down_minutes`. A disabled server, or one never tried yet, is not down."""
    if status not in ("failing", "stale"):
        return None
    since = last_success_at or registered_at
    if now - since < timedelta(minutes=down_minutes):
        return None
    last = f"its last snapshot was at {when(last_success_at)}" if last_success_at else "it never had a snapshot"
    if status == "failing":
        title = f"collection failing ({error_class or 'error'})"
        cause = f"the last {failures} collection(s) failed: {error_message or error_class}"
    else:
        title = "no snapshot (stale)"
        cause = "the collector has not reached it: a worker or beat stopped, or collections are queued behind"
    return Condition(
        key=f"server:{server_id}",
        server_id=server_id,
        severity="critical",
        title=title,
        summary=f"Not collected for {duration(now - since)}: {last}; {cause}.",
        since=since,
        figures={
            "minutes_without_snapshot": int((now - since).total_seconds() // 60),
            "consecutive_failures": failures,
            "error_class": error_class,
        },
        path=f"/servers/{server_id}/",
    )


def advisor_open(*, rows: Sequence[RecommendationRow], min_severity: str) -> list[Condition]:
    """One condition per active recommendation (open or acknowledged in the advisor) at or above `min_severity`,
    in the advisor's words with the latest value of each evidence series and its exact change."""
    floor = SEVERITY_RANK[min_severity]
    out = []
    for r in rows:
        if SEVERITY_RANK[r.severity] < floor:
            continue
        figures = {}
        for series in r.evidence:
            values = [v for _, v in series.get("points", []) if v is not None]
            if values:
                figures[f"{series['label']} ({series['unit']})"] = values[-1]
        change = r.change_text
        if change and r.change_apply in CHANGE_APPLY_TEXT:
            change = f"{change} ({CHANGE_APPLY_TEXT[r.change_apply]})"
        summary = r.explanation + (f" Change: {change}" if change else "")
        out.append(
            Condition(
                key=f"recommendation:{r.id}",
                server_id=r.server_id,
                severity=r.severity,
                title=r.title,
                summary=f"Since {when(r.opened_at)}: {summary}",
                since=r.opened_at,
                figures=figures,
                path=f"/advisor/recommendations/{r.id}/",
                change_text=change,
            )
        )
    return out


def dealloc_storm(
    *, server_id: int, points: Sequence[ServerPoint], rate_per_s: float, window: timedelta
) -> Condition | None:
    """pg_stat_statements deallocating above `rate_per_s` for most of the window's collected time (points: the
    window's snapshots, oldest first). None where the rate is unknown (before 14) or too little was collected."""
    known = [p for p in points if p.dealloc_per_s is not None and p.span_s]
    covered_s = sum(p.span_s for p in known)
    if not known or covered_s < COVERED_SHARE * window.total_seconds():
        return None
    above = [p for p in known if p.dealloc_per_s >= rate_per_s]
    above_s = sum(p.span_s for p in above)
    if above_s < SUSTAINED_SHARE * covered_s:
        return None
    mean = sum(p.dealloc_per_s * p.span_s for p in known) / covered_s
    peak = max(p.dealloc_per_s for p in known)
    return Condition(
        key=f"server:{server_id}",
        server_id=server_id,
        severity="critical" if mean >= DEALLOC_CRITICAL_PER_S else "warning",
        title=f"pg_stat_statements deallocating {mean:.1f} entries/s",
        summary=(
            f"{mean:.1f} deallocations/s on average over the last {duration(window)} (peak {peak:.1f}/s), at or "
            f"above {rate_per_s:g}/s for {above_s / covered_s:.0%} of it, since {when(above[0].start)}: "
            "pg_stat_statements.max is too small for the statements this server runs, so their statistics are "
            "evicted and lost. The advisor's recommendation names the value to set."
        ),
        since=above[0].start,
        figures={
            "dealloc_per_s": round(mean, 3),
            "peak_dealloc_per_s": round(peak, 3),
            "share_above": round(above_s / covered_s, 3),
            "threshold_per_s": rate_per_s,
            "window_minutes": int(window.total_seconds() // 60),
        },
        path=f"/servers/{server_id}/",
    )


def _change_dict(c: ConfigChange) -> dict:
    return {"at": c.at.isoformat(), "setting": c.setting, "before": c.before, "after": c.after}


def _change_words(changes: Sequence[ConfigChange], since: datetime) -> str:
    if not changes:
        return f"No configuration change since {when(since)}."
    said = "; ".join(f"{c.setting} {c.before or 'unset'} → {c.after or 'unset'} at {when(c.at)}" for c in changes)
    return f"Configuration changes since {when(since)}: {said}."


def _plan_words(changes: Sequence[PlanChangeRow]) -> str:
    """The statement's last plan change in the window, as a cause: when it was seen and what it changed."""
    if not changes:
        return ""
    last = changes[-1]
    return f" Its plan changed (seen at {when(last.at)}): {last.described.removeprefix('the plan changed ')}."


def regressions(
    *,
    server_id: int,
    current: Sequence[StatementTotals],
    server_total_ms: float,
    baselines: Mapping[int, Sequence[float]],
    factor: float,
    min_share: float,
    min_days: int,
    changes: Sequence[ConfigChange],
    baseline_from: datetime,
    now: datetime,
    plan_changes: Mapping[int, Sequence[PlanChangeRow]] | None = None,
) -> list[Condition]:
    """Statements whose mean time (execution and planning, per call) over the last hour is at least `factor` times
    their baseline: the median of their mean in the same hour of each previous day they ran (at least `min_days`
    of them; the median, so that one bad day in the baseline neither hides nor raises a regression). Only
    statements with at least `min_share` of the server's time in the hour: a rare slow statement pages no one.
    The configuration changes since the baseline began are named in each, and the statement's last plan change
    since then (`plan_changes`, by statement id), the likeliest cause of a sudden regression."""
    if server_total_ms <= 0:
        return []
    out = []
    for s in current:
        share = s.total_ms / server_total_ms
        days = list(baselines.get(s.statement_id, ()))
        if not s.calls or share < min_share or len(days) < max(min_days, 1):
            continue
        mean, usual = s.total_ms / s.calls, statistics.median(days)
        if usual <= 0 or mean < factor * usual:
            continue
        planned = (plan_changes or {}).get(s.statement_id, ())
        text = " ".join((s.query or f"queryid {s.queryid}").split())
        excerpt = text if len(text) <= QUERY_EXCERPT else text[: QUERY_EXCERPT - 1] + "…"
        out.append(
            Condition(
                key=f"statement:{s.statement_id}",
                server_id=server_id,
                severity="warning",
                title=f"a statement {mean / usual:.1f}× slower than usual",
                summary=(
                    f"Mean time {mean:.2f} ms over the last hour against {usual:.2f} ms usually (the median of the "
                    f"same hour on {len(days)} previous days), with {share:.0%} of the server's time and {s.calls} "
                    f"calls ({s.database}, {s.user}): {excerpt} {_change_words(changes, baseline_from)}"
                    f"{_plan_words(planned)}"
                ),
                since=now - timedelta(hours=1),
                figures={
                    "mean_ms": round(mean, 3),
                    "baseline_ms": round(usual, 3),
                    "ratio": round(mean / usual, 2),
                    "share": round(share, 4),
                    "calls": s.calls,
                    "baseline_days": len(days),
                    "queryid": s.queryid,
                    **({"plan_changed_at": planned[-1].at.isoformat()} if planned else {}),
                },
                path=f"/statements/{s.statement_id}/",
                config_changes=tuple(_change_dict(c) for c in changes),
                statement_id=s.statement_id,
            )
        )
    return out
