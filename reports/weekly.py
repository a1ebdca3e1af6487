"""What the weekly mail shows, built from the organization's digest alone (reports/digest.py): plain
sentences first, then each server's figures with their units, week-over-week changes, links into the
console, and the charts as PNG images. The templates (templates/reports/weekly*) only lay this out.

One module over 400 lines: the whole mail's content, each section from the same digest, so that the sentences at its
top and the figures under them cannot disagree; the templates only lay it out."""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from presentation import formatting as f
from presentation.charts import Line, chart_png
from readtier import PlanChangeRow, PlanningState, StatementChange, StatementTotals, relative_change
from reports.digest import LISTED, OrganizationDigest, ServerDigest, organization_digest
from reports.weeks import ReportWeek

TEXT_CHARS = 160  # of a statement's text in the mail
CHART_SIZE = (420, 190)  # pixels


def console_url(path: str, params: dict[str, str] | None = None) -> str:
    """An absolute URL into the console (settings.CONSOLE_URL), for links in a mail."""
    return settings.CONSOLE_URL + path + (f"?{urlencode(params)}" if params else "")


@dataclass(frozen=True)
class InlineImage:
    """A PNG sent inside the mail (multipart/related) and shown by `cid:` from the HTML."""

    cid: str  # the Content-ID, without its angle brackets
    png: bytes
    alt: str
    width: int
    height: int


@dataclass(frozen=True)
class WeekFigure:
    label: str
    value: str
    change: str  # against the previous week
    previous: str


@dataclass(frozen=True)
class MailStatementLine:
    text: str
    url: str
    total: str
    change: str
    calls: str
    mean: str
    detail: str = ""  # regressions: mean before and after


@dataclass(frozen=True)
class WaitLine:
    event: str
    sessions: str
    share: str


@dataclass(frozen=True)
class AdviceLine:
    title: str
    url: str
    detail: str  # severity and when, or who resolved it


@dataclass(frozen=True)
class ServerSection:
    name: str
    url: str  # the server page over the report's week
    statements_url: str  # its top statements, compared with the previous week
    advisor_url: str
    heading_note: str  # version and status
    summary: str  # one plain sentence
    figures: list[WeekFigure]
    planning: PlanningState
    dealloc: str
    coverage: str
    gaps: list[str]
    errors: str
    top: list[MailStatementLine]
    new: list[MailStatementLine]
    new_count: int
    regressions: list[MailStatementLine]
    regression_count: int
    waits: list[WaitLine]
    waits_note: str
    opened: list[AdviceLine]
    resolved: list[AdviceLine]
    indexes_url: str = ""  # the server's Indexes page
    indexes: list[AdviceLine] = field(default_factory=list)  # the index advice active now, the first LISTED
    indexes_count: int = 0  # all of it
    charts: list[InlineImage] = field(default_factory=list)
    history: bool = True  # False: no snapshot this week, so the lists say nothing of what ran
    compared: bool = True  # False: no snapshot the week before, so nothing is new or slower


@dataclass(frozen=True)
class WeeklyReport:
    organization_id: int
    organization: str
    week: str  # 2026-W47
    span: str  # 16–22 Nov 2026
    time_zone: str
    headline: str  # for the subject line
    highlights: list[str]  # plain sentences, most important first
    servers: list[ServerSection]
    settings_url: str  # the organization's report page
    previous_label: str = "previous week"  # what the changes compare with (the week so far: the same days)

    @property
    def images(self) -> list[InlineImage]:
        return [image for s in self.servers for image in s.charts]


def _window_params(week: ReportWeek) -> dict[str, str]:
    # With their UTC offset: the console reads them as written, whatever the reader's own time zone.
    tz = zoneinfo.ZoneInfo(week.time_zone)
    w = week.window
    return {
        "range": "custom",
        "start": w.start.astimezone(tz).isoformat(timespec="minutes"),
        "end": w.end.astimezone(tz).isoformat(timespec="minutes"),
    }


def _statement_text(s: StatementTotals) -> str:
    return f.shorten(s.query, TEXT_CHARS) if s.query else f.missing_text(s.text_status)


def _statement_line(c: StatementChange, params: dict[str, str], *, compared: bool = True) -> MailStatementLine:
    """`compared`: the week before has history (else a statement's change is unknown, never "new")."""
    s = c.current
    return MailStatementLine(
        text=_statement_text(s),
        url=console_url(reverse("statement", args=[s.statement_id]), params),
        total=f.duration_text(s.total_ms),
        change=("new" if c.is_new else f.change_text(c.change("total_ms"))) if compared else "no week before",
        calls=f.calls_text(s.calls),
        mean=f.mean_text(s.total_ms / s.calls if s.calls else None),
    )


def _regression_line(c: StatementChange, params: dict[str, str], planned: list[PlanChangeRow]) -> MailStatementLine:
    """Its mean time last week and this week, and its last plan change this week, the likeliest cause."""
    line = _statement_line(c, params)
    before = c.previous.total_ms / c.previous.calls
    after = c.current.total_ms / c.current.calls
    detail = f"mean {f.mean_text(before)} → {f.mean_text(after)}"
    if planned:
        detail += f"; {planned[-1].described} ({planned[-1].at:%a %H:%M} UTC)"
    return MailStatementLine(**{**line.__dict__, "detail": detail})


def _figures(d: ServerDigest) -> list[WeekFigure]:
    w, p = d.week, d.previous
    if not p.snapshots:  # nothing to compare with: no history the week before
        before = {"db": ("", f.NO_DATA), "calls": ("", f.NO_DATA), "dealloc": ("", f.NO_DATA)}
    else:
        dealloc_change = "" if not w.dealloc and not p.dealloc else f.change_text(relative_change(w.dealloc, p.dealloc))
        before = {
            "db": (f.change_text(d.db_time_change), f.duration_text(p.db_time_ms)),
            "calls": (f.change_text(d.calls_change), f.count_text(p.calls)),
            "dealloc": (dealloc_change, f.count_text(p.dealloc)),
        }
    out = [
        WeekFigure("Database time", f.duration_text(w.db_time_ms), *before["db"]),
        WeekFigure("Calls", f.count_text(w.calls), *before["calls"]),
        WeekFigure(
            "Planning share",
            f.plan_share_text(w.plan_share, w.planning),
            "",
            f.plan_share_text(p.plan_share, p.planning),
        ),
    ]
    if w.dealloc is not None:
        out.append(WeekFigure("Deallocations", f.count_text(w.dealloc), *before["dealloc"]))
    return out


def _planning(d: ServerDigest) -> str:
    w = d.week
    if w.planning == PlanningState.NOT_TRACKED:
        return (
            "Planning time: not tracked (pg_stat_statements.track_planning is off), so database time is "
            "execution time only."
        )
    if w.planning == PlanningState.NO_DATA:
        return "Planning time: no data this week."
    where = " while it was tracked (part of the week)" if w.planning == PlanningState.PARTLY_TRACKED else ""
    return f"Planning took {f.share_text(w.plan_share)} of database time ({f.duration_text(w.plan_ms)}){where}."


def _dealloc(d: ServerDigest) -> str:
    w = d.week
    if w.dealloc is None:
        if d.major is not None and d.major < 14:
            return "Deallocations: unknown (pg_stat_statements_info needs PostgreSQL 14 or later)."
        if not w.snapshots:
            return "Deallocations: no history this week."
        return "Deallocations: not measured this week (pg_stat_statements_info could not be read)."
    if w.dealloc == 0:
        return "No pg_stat_statements entry was deallocated: pg_stat_statements.max holds every statement."
    return (
        f"{f.count_text(w.dealloc)} deallocations ({f.rate_text(w.dealloc_per_s)} on average, peak "
        f"{f.rate_text(d.coverage.peak_dealloc_per_s)} in an hour): pg_stat_statements.max is too small "
        "for the statements seen, so their figures are incomplete."
    )


def _coverage(d: ServerDigest, tz, *, so_far: bool = False) -> tuple[str, list[str], str]:
    cov = d.coverage
    # A server whose history begins inside the week is covered since then, not over "the week".
    since = f"{f.when_text(cov.history_from, tz)}, when its history begins" if _began_mid_week(d) else ""
    if cov.share is None:
        text = "No history this week."
    elif not cov.gaps:
        whole = "the whole week so far" if so_far else "the whole week"
        # A gap is an hour without a snapshot: say that much, not that nothing was missed inside an hour.
        every = "with a snapshot in every hour"
        text = f"Collected since {since}, {every}." if since else f"Collected {whole}, {every}."
    else:
        gaps = f"{len(cov.gaps)} gap{'s' if len(cov.gaps) > 1 else ''}, {f.hours_text(cov.gap_hours)} in all"
        of = f"the time since {since}" if since else ("the week so far" if so_far else "the week")
        text = f"Collected {f.share_text(cov.share)} of {of}: {gaps}."
    gaps = [f"{f.span_text(g.start, g.end, tz)} ({f.hours_text(g.hours)})" for g in cov.gaps]
    errors = ""
    if d.status in ("failing", "stale"):
        errors = f"{d.status.capitalize()} now" + (
            f": {f.shorten(d.error_message, 200)}. " if d.error_message else ". "
        )
    if cov.error_count:
        last = cov.errors[0]
        errors += (
            f"{f.count_text(cov.error_count)} collection{'s' if cov.error_count > 1 else ''} failed; the last, "
            f"{f.when_text(last.at, tz)}: {last.error_class}: {f.shorten(last.message, 200)}"
        )
    return text, gaps, errors


def previous_label(week: ReportWeek) -> str:
    """What a week's changes compare with: the week before, or for the week so far, as much of the week before."""
    return "previous week" if week.until is None else "same days and hours of the previous week"


def _summary(d: ServerDigest, previous: str) -> str:
    w = d.week
    if not w.snapshots:
        return f"{d.name} has no history this week."
    text = f"{d.name} spent {f.duration_text(w.db_time_ms)} in the database over {f.calls_text(w.calls)}"
    change = d.db_time_change
    if change is not None:
        text += f", {f.change_text(change)} in time on the {previous}"
    text += "."
    if d.regression_count:
        text += f" {d.regression_count} statement{'s' if d.regression_count > 1 else ''} slowed down."
    return text


def _charts(d: ServerDigest, tz) -> list[InlineImage]:
    points = d.series.points
    if sum(1 for p in points if p.span_s) < 2:
        return []  # nothing to draw a line through
    # Narrower than the column: a phone scales it down less, so its labels stay readable there.
    width, height = CHART_SIZE
    ends = [p.end for p in points]  # each point drawn flat across its hour (presentation/charts.py)
    db_time = [Line("execution", [(p.start, p.exec_ms_per_s) for p in points], ends)]
    if d.week.plan_ms is not None:
        db_time.append(Line("planning", [(p.start, p.plan_ms_per_s) for p in points], ends))
    calls = [Line("calls", [(p.start, p.calls_per_s) for p in points], ends)]
    charts = [
        (
            "dbtime",
            "Database time per second" + ("" if d.week.plan_ms is not None else " (planning not tracked)"),
            db_time,
            "ms/s",
            True,
        ),
        ("calls", "Calls per second", calls, "calls/s", False),
    ]
    if d.week.dealloc:
        dealloc = [Line("dealloc", [(p.start, p.dealloc_per_s) for p in points], ends)]
        charts.append(("dealloc", "Deallocations per second", dealloc, "dealloc/s", False))
    out = []
    for key, title, lines, unit, stacked in charts:
        png = chart_png(lines, title=title, unit=unit, stacked=stacked, width_px=width, height_px=height, time_zone=tz)
        out.append(InlineImage(f"{key}-{d.server_id}@pgconsole", png, f"{title} of {d.name}", width, height))
    return out


def server_section(d: ServerDigest, week: ReportWeek, *, charts: bool = True) -> ServerSection:
    tz = zoneinfo.ZoneInfo(week.time_zone)
    params = _window_params(week)
    coverage, gaps, errors = _coverage(d, tz, so_far=week.until is not None)
    status = d.status if d.status != "ok" else ""
    note = ", ".join(x for x in (f"PostgreSQL {d.version}" if d.version else "", status) if x)
    waits = [WaitLine(r.event, f.sessions_text(r.active_sessions), f.share_text(r.share)) for r in d.waits.rows]
    return ServerSection(
        name=d.name,
        url=console_url(reverse("server", args=[d.server_id]), params),
        statements_url=console_url(reverse("server-statements", args=[d.server_id]), {**params, "compare": "1"}),
        advisor_url=console_url(reverse("server-advisor", args=[d.server_id])),
        heading_note=note,
        summary=_summary(d, previous_label(week)),
        figures=_figures(d),
        planning=_planning(d),
        dealloc=_dealloc(d),
        coverage=coverage,
        gaps=gaps,
        errors=errors,
        top=[_statement_line(c, params, compared=bool(d.previous.snapshots)) for c in d.top],
        new=[_statement_line(c, params) for c in d.new],
        new_count=d.new_count,
        regressions=[_regression_line(c, params, d.plan_changes.get(c.statement_id, [])) for c in d.regressions],
        regression_count=d.regression_count,
        waits=waits,
        waits_note="" if waits else "No wait event was sampled this week.",
        opened=[
            AdviceLine(
                a.title,
                console_url(reverse("advisor-recommendation", args=[a.recommendation_id])),
                f"{a.severity}, {f.when_text(a.at, tz)}",
            )
            for a in d.opened
        ],
        resolved=[
            AdviceLine(
                a.title,
                console_url(reverse("advisor-recommendation", args=[a.recommendation_id])),
                f"{'by ' + a.by if a.by else 'its condition cleared'}, {f.when_text(a.at, tz)}",
            )
            for a in d.resolved
        ],
        indexes_url=console_url(reverse("server-indexes", args=[d.server_id])),
        indexes=[
            AdviceLine(
                r.title,
                console_url(reverse("advisor-recommendation", args=[r.id])),
                f"{r.severity}, since {f.when_text(r.opened_at, tz)}",
            )
            for r in d.index_advice[:LISTED]
        ],
        indexes_count=len(d.index_advice),
        charts=_charts(d, tz) if charts else [],
        history=bool(d.week.snapshots),
        compared=bool(d.previous.snapshots),
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _began_mid_week(d: ServerDigest) -> bool:
    return d.coverage.history_from is not None and d.coverage.history_from > d.coverage.window.start


def _failing_sentences(digest: OrganizationDigest) -> list[str]:
    return [
        f"{s.name} is {s.status} now" + (f": {f.shorten(s.error_message, 160)}" if s.error_message else ".")
        for s in digest.failing
    ]


def _names(servers: list[ServerDigest]) -> str:
    names = [s.name for s in servers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _coverage_sentences(digest: OrganizationDigest, tz) -> list[str]:
    """What the week's figures rest on: which servers have no history, which began mid-week, which have gaps;
    "collected the whole week" only when it is true of every server."""
    empty = [s for s in digest.servers if s.coverage.share is None]
    late = [s for s in digest.servers if s.coverage.share is not None and _began_mid_week(s)]
    out = []
    if empty:
        one = len(empty) == 1
        out.append(
            f"{_names(empty)} {'has' if one else 'have'} no history this week: "
            f"nothing of {'it' if one else 'them'} is in these figures."
        )
    for s in late:
        out.append(f"{s.name} is counted from {f.when_text(s.coverage.history_from, tz)}, when its history begins.")
    if digest.with_gaps:
        gaps = ", ".join(f"{s.name} ({f.hours_text(s.coverage.gap_hours)})" for s in digest.with_gaps)
        out.append(f"Collection gaps: {gaps}; the figures leave those hours out.")
    elif not empty and not late:
        out.append(f"Every server was collected the whole week{' so far' if digest.week.until else ''}, every hour.")
    return out


def highlights(digest: OrganizationDigest) -> list[str]:
    """The week in a few plain sentences, the most important first."""
    out = []
    n = len(digest.servers)
    if not n:
        return [f"{digest.organization} has no server: there is nothing to report."]
    if all(s.coverage.share is None for s in digest.servers):
        which = "your server" if n == 1 else f"any of your {n} servers"
        return [
            f"No history was collected this week for {which}: there are no figures to report yet. The first "
            "report with figures is the one after the first collections.",
            *_failing_sentences(digest),
        ]
    change = relative_change(digest.db_time_ms, digest.previous_db_time_ms)
    text = (
        f"Your {_plural(n, 'server')} spent {f.duration_text(digest.db_time_ms)} in the database over "
        f"{f.calls_text(digest.calls)}"
    )
    if change is not None:
        calls = relative_change(digest.calls, digest.previous_calls)
        text += (
            f": {f.change_text(change)} in time and {f.change_text(calls)} in calls on the "
            f"{previous_label(digest.week)} "
            f"({f.duration_text(digest.previous_db_time_ms)}, {f.calls_text(digest.previous_calls)})"
        )
    out.append(text + ".")
    out.extend(_failing_sentences(digest))
    regressions = sum(s.regression_count for s in digest.servers)
    new = sum(s.new_count for s in digest.servers)
    if regressions or new:
        parts = []
        if regressions:
            parts.append(f"{_plural(regressions, 'statement')} slowed down (mean time up more than 50%)")
        if new:
            parts.append(f"{_plural(new, 'statement')} ran for the first time")
        out.append("; ".join(parts).capitalize() + ".")
    out.extend(_coverage_sentences(digest, zoneinfo.ZoneInfo(digest.week.time_zone)))
    if digest.opened or digest.resolved:
        out.append(
            f"The advisor opened {_plural(digest.opened, 'recommendation')} and "
            f"{digest.resolved} {'was' if digest.resolved == 1 else 'were'} resolved."
        )
    return out


def weekly_report(
    *, organization_id: int, week: ReportWeek, now: datetime | None = None, charts: bool = True
) -> WeeklyReport:
    """The organization's report over `week`: its digest, laid out for the mail (charts rendered here)."""
    digest = organization_digest(organization_id=organization_id, week=week, now=now)
    tz = zoneinfo.ZoneInfo(week.time_zone)
    w = week.window
    headline = (
        f"{f.duration_text(digest.db_time_ms)} database time "
        f"({f.change_text(relative_change(digest.db_time_ms, digest.previous_db_time_ms))})"
    )
    return WeeklyReport(
        organization_id=organization_id,
        organization=digest.organization,
        week=week.label if week.until is None else f"{week.label}, so far",
        previous_label=previous_label(week),
        span=f.week_span_text(w.start, w.end, tz),
        time_zone=week.time_zone,
        headline=headline,
        highlights=highlights(digest),
        servers=[server_section(s, week, charts=charts) for s in digest.servers],
        settings_url=console_url(reverse("organization-reports", args=[organization_id])),
    )
