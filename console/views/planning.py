"""Planning vs execution, per server: the statements ranked by plan share and by plan time, and the
server's plan share over time. Where pg_stat_statements.track_planning was off, the page says
"planning not tracked", when, and what enabling it costs: never 0 ms for time nobody measured."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse

from accounts.access import server_for
from advisor.thresholds import Thresholds
from console.charts import PLAN_COLOR, Chart, Series, split_chart, time_axis, time_chart
from console.ranges import parse_range
from console.views.common import range_links, render_page, server_header
from presentation.formatting import missing_text, ms_number_text, number_text
from readtier import (
    Page,
    PlanningState,
    ServerSeries,
    StatementFilters,
    StatementTotals,
    TopStatements,
    Window,
    history_coverage,
    server_series,
    top_statements,
)

RANKED = 20  # statements per ranking
# What a point spans.
BUCKET = {"raw": "snapshot interval", "10min": "10 minutes", "hourly": "hour", "2h": "2 hours", "daily": "day"}
TEXT_CHARS = 120
MATERIAL_SHARE = Thresholds().material_time_share  # the advisor's "material total time" (rule 7)
SHARE_HELP = (
    "Planning's share of each statement's time: planning / (execution + planning), among the statements with "
    f"at least {MATERIAL_SHARE:.0%} of the server's database time in the range (material total time). A high "
    "share there points at statements worth preparing (or at lock-manager contention while planning)."
)
PLAN_HELP = "The statements that spend the most time planning, in total."
# What enabling track_planning costs (shared/seeds 002, the Postgres.FM episode on track_planning).
ENABLING_COST = (
    "Enabling pg_stat_statements.track_planning (no restart: ALTER SYSTEM and a reload) adds a second "
    "spinlock-protected update of the statement's entry for every planning. That matters only for one queryid "
    "run at very high rates on many CPUs: it moves the contention cliff from about 400,000 to about 200,000 calls/s "
    "of that queryid (measured on 192 vCPUs); far below that, the cost does not show."
)


@dataclass(frozen=True)
class Untracked:
    """A stretch of the range where planning was not (or only partly) tracked."""

    start: datetime
    end: datetime
    partly: bool  # a bucket at its edge was tracked for part of its time (track_planning changed inside it)


@dataclass(frozen=True)
class RankingRow:
    """One statement of a ranking as the table writes it."""

    s: StatementTotals
    text: str
    has_text: bool
    url: str
    calls: str
    plans: str
    plan_ms: str
    exec_ms: str
    mean_plan_ms: str
    share: str


def untracked_intervals(series: ServerSeries) -> list[Untracked]:
    """Consecutive points (a gap ends a stretch) whose planning was not tracked or only partly, cut to
    the range (edge buckets stretch beyond it)."""
    out: list[Untracked] = []
    start = end = None
    partly = False

    def close() -> None:
        out.append(Untracked(max(start, series.window.start), min(end, series.window.end), partly))

    for p in series.points:
        if p.planning in (PlanningState.NOT_TRACKED, PlanningState.PARTLY_TRACKED):
            if start is None:
                start, partly = p.start, False
            end = p.end
            partly = partly or p.planning == PlanningState.PARTLY_TRACKED
            continue
        if start is not None:
            close()
            start = None
    if start is not None:
        close()
    return out


def plan_share_points(series: ServerSeries) -> list[float | None]:
    """The server's plan share in percent per point: planning over execution + planning, None where
    planning was not tracked (or there is no data): a share of untracked time is no share at all."""
    out: list[float | None] = []
    for p in series.points:
        if p.plan_ms_per_s is None or p.exec_ms_per_s is None or p.exec_ms_per_s + p.plan_ms_per_s <= 0:
            out.append(None)
        else:
            out.append(p.plan_ms_per_s / (p.exec_ms_per_s + p.plan_ms_per_s) * 100)
    return out


def planning_charts(series: ServerSeries, window: Window, untracked: list[Untracked]) -> list[Chart]:
    """The plan share over time and the time split, from one ServerSeries. Where planning was never
    tracked in the range there is no share at all: that chart is not drawn (spec None), it says why."""
    points = series.points
    common = time_axis(points, (window.start, window.end))
    never = bool(untracked) and all(p.planning in (None, PlanningState.NOT_TRACKED) for p in points)
    if never:
        share_note, time_note, plan_label = (
            "planning not tracked in this range: there is no plan share to draw",
            "planning not tracked in this range: execution only",
            "planning (not tracked)",
        )
    elif untracked:
        share_note = time_note = "planning not tracked for part of the range (not drawn there)"
        plan_label = "planning"
    else:
        share_note = time_note = ""
        plan_label = "planning"
    share = time_chart(
        series=[Series("plan share", plan_share_points(series), PLAN_COLOR)], unit="%", y_max=100, **common
    )
    return [
        Chart("chart-plan-share", "Plan share of database time", None if never else share, share_note),
        split_chart(
            "chart-plan-time",
            "Database time per second, execution and planning",
            [p.exec_ms_per_s for p in points],
            [p.plan_ms_per_s for p in points],
            unit="ms/s",
            plan_label=plan_label,
            stacked=True,
            note=time_note,
            **common,
        ),
    ]


@dataclass(frozen=True)
class Ranking:
    id: str  # the table's element id
    title: str
    help: str
    top: TopStatements
    rows: list[RankingRow]


def ranking_rows(top: TopStatements, query: str) -> list[RankingRow]:
    rows = []
    for s in top.rows:
        if not s.plan_ms:  # no planning in the range (a prepared statement): nothing to rank it by
            continue
        text = s.query if s.query is not None else missing_text(s.text_status)
        rows.append(
            RankingRow(
                s=s,
                text=text,
                has_text=s.query is not None,
                url=reverse("statement", args=[s.statement_id]) + "?" + query,
                calls=number_text(s.calls, 0),
                plans=number_text(s.plans, 0),
                plan_ms=number_text(s.plan_ms, 1),
                exec_ms=number_text(s.exec_ms, 1),
                mean_plan_ms=ms_number_text(s.mean_plan_ms),
                share=number_text(None if s.plan_share is None else s.plan_share * 100, 1),
            )
        )
    return rows


def planning(request: HttpRequest, server_id: int) -> HttpResponse:
    """/servers/<id>/planning/: the whole page, or for an htmx request the range-dependent body."""
    server = server_for(request.user, server_id)
    tr = parse_range(request.GET, history_from=history_coverage(server.pk).data_from)
    base = reverse("planning", args=[server.pk])
    query = urlencode(tr.params)
    material = StatementFilters(min_time_share=MATERIAL_SHARE)
    by_share = top_statements(
        server_id=server.pk, window=tr.window, order="plan_share", filters=material, page=Page(1, RANKED)
    )
    by_plan = top_statements(server_id=server.pk, window=tr.window, order="plan", page=Page(1, RANKED))
    series = server_series(server_id=server.pk, window=tr.window)
    untracked = untracked_intervals(series)
    context = {
        **server_header(server),
        "range": tr,
        "ranges": range_links(base, tr, {}),
        "range_base": base,
        "range_keep": {},
        "statement_query": query,
        "planning_state": by_plan.planning.state,  # tracked | partly tracked | not tracked | no data
        "tracked": by_plan.planning.tracked,
        "untracked": untracked,
        "enabling_cost": ENABLING_COST,
        "rankings": [
            Ranking("by-plan-share", "By plan share", SHARE_HELP, by_share, ranking_rows(by_share, query)),
            Ranking("by-plan-time", "By plan time", PLAN_HELP, by_plan, ranking_rows(by_plan, query)),
        ],
        "series": series,
        # what a point of the series spans, for "partly tracked" buckets
        "bucket": BUCKET[series.resolution],
        "charts": planning_charts(series, tr.window, untracked),
        "text_chars": TEXT_CHARS,
    }
    return render_page(request, "console/planning.html", context, fragment="body")


urlpatterns = [path("servers/<int:server_id>/planning/", planning, name="planning")]
