"""audit.pdf: templates/exports/audit.html rendered by WeasyPrint. Figures are formatted here with their
units (presentation/formatting.py, as in the weekly mail), times are shown in the requester's zone, query texts
reach the template redacted and are escaped by it; charts are PNG data: URIs and nothing is ever fetched."""

from __future__ import annotations

import base64
import zoneinfo
from dataclasses import dataclass, field
from datetime import datetime

from django.template.loader import render_to_string

from advisor.selectors import CHANGE_APPLY_TEXT
from exports.audit import QUERY_MAX_CHARS, TOP_N, AuditContent, AuditFinding, ServerAudit
from presentation import formatting as fmt
from presentation.charts import Line, chart_png
from readtier import PlanningState, StatementTotals

QUERY_PDF_CHARS = 200  # a statement's text in a table; the data files carry up to QUERY_MAX_CHARS
ORDER_TITLES = {
    "total": "total time (execution + planning)",
    "exec": "execution time",
    "plan": "planning time",
    "calls": "calls",
}


@dataclass(frozen=True)
class PdfStatementLine:
    rank: int
    calls: str
    total: str
    exec: str
    plan: str
    mean_exec: str
    rows: str
    where: str  # database · user
    query: str  # redacted, folded to one line, cut at QUERY_PDF_CHARS
    cut: bool


@dataclass(frozen=True)
class TopTable:
    order: str
    title: str
    lines: list[PdfStatementLine]
    note: str  # why the table is empty, or ""


@dataclass(frozen=True)
class EvidenceChart:
    title: str
    data_uri: str


@dataclass(frozen=True)
class FindingView:
    finding: AuditFinding
    apply_text: str
    charts: list[EvidenceChart] = field(default_factory=list)


def _plan(ms: float | None) -> str:
    return fmt.NOT_TRACKED if ms is None else fmt.duration_text(ms)


def _line(rank: int, r: StatementTotals) -> PdfStatementLine:
    text = r.query if r.query is not None else f"(no text: {r.text_status.replace('_', ' ')})"
    one = " ".join(text.split())
    return PdfStatementLine(
        rank=rank,
        calls=fmt.count_text(r.calls),
        total=fmt.duration_text(r.total_ms),
        exec=fmt.duration_text(r.exec_ms),
        plan=_plan(r.plan_ms),
        mean_exec=fmt.mean_text(r.mean_exec_ms),
        rows=fmt.count_text(r.rows),
        where=f"{r.database} · {r.user}",
        query=fmt.shorten(one, QUERY_PDF_CHARS),
        cut=len(one) > QUERY_PDF_CHARS,
    )


def _tables(s: ServerAudit) -> list[TopTable]:
    out = []
    for order, title in ORDER_TITLES.items():
        rows = s.top[order]
        note = ""
        if order == "plan" and s.planning_state == PlanningState.NOT_TRACKED:
            note = "Planning was not tracked on this server in the window (track_planning off): no ranking by it."
        elif not rows:
            note = "No statement ran in the window."
        out.append(
            TopTable(
                order,
                f"Top {len(rows)} by {title}" if rows else f"By {title}",
                [_line(i, r) for i, r in enumerate(rows, start=1)],
                note,
            )
        )
    return out


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def evidence_charts(finding: AuditFinding, tz) -> list[EvidenceChart]:
    """The evidence series of a recommendation, one chart per unit."""
    by_unit: dict[str, list[Line]] = {}
    for series in finding.rec.evidence:
        points = [(datetime.fromisoformat(t), v) for t, v in series.get("points") or []]
        ends = [datetime.fromisoformat(t) for t in series.get("ends") or []]
        if points and any(v is not None for _, v in points):
            line = Line(series.get("label", ""), points, ends if len(ends) == len(points) else None)
            by_unit.setdefault(series.get("unit", ""), []).append(line)
    charts = []
    for unit, lines in by_unit.items():
        title = ", ".join(line.label for line in lines)
        png = chart_png(lines, title=title, unit=unit, time_zone=tz, width_px=900, height_px=240)
        charts.append(EvidenceChart(title if not unit else f"{title} ({unit})", _png_uri(png)))
    return charts


def db_time_chart(s: ServerAudit, tz) -> str:
    """Execution (and tracked planning) time per second over the window: a gap stays a hole."""
    points = s.series.points
    ends = [p.end for p in points]  # each point drawn flat across what it covers (presentation/charts.py)
    lines = [Line("execution", [(p.start, p.exec_ms_per_s) for p in points], ends)]
    if s.planning_state != PlanningState.NOT_TRACKED:
        lines.append(Line("planning", [(p.start, p.plan_ms_per_s) for p in points], ends))
    png = chart_png(
        lines,
        title=f"{s.name}: database time per second",
        unit="ms/s",
        stacked=len(lines) > 1,
        time_zone=tz,
        width_px=900,
        height_px=240,
    )
    return _png_uri(png)


def _zone(name: str):
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


def pdf_context(c: AuditContent) -> dict:
    tz = _zone(c.time_zone)
    firsts = [(s, s.top["total"][0]) for s in c.servers if s.top["total"]]
    heaviest_server, heaviest = max(firsts, key=lambda pair: pair[1].total_ms, default=(None, None))
    gaps = [(s, g) for s in c.servers for g in s.coverage.gaps]
    # What the summary may claim: servers without a snapshot in the window, and those first collected inside it.
    without = [s.name for s in c.servers if not s.summary.snapshots]
    began = [
        (s.name, s.coverage.history_from)
        for s in c.servers
        if s.summary.snapshots and s.coverage.history_from and s.coverage.history_from > c.window.start
    ]
    return {
        "c": c,
        "tz": tz,
        "tz_name": c.time_zone,
        "utc": zoneinfo.ZoneInfo("UTC"),
        "fmt": fmt,
        "hours": c.window.seconds / 3600,
        "days": c.window.seconds / 86400,
        "db_time": fmt.duration_text(c.db_time_ms),
        "exec_time": fmt.duration_text(c.exec_ms),
        "plan_time": None if c.plan_ms is None else fmt.duration_text(c.plan_ms),
        "calls": fmt.count_text(c.calls),
        "findings_by_severity": c.findings_by_severity(),
        "heaviest": heaviest,
        "heaviest_server": heaviest_server,
        "heaviest_line": _line(1, heaviest) if heaviest else None,
        "heaviest_share": fmt.share_text(heaviest.total_ms / heaviest_server.summary.db_time_ms)
        if heaviest and heaviest_server.summary.db_time_ms > 0
        else None,
        "overall": _overall(c),
        "servers": [_server_view(s, tz) for s in c.servers],
        "gaps": gaps,
        "collected": len(without) < len(c.servers),
        "without": without,
        "began": began,
        "findings": [
            FindingView(f, CHANGE_APPLY_TEXT.get(f.rec.change_apply, f.rec.change_apply), evidence_charts(f, tz))
            for f in c.findings
        ],
        "top_n": TOP_N,
        "query_pdf_chars": QUERY_PDF_CHARS,
        "query_max_chars": f"{QUERY_MAX_CHARS:,}",
    }


@dataclass(frozen=True)
class OverallLine:
    server: str
    line: PdfStatementLine
    share: str  # of its server's database time


def _overall(c: AuditContent, n: int = 5) -> list[OverallLine]:
    """The heaviest statements across the servers, by total time."""
    pairs = sorted(((s, r) for s in c.servers for r in s.top["total"]), key=lambda p: -p[1].total_ms)[:n]
    return [
        OverallLine(
            s.name,
            _line(i, r),
            fmt.share_text(r.total_ms / s.summary.db_time_ms) if s.summary.db_time_ms > 0 else fmt.UNKNOWN,
        )
        for i, (s, r) in enumerate(pairs, start=1)
    ]


def _server_view(s: ServerAudit, tz) -> dict:
    w, cov = s.summary, s.coverage
    # No snapshot in the window: no figure, not "0 ms" nor "not tracked".
    figures = (
        {} if w.snapshots else dict.fromkeys(("calls", "db_time", "exec_time", "plan_time", "coverage"), fmt.NO_DATA)
    )
    return {
        "s": s,
        "tables": _tables(s),
        "calls": fmt.count_text(w.calls),
        "db_time": fmt.duration_text(w.db_time_ms),
        "exec_time": fmt.duration_text(w.exec_ms),
        "plan_time": _plan(w.plan_ms),
        "plan_share": fmt.plan_share_text(w.plan_share, w.planning),
        "dealloc_per_s": _dealloc_text(s),
        "coverage": fmt.share_text(cov.share),
        "gap_hours": fmt.hours_text(cov.gap_hours),
        "gaps": [fmt.span_text(g.start, g.end, tz) + f" ({fmt.hours_text(g.hours)})" for g in cov.gaps],
        "settings": [(name, _setting_text(value)) for name, value in s.settings.values],
        "chart": db_time_chart(s, tz) if s.series.points else None,
    } | figures


def _dealloc_text(s: ServerAudit) -> str:
    """Deallocations per second, or why there is no figure: no snapshot, or a release without the counter."""
    if s.summary.dealloc_per_s is not None:
        return fmt.rate_text(s.summary.dealloc_per_s)
    if not s.summary.snapshots:
        return fmt.NO_DATA
    major = int(s.version.split(".")[0]) if s.version and s.version[0].isdigit() else None
    return f"{fmt.UNKNOWN} (PostgreSQL {major})" if major is not None and major < 14 else fmt.UNKNOWN


def _setting_text(value) -> str:
    if value is None:
        return "does not exist on this server"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def audit_html(c: AuditContent) -> str:
    return render_to_string("exports/audit.html", pdf_context(c))


def pdf_bytes(c: AuditContent) -> bytes:
    # Loaded in the worker only: it costs the web processes memory for nothing.
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    # data: URIs only — an export never reaches the network (nor the disk) for a resource.
    offline = URLFetcher(allowed_protocols={"data"})
    return HTML(string=audit_html(c), url_fetcher=offline, base_url=None).write_pdf()
