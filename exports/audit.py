"""What an audit export says, built only from the selectors (window_summary, collection_coverage,
top_statements, snapshots, server_settings, config_changes and the advisor's), so every figure in the PDF,
the workbook, the CSV files and the JSON is the figure the console and the API show for that window.
Query texts (and anything the advisor quoted from them) are redacted here, once, for every format."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils import timezone

from advisor.models import SEVERITY_RANK
from advisor.selectors import RecommendationRow, recommendation_activity, recommendations
from collectors.public import redact_text
from inventory.models import Organization, Server
from readtier import (
    CONFIG_COLUMNS,
    CollectionCoverage,
    ConfigChange,
    Page,
    PlanChangeRow,
    Planning,
    PlanningState,
    ServerSeries,
    StatementFilters,
    StatementTotals,
    Window,
    WindowSummary,
    collection_coverage,
    config_changes,
    plan_changes,
    server_series,
    server_settings,
    snapshot_page,
    top_statements,
    version_text,
    window_summary,
)

TOP_N = 20  # statements in each top list
TOP_ORDERS = ("total", "exec", "plan", "calls")
# A query text kept in the data files is cut here: an XLSX cell holds at most 32,767 characters, and
# every format must carry the same text.
QUERY_MAX_CHARS = 10_000


@dataclass(frozen=True)
class SettingsAt:
    """pg_stat_statements' settings as the last snapshot taken in the window read them; where the window's
    raw snapshots have expired (or it has none), the server's latest ones, with in_window False."""

    as_of: datetime | None  # the snapshot they come from (None: never collected)
    in_window: bool
    values: list[tuple[str, object]]  # (setting, value: int, str, bool, float or None where the GUC does not exist)


@dataclass(frozen=True)
class ServerAudit:
    server_id: int
    name: str
    settings: SettingsAt
    changes: list[ConfigChange]  # setting changes seen in the window (raw snapshots only)
    summary: WindowSummary
    coverage: CollectionCoverage
    planning: Planning
    statement_count: int  # statements that ran in the window
    top: dict[str, list[StatementTotals]]  # by order; "plan" is empty where planning was not tracked at all
    cut_texts: frozenset[int]  # statement ids whose text was cut at QUERY_MAX_CHARS
    series: ServerSeries  # hourly (daily beyond a month): the PDF's chart of database time, gaps as holes
    plan_changes: list[PlanChangeRow] = field(default_factory=list)  # statements planned anew in the window

    @property
    def version(self) -> str | None:
        return dict(self.settings.values).get("server version")

    @property
    def planning_state(self) -> PlanningState:
        return self.planning.state


@dataclass(frozen=True)
class AuditFinding:
    """A recommendation that was active at some time in the window, as the advisor holds it now."""

    rec: RecommendationRow
    state_at_end: str  # active | resolved (at the window's end)


@dataclass(frozen=True)
class AuditContent:
    organization_id: int
    organization: str
    window: Window
    generated_at: datetime
    requested_by: str | None
    time_zone: str  # the requester's, for the PDF's times (data files are in UTC)
    servers: list[ServerAudit]
    findings: list[AuditFinding]

    @property
    def calls(self) -> int:
        return sum(s.summary.calls for s in self.servers)

    @property
    def exec_ms(self) -> float:
        return sum(s.summary.exec_ms for s in self.servers)

    @property
    def plan_ms(self) -> float | None:
        """Planning time of the servers that tracked it; None where none did (not 0)."""
        tracked = [s.summary.plan_ms for s in self.servers if s.summary.plan_ms is not None]
        return sum(tracked) if tracked else None

    @property
    def db_time_ms(self) -> float:
        return sum(s.summary.db_time_ms for s in self.servers)

    @property
    def gap_hours(self) -> float:
        return sum(s.coverage.gap_hours for s in self.servers)

    @property
    def collection_errors(self) -> int:
        return sum(s.coverage.error_count for s in self.servers)

    @property
    def not_tracked(self) -> list[str]:
        """Servers whose planning was not tracked over the window."""
        return [s.name for s in self.servers if s.planning_state == PlanningState.NOT_TRACKED]

    def findings_by_severity(self) -> dict[str, int]:
        out = {"critical": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.rec.severity] = out.get(f.rec.severity, 0) + 1
        return out


def clean_text(text: str | None, limit: int = QUERY_MAX_CHARS) -> tuple[str | None, bool]:
    """A text from a monitored server (or quoting one) with its secrets redacted, cut at `limit` characters:
    (text, whether it was cut). redact_text() is idempotent, so a text redacted at collection stays the same."""
    if text is None:
        return None, False
    text = redact_text(text)
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _settings(server_id: int, window: Window) -> SettingsAt:
    found = snapshot_page(server_id=server_id, window=window, page=Page(1, 1)).rows
    if found:
        snap, in_window = found[0], True
    else:
        snap, in_window = server_settings(server_id=server_id), False
    values = [(name, getattr(snap, column)) for column, name in CONFIG_COLUMNS.items()]
    # The version as PostgreSQL writes it (170004 -> "17.4"), as the console shows it.
    values = [(n, version_text(v) if n == "server version" else v) for n, v in values]
    return SettingsAt(as_of=snap.taken_at, in_window=in_window, values=values)


OWN_HIDDEN = StatementFilters(hide_own=True)  # the console's own collections are not the application's


def server_audit(*, server: Server, window: Window, top_n: int = TOP_N) -> ServerAudit:
    """One server over the window: settings, changes, totals, coverage and the four top lists."""
    top: dict[str, list[StatementTotals]] = {}
    cut: set[int] = set()
    planning, count = None, 0
    for order in TOP_ORDERS:
        found = top_statements(server_id=server.pk, window=window, order=order, page=Page(1, top_n), filters=OWN_HIDDEN)
        planning, count = found.planning, found.total_count
        # Ranked by a planning time nobody measured, the list would be noise: it stays empty.
        if order == "plan" and found.planning.state == PlanningState.NOT_TRACKED:
            top[order] = []
            continue
        top[order] = []
        for row in found.rows:
            text, was_cut = clean_text(row.query)
            top[order].append(dataclasses.replace(row, query=text))
            if was_cut:
                cut.add(row.statement_id)
    coverage = collection_coverage(server_id=server.pk, window=window, errors_limit=50)
    return ServerAudit(
        server_id=server.pk,
        name=server.name,
        settings=_settings(server.pk, window),
        changes=config_changes(server_id=server.pk, window=window),
        summary=window_summary(server_id=server.pk, window=window),
        coverage=coverage,
        planning=planning,
        statement_count=count,
        top=top,
        cut_texts=frozenset(cut),
        series=server_series(server_id=server.pk, window=window, resolution=coverage.resolution, top_events=0),
        plan_changes=plan_changes(server_id=server.pk, window=window),
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def findings_in(*, server_ids: list[int], window: Window) -> list[AuditFinding]:
    """The recommendations active at some time in [start, end): open when the window began, or opened
    (again) inside it. Read from their opened/resolved history, so a later evaluation never changes which
    ones a window holds; one without a history is judged by its first_seen_at and resolved_at."""
    history: dict[int, list[tuple[datetime, str]]] = {}
    for a in recommendation_activity(server_ids=server_ids, start=_EPOCH, end=window.end):
        history.setdefault(a.recommendation_id, []).append((a.at, a.kind))
    rows = recommendations(server_ids=server_ids) + recommendations(server_ids=server_ids, active=False)
    found = []
    for rec in rows:
        events = history.get(rec.id)
        if events:
            before = [kind for at, kind in events if at < window.start]
            inside = [kind for at, kind in events if at >= window.start]
            active = (before and before[-1] == "opened") or "opened" in inside
            state = events[-1][1]
        else:
            resolved = rec.resolved_at
            active = rec.first_seen_at < window.end and (resolved is None or resolved >= window.start)
            state = "resolved" if resolved is not None and resolved < window.end else "opened"
        if active:
            found.append(AuditFinding(_clean_finding(rec), "resolved" if state == "resolved" else "active"))
    found.sort(key=lambda f: (-SEVERITY_RANK[f.rec.severity], f.rec.server, f.rec.first_seen_at, f.rec.id))
    return found


def _clean_finding(rec: RecommendationRow) -> RecommendationRow:
    """A family's or a statement's recommendation quotes its query text: redacted like every other text."""
    return dataclasses.replace(
        rec,
        subject=clean_text(rec.subject)[0],
        title=clean_text(rec.title)[0],
        explanation=clean_text(rec.explanation)[0],
        change_text=clean_text(rec.change_text)[0],
    )


def audit_content(
    *,
    organization_id: int,
    server_ids: list[int],
    window: Window,
    requested_by: str | None = None,
    time_zone: str = "UTC",
    now: datetime | None = None,
    progress=None,
) -> AuditContent:
    """The organization's servers among `server_ids` (never another organization's) over `window`.
    `progress(done, total)` is called after each server (the task's progress bar)."""
    organization = Organization.objects.get(pk=organization_id)
    servers = list(Server.objects.filter(organization_id=organization_id, pk__in=server_ids).order_by("name"))
    audits = []
    for i, server in enumerate(servers, start=1):
        audits.append(server_audit(server=server, window=window))
        if progress is not None:
            progress(i, len(servers))
    return AuditContent(
        organization_id=organization.pk,
        organization=organization.name,
        window=window,
        generated_at=now or timezone.now(),
        requested_by=requested_by,
        time_zone=time_zone,
        servers=audits,
        findings=findings_in(server_ids=[s.pk for s in servers], window=window),
    )
