"""What a weekly report says, built only from the selectors (compare_windows, window_summary,
collection_coverage, server_series, wait_events, fleet_summary and the advisor's), so every figure in the
mail is the figure the console and the API show for that week. Rendering lives in reports/mail.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from advisor.selectors import INDEX_RULES, ActivityRow, RecommendationRow, recommendation_activity, recommendations
from collectors.public import shown
from inventory.models import Organization, Server
from readtier import (
    CollectionCoverage,
    PlanChangeRow,
    ServerSeries,
    StatementChange,
    WaitEvents,
    WindowSummary,
    collection_coverage,
    compare_windows,
    fleet_summary,
    plan_changes_by_statement,
    relative_change,
    server_series,
    version_text,
    wait_events,
    window_summary,
)
from reports.weeks import ReportWeek

TOP_STATEMENTS = 10
TOP_WAITS = 5
LISTED = 10  # new statements and regressions listed (with the count of all of them)


@dataclass(frozen=True)
class ServerDigest:
    server_id: int
    name: str
    tags: list[str]
    version: str | None
    major: int | None  # PostgreSQL's major version, for what the server can tell (None: never collected)
    status: str  # ok | failing | stale | disabled | never collected (now, as the fleet page says)
    error_message: str
    week: WindowSummary
    previous: WindowSummary
    top: list[StatementChange]  # by total time this week, with last week's figures where it ran then
    new: list[StatementChange]  # the heaviest LISTED of the statements new this week
    new_count: int
    regressions: list[StatementChange]  # mean time up > 50% with material total time
    regression_count: int
    # The listed regressions' plan changes this week, by statement id, oldest first: the likeliest cause named.
    plan_changes: dict[int, list[PlanChangeRow]]
    waits: WaitEvents
    coverage: CollectionCoverage
    activity: list[ActivityRow]  # recommendations opened and resolved this week
    series: ServerSeries  # hourly, for the chart
    # The index advice active when the report is made (missing, unused, redundant indexes, and the made ones'
    # effect), most severe first: what the Indexes page lists.
    index_advice: list[RecommendationRow] = field(default_factory=list)

    @property
    def db_time_change(self) -> float | None:
        return relative_change(self.week.db_time_ms, self.previous.db_time_ms)

    @property
    def calls_change(self) -> float | None:
        return relative_change(self.week.calls, self.previous.calls)

    @property
    def opened(self) -> list[ActivityRow]:
        return [a for a in self.activity if a.kind == "opened"]

    @property
    def resolved(self) -> list[ActivityRow]:
        return [a for a in self.activity if a.kind == "resolved"]


@dataclass(frozen=True)
class OrganizationDigest:
    organization_id: int
    organization: str
    week: ReportWeek
    generated_at: datetime
    servers: list[ServerDigest]  # by database time this week, heaviest first

    @property
    def db_time_ms(self) -> float:
        return sum(s.week.db_time_ms for s in self.servers)

    @property
    def previous_db_time_ms(self) -> float:
        return sum(s.previous.db_time_ms for s in self.servers)

    @property
    def calls(self) -> int:
        return sum(s.week.calls for s in self.servers)

    @property
    def previous_calls(self) -> int:
        return sum(s.previous.calls for s in self.servers)

    @property
    def failing(self) -> list[ServerDigest]:
        return [s for s in self.servers if s.status in ("failing", "stale")]

    @property
    def with_gaps(self) -> list[ServerDigest]:
        return [s for s in self.servers if s.coverage.gaps]

    @property
    def opened(self) -> int:
        return sum(len(s.opened) for s in self.servers)

    @property
    def resolved(self) -> int:
        return sum(len(s.resolved) for s in self.servers)


def summary_of(row) -> str:
    return shown(row.error_class, row.error_message, detail=False) if row.status == "failing" else ""


def server_digest(
    *,
    server: Server,
    week: ReportWeek,
    status: str,
    error_message: str,
    activity: list[ActivityRow],
    index_advice: list[RecommendationRow] | None = None,
) -> ServerDigest:
    window, previous = week.window, week.previous().window
    comparison = compare_windows(server_id=server.pk, window=window, previous=previous, hide_own=True)
    top = [c for c in comparison.changes if c.current is not None][:TOP_STATEMENTS]
    earlier = window_summary(server_id=server.pk, window=previous)
    # Without history the week before, nothing is known to be new: it may all have run before it was watched.
    new = sorted(comparison.new, key=lambda c: -c.current.total_ms) if earlier.snapshots else []
    return ServerDigest(
        server_id=server.pk,
        name=server.name,
        tags=list(server.tags or []),
        version=version_text(server.server_version_num),
        major=server.server_version_num // 10000 if server.server_version_num else None,
        status=status,
        error_message=error_message,
        week=window_summary(server_id=server.pk, window=window),
        previous=earlier,
        top=top,
        new=new[:LISTED],
        new_count=len(new),
        regressions=comparison.regressions[:LISTED],
        regression_count=len(comparison.regressions),
        plan_changes=plan_changes_by_statement(
            server_id=server.pk, window=window, statement_ids=[c.statement_id for c in comparison.regressions[:LISTED]]
        ),
        waits=wait_events(server_id=server.pk, window=window, top=TOP_WAITS),
        coverage=collection_coverage(server_id=server.pk, window=window),
        activity=activity,
        series=server_series(server_id=server.pk, window=window, resolution="hourly", top_events=TOP_WAITS),
        index_advice=index_advice or [],
    )


def organization_digest(
    *, organization_id: int, week: ReportWeek, server_ids: list[int] | None = None, now: datetime | None = None
) -> OrganizationDigest:
    """Every server of the organization (or those of `server_ids` that are its own) over `week`."""
    organization = Organization.objects.get(pk=organization_id)
    servers = Server.objects.filter(organization_id=organization_id).order_by("name")
    if server_ids is not None:
        servers = servers.filter(pk__in=server_ids)
    servers = list(servers)
    ids = [s.pk for s in servers]
    window = week.window
    status = {row.server_id: row for row in fleet_summary(server_ids=ids, window=window, now=now)}
    activity: dict[int, list[ActivityRow]] = {}
    for a in recommendation_activity(server_ids=ids, start=window.start, end=window.end):
        activity.setdefault(a.server_id, []).append(a)
    index_advice: dict[int, list[RecommendationRow]] = {}
    for r in recommendations(server_ids=ids, rules=INDEX_RULES):
        index_advice.setdefault(r.server_id, []).append(r)
    digests = [
        server_digest(
            server=s,
            week=week,
            status=status[s.pk].status if s.pk in status else s.status,
            # The mail goes to managers: the console's sentence for the failure, never libpq's words
            error_message=summary_of(status[s.pk]) if s.pk in status else "",
            activity=activity.get(s.pk, []),
            index_advice=index_advice.get(s.pk, []),
        )
        for s in servers
    ]
    digests.sort(key=lambda d: (-d.week.db_time_ms, d.name))
    return OrganizationDigest(
        organization_id=organization.pk,
        organization=organization.name,
        week=week,
        generated_at=now or timezone.now(),
        servers=digests,
    )
