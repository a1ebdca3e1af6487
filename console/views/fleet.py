"""The fleet overview, the home page after login: every visible server's status and figures over a
range, filtered, sorted and paged on the server, with the whole state in the URL. htmx requests get
the fragment "fleet" of console/fleet.html."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from math import ceil
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils import timezone

from accounts.access import visible_organizations, visible_servers
from advisor.selectors import Counts, recommendation_counts
from console.charts import Series, time_chart
from console.ranges import OPENING, PRESETS, TimeRange, opening_key_of, parse_range
from console.views.common import page_number, render_page
from inventory.models import Server
from presentation.formatting import rate_text
from readtier import (
    HOUR,
    FleetRow,
    PlanningState,
    Window,
    fleet_summary,
    floor_hour,
    history_older_than,
    server_status,
    version_text,
)

PAGE_SIZE = 50
SPARK_POINTS = 72  # a sparkline is ~140 px wide: 30 days of hours are averaged down to this many points
# Statuses in the default order (the ones that need a look first), with their URL key and badge class.
STATUSES: dict[str, tuple[str, str]] = {
    "failing": ("failing", "failing"),
    "stale": ("stale", "stale"),
    "never collected": ("never", "never"),
    "ok": ("ok", "ok"),
    "disabled": ("disabled", "disabled"),
}
STATUS_BY_KEY = {key: status for status, (key, _) in STATUSES.items()}
STATUS_RANK = {status: i for i, status in enumerate(STATUSES)}
# sort -> column heading (with its unit). The first three sort on inventory rows alone; the others on
# figures over the range, which needs every filtered server's figures (descending, no data last).
SORTS: dict[str, str] = {
    "status": "Status",
    "name": "Server",
    "org": "Organization",
    "calls": "Calls/s",
    "dbtime": "DB time (ms/s)",
    "dealloc": "Dealloc/s",
}
FIGURE_SORTS = ("calls", "dbtime", "dealloc")
# The table's columns in order (a key of SORTS: sortable).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "Status"),
    ("advice", "Advisor"),
    ("name", "Server"),
    ("org", "Organization"),
    ("version", "PostgreSQL"),
    ("extension", "pgss"),
    ("age", "Last snapshot"),
    ("calls", "Calls/s"),
    ("dbtime", "DB time (ms/s)"),
    ("exec", "Exec (ms/s)"),
    ("plan", "Planning (ms/s)"),
    ("dealloc", "Dealloc/s"),
    ("entries", "Entries / max"),
    ("trend", "Trend (calls/s)"),
)
NUMERIC_COLUMNS = ("calls", "dbtime", "exec", "plan", "dealloc", "entries")
DEFAULT_SORT = "status"
NO_ADVICE = Counts()
# What filtering, sorting and server_status read of the inventory rows (not the status notes or secrets).
INVENTORY_FIELDS = (
    "name",
    "organization__name",
    "tags",
    "enabled",
    "interval_s",
    "last_attempt_at",
    "last_success_at",
    "consecutive_failures",
)


@dataclass(frozen=True)
class FleetState:
    """The page's part of the URL besides the range: ?org=&tag=&status=&q=&sort=&page=."""

    organization_id: int | None = None
    tag: str = ""
    status: str = ""  # a key of STATUS_BY_KEY
    text: str = ""
    sort: str = DEFAULT_SORT
    page: int = 1
    error: str = ""  # why a parameter asked for was not used

    @property
    def filtered(self) -> bool:
        return bool(self.organization_id or self.tag or self.status or self.text)

    def params(self, **changes) -> dict[str, str]:
        values = {
            "org": self.organization_id,
            "tag": self.tag,
            "status": self.status,
            "q": self.text,
            "sort": self.sort,
            "page": self.page,
        }
        values.update(changes)
        # Defaults stay out of the URL, so that a bookmark reads short.
        return {
            k: str(v)
            for k, v in values.items()
            if v not in ("", None) and not (k == "page" and v == 1) and not (k == "sort" and v == DEFAULT_SORT)
        }


def parse_state(params, organization_ids: set[int]) -> FleetState:
    """The state asked for; what cannot be used (an organization the user cannot see among them) is
    dropped, with the reason in `error`."""
    errors = []
    organization_id = None
    if params.get("org"):
        try:
            organization_id = int(params["org"])
        except ValueError:
            organization_id = -1
        if organization_id not in organization_ids:
            # The same words whether it does not exist or is another's: nothing is confirmed.
            errors.append(f"organization {params['org']!r} is not one of yours")
            organization_id = None
    status = params.get("status", "")
    if status and status not in STATUS_BY_KEY:
        errors.append(f"unknown status {status!r}: one of {', '.join(STATUS_BY_KEY)}")
        status = ""
    sort = params.get("sort") or DEFAULT_SORT
    if sort not in SORTS:
        errors.append(f"unknown sort {sort!r}: one of {', '.join(SORTS)}")
        sort = DEFAULT_SORT
    page = page_number(params, errors)
    tag, text = params.get("tag", "").strip()[:100], params.get("q", "").strip()[:200]
    return FleetState(
        organization_id=organization_id,
        tag=tag,
        status=status,
        text=text,
        sort=sort,
        page=page,
        error="; ".join(errors),
    )


def rate_cell(value: float | None) -> str:
    """A rate in the fleet's table, whose headings carry the unit."""
    return rate_text(value, unit="", missing="–")


def age_text(age: timedelta) -> str:
    """How long ago, as a person says it ("2 min ago")."""
    seconds = int(age.total_seconds())
    if seconds < 60:
        return "just now" if seconds < 10 else f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def db_time_ms_per_s(row: FleetRow) -> float | None:
    """Execution plus planning time per second (planning only where it was tracked)."""
    if row.exec_ms_per_s is None:
        return None
    return row.exec_ms_per_s + (row.plan_ms_per_s or 0.0)


def spark_points(window: Window, trend: Sequence[float | None]) -> tuple[list[datetime], list[float | None]]:
    """The hourly trend of fleet_summary (one value per UTC hour from the window's first) with at most
    SPARK_POINTS points: consecutive hours averaged (hours without data left out; none: a gap)."""
    first = floor_hour(window.start)
    group = max(1, ceil(len(trend) / SPARK_POINTS))
    x = [first + i * HOUR for i in range(0, len(trend), group)]
    if group == 1:
        return x, list(trend)
    y = []
    for i in range(0, len(trend), group):
        values = [v for v in trend[i : i + group] if v is not None]
        y.append(sum(values) / len(values) if values else None)
    return x, y


@dataclass(frozen=True)
class FleetLine:
    """One server as the table shows it."""

    row: FleetRow
    status_css: str
    version: str
    age: str  # of the last snapshot; "" when there is none
    calls: str
    db_time: str
    exec_time: str
    plan_time: str | None  # None: planning not tracked in the range (never 0)
    plan_partly: bool  # tracked for part of the range only (the figure is over that part)
    dealloc: str
    entries: str
    entries_max: str  # pg_stat_statements.max, shown next to dealloc/s; "" when unknown
    chart_id: str
    chart: dict
    advice: Counts = NO_ADVICE  # the server's active recommendations by severity
    advice_text: str = ""  # "2 critical · 1 warning"; "" when there is none

    @property
    def advice_parts(self) -> list[str]:
        """The severities of advice_text one by one, so that a narrow column breaks between them only."""
        return self.advice_text.split(" · ") if self.advice_text else []


def advice_text(counts: Counts) -> str:
    """The active recommendations by severity, the worst first ("2 critical · 1 warning")."""
    parts = [(counts.critical, "critical"), (counts.warning, "warning"), (counts.info, "info")]
    return " · ".join(f"{n} {severity}" for n, severity in parts if n)


def _line(row: FleetRow, window: Window, now: datetime, advice: Counts = NO_ADVICE) -> FleetLine:
    x, y = spark_points(window, row.trend_calls_per_s)
    if row.entries_peak is None:
        entries = "–"
    elif row.entries_max is None:
        entries = f"{row.entries_peak:,}"
    else:
        entries = f"{row.entries_peak:,} / {row.entries_max:,}"
    return FleetLine(
        row=row,
        status_css=STATUSES.get(row.status, ("", ""))[1],
        version=version_text(row.server_version_num) or "not read yet",
        age=age_text(now - row.last_snapshot_at) if row.last_snapshot_at else "",
        calls=rate_cell(row.calls_per_s),
        db_time=rate_cell(db_time_ms_per_s(row)),
        exec_time=rate_cell(row.exec_ms_per_s),
        plan_time=None if row.plan_ms_per_s is None else rate_cell(row.plan_ms_per_s),
        plan_partly=row.planning == PlanningState.PARTLY_TRACKED,
        dealloc=rate_text(row.dealloc_per_s, unit=""),
        entries=entries,
        entries_max="" if row.entries_max is None else f"{row.entries_max:,}",
        chart_id=f"spark-{row.server_id}",
        chart=time_chart(
            x=x, series=[Series("calls/s", y)], unit="calls/s", spark=True, x_range=(window.start, window.end)
        ),
        advice=advice,
        advice_text=advice_text(advice),
    )


def _matches(server: Server, state: FleetState) -> bool:
    """The filters but the status (the summary counts every status among the others' matches)."""
    if state.organization_id and server.organization_id != state.organization_id:
        return False
    if state.tag and state.tag not in [str(t) for t in server.tags or []]:
        return False
    return not state.text or state.text.casefold() in server.name.casefold()


def _inventory_key(sort: str, statuses: dict[int, str]):
    def key(s: Server):
        name, org = s.name.casefold(), s.organization.name.casefold()
        if sort == "name":
            return (name, org, s.pk)
        if sort == "org":
            return (org, name, s.pk)
        return (STATUS_RANK[statuses[s.pk]], name, org, s.pk)

    return key


def _figure(row: FleetRow, sort: str) -> float | None:
    if sort == "calls":
        return row.calls_per_s
    if sort == "dbtime":
        return db_time_ms_per_s(row)
    return row.dealloc_per_s


def fleet_page(
    *, servers: list[Server], state: FleetState, window: Window, now: datetime
) -> tuple[list[FleetRow], int, int]:
    """(the page's rows, the number of servers, the page shown) of the filtered, sorted servers.
    fleet_summary is read once: for the page's servers alone where the order comes from the inventory,
    for every filtered server where it comes from the figures."""
    pages = max(1, ceil(len(servers) / PAGE_SIZE))
    page = min(state.page, pages)
    cut = slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)
    if state.sort not in FIGURE_SORTS:
        return fleet_summary(server_ids=[s.pk for s in servers[cut]], window=window, now=now), len(servers), page
    rows = fleet_summary(server_ids=[s.pk for s in servers], window=window, now=now)
    # Descending, servers without data last, ties by name (servers arrive sorted by status then name).
    rows.sort(key=lambda r: (_figure(r, state.sort) is None, -(_figure(r, state.sort) or 0.0)))
    return rows[cut], len(servers), page


def _url(base: str, tr: TimeRange, params: dict[str, str]) -> str:
    query = urlencode({**tr.params, **params})
    return f"{base}?{query}" if query else base


def _headers(base: str, tr: TimeRange, state: FleetState) -> list[tuple[str, str, str, str]]:
    """(label, sort URL or "", css class, arrow) of every column of the table, in order."""
    out = []
    for key, label in COLUMNS:
        css = "num" if key in NUMERIC_COLUMNS else ""
        if key not in SORTS:
            out.append((label, "", css, ""))
            continue
        url = _url(base, tr, state.params(sort=key, page=1))
        arrow = ("▼" if key in FIGURE_SORTS else "▲") if key == state.sort else ""
        out.append((label, url, f"{css} sorted".strip() if arrow else css, arrow))
    return out


def _opening(server_ids: list[int], now) -> str:
    return opening_key_of(history_older_than(server_ids, [PRESETS[k] for k in OPENING], now=now))


def fleet(request: HttpRequest) -> HttpResponse:
    """/fleet/: the page, or for htmx its fragment "fleet" (controls, summary, table and pager)."""
    now = timezone.now()
    organizations = list(visible_organizations(request.user).order_by("name"))
    state = parse_state(request.GET, {o.pk for o in organizations})
    visible = list(visible_servers(request.user).select_related("organization").only(*INVENTORY_FIELDS))
    # Without a range in the URL the fleet opens on the shortest that holds its servers' history.
    opening = "" if request.GET.get("range") else _opening([s.pk for s in visible], now)
    tr = parse_range(request.GET, now=now, opening=opening)
    statuses = {s.pk: server_status(s, now) for s in visible}
    matching = [s for s in visible if _matches(s, state)]
    counts = Counter(statuses[s.pk] for s in matching)
    shown = [s for s in matching if not state.status or statuses[s.pk] == STATUS_BY_KEY[state.status]]
    shown.sort(key=_inventory_key(state.sort, statuses))
    rows, total, page = fleet_page(servers=shown, state=state, window=tr.window, now=now)
    errors = [e for e in (tr.error, state.error) if e]
    if page < state.page:
        errors.append(f"page {state.page} is past the last page ({page})")
        state = replace(state, page=page)
    pages = max(1, ceil(total / PAGE_SIZE))
    advice = recommendation_counts(server_ids=[r.server_id for r in rows])  # one query for the page
    base = reverse("fleet")
    keep = state.params(page=1)
    context = {
        "range": tr,
        "state": state,
        "errors": errors,
        "lines": [_line(r, tr.window, now, advice[r.server_id]) for r in rows],
        "total": total,
        "visible_count": len(visible),
        "organizations": organizations,
        "tags": sorted({str(t) for s in visible for t in s.tags or []}),
        "status_options": [(key, status) for status, (key, _) in STATUSES.items()],
        "summary": [
            (status, counts.get(status, 0), css, _url(base, tr, state.params(status=key, page=1)), state.status == key)
            for status, (key, css) in STATUSES.items()
        ],
        "all_statuses_url": _url(base, tr, state.params(status="", page=1)),
        "matching_count": len(matching),
        "ranges": [(key, f"{base}?{urlencode({'range': key, **keep})}", tr.key == key) for key in PRESETS],
        "headers": _headers(base, tr, state),
        "base": base,
        "range_params": tr.params,
        "range_query": urlencode(tr.params),
        "reset_url": _url(base, tr, {}),
        "pages": pages,
        "first_row": (page - 1) * PAGE_SIZE + 1,
        "last_row": (page - 1) * PAGE_SIZE + len(rows),
        "prev_url": _url(base, tr, state.params(page=page - 1)) if page > 1 else "",
        "next_url": _url(base, tr, state.params(page=page + 1)) if page < pages else "",
    }
    return render_page(request, "console/fleet.html", context, fragment="fleet")


urlpatterns = [path("fleet/", fleet, name="fleet")]
