"""The server page: its charts over a time range (with the configuration changes marked on every time
axis), the pg_stat_statements settings card, the recent failed collections, and the top statements
(the same table fragment as /servers/<id>/statements/, its state kept in this page's URL)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse

from accounts.access import server_for
from advisor.selectors import recommendation_counts
from console.charts import (
    EXEC_COLOR,
    Chart,
    Series,
    calls_chart,
    hit_ratio_chart,
    split_chart,
    time_axis,
    time_chart,
)
from console.ranges import parse_range
from console.views.common import is_fragment_request, render_page, server_header
from console.views.top import parse_table, range_context, statements_table
from readtier import (
    ConfigChange,
    PlanningState,
    ServerSeries,
    ServerSettings,
    Window,
    config_changes,
    history_coverage,
    recent_errors,
    server_series,
    server_settings,
    wait_profile_cap,
)

RECENT_ERRORS = 10

# (snapshot column, GUC, what it means in a DBA's words, where it does not exist)
SETTINGS: tuple[tuple[str, str, str, str], ...] = (
    (
        "entries_max",
        "pg_stat_statements.max",
        "How many distinct statements are tracked at once. When it is full the least used are evicted "
        "(dealloc rises) and their history breaks; changing it needs a restart.",
        "",
    ),
    (
        "track",
        "pg_stat_statements.track",
        "Which statements are counted: top (those clients send), all (also those run inside functions) or none.",
        "",
    ),
    (
        "track_utility",
        "pg_stat_statements.track_utility",
        "Whether utility commands (DDL, VACUUM, SET, COPY ...) are counted besides queries.",
        "",
    ),
    (
        "track_planning",
        "pg_stat_statements.track_planning",
        "Whether planning time is counted too. Off by default: it adds a second update of the statement's "
        "entry, which contends on very hot statements.",
        "needs PostgreSQL 13",
    ),
    (
        "save",
        "pg_stat_statements.save",
        "Whether the statistics survive a clean restart (written to disk at shutdown); off loses them at every "
        "restart.",
        "",
    ),
    (
        "sample_rate",
        "pg_stat_statements.sample_rate",
        "The fraction of statements counted (1 = all), to lower the cost of very hot statements.",
        "exists only in some forks such as Tantor Postgres, not in community PostgreSQL",
    ),
)


@dataclass(frozen=True)
class SettingRow:
    name: str
    value: str | None  # None: not available on this server
    meaning: str
    missing: str  # why it may not exist


def _short(setting: str) -> str:
    return setting.removeprefix("pg_stat_statements.")


def change_markers(changes: list[ConfigChange]) -> list[tuple[datetime, str]]:
    """One marker per snapshot that saw changes, naming each ("max 5000→10000; track_planning off→on")."""
    by_time: dict[datetime, list[str]] = {}
    for c in changes:
        by_time.setdefault(c.at, []).append(f"{_short(c.setting)} {c.before or 'n/a'}→{c.after or 'n/a'}")
    return [(at, "; ".join(labels)) for at, labels in by_time.items()]


def profile_over_cap_note(cap: int | None) -> str:
    """The waits chart's words when the latest snapshot did not read pg_wait_sampling's profile, past its cap."""
    if cap is None:
        return ""
    return (
        f"pg_wait_sampling's profile holds more than {cap:,} rows (COLLECTOR_WAIT_PROFILE_MAX_ROWS), one per "
        "backend, event and query since the server's start: the latest snapshot did not read it and sampled "
        "pg_stat_activity instead. pg_wait_sampling.profile_pid = off keeps one row per event and query."
    )


def server_charts(
    series: ServerSeries,
    markers: list[tuple[datetime, str]],
    settings: ServerSettings,
    window: Window,
    profile_over_cap: int | None = None,
) -> list[Chart]:
    """The six charts of the server page, from one ServerSeries."""
    points = series.points
    common = time_axis(points, (window.start, window.end), markers)
    states = {p.planning for p in points if p.planning is not None}
    if states and states <= {PlanningState.NOT_TRACKED}:
        planning_note, plan_label = " (planning not tracked)", "planning (not tracked)"
    elif PlanningState.NOT_TRACKED in states or PlanningState.PARTLY_TRACKED in states:
        planning_note, plan_label = " (planning not tracked for part of the range)", "planning"
    else:
        planning_note, plan_label = "", "planning"
    entries_max = settings.entries_max
    max_text = f"{entries_max:,}" if entries_max is not None else "unknown"
    version = settings.server_version_num
    dealloc_note = "dealloc needs PostgreSQL 14 (pg_stat_statements_info)" if version and version < 140000 else ""
    waits = [Series(ev, [p.active_sessions.get(ev, 0.0) if p.span_s else None for p in points]) for ev in series.events]
    return [
        split_chart(
            "chart-time",
            f"Database time per second, execution and planning{planning_note}",
            [p.exec_ms_per_s for p in points],
            [p.plan_ms_per_s for p in points],
            unit="ms/s",
            plan_label=plan_label,
            stacked=True,
            **common,
        ),
        calls_chart([p.calls_per_s for p in points], **common),
        Chart(
            "chart-dealloc",
            f"Deallocations per second (pg_stat_statements.max = {max_text})",
            time_chart(
                series=[Series("dealloc/s", [p.dealloc_per_s for p in points], "#b3261e")], unit="dealloc/s", **common
            ),
            dealloc_note,
        ),
        Chart(
            "chart-waits",
            "Wait events, average active sessions",
            time_chart(series=waits, unit="sessions", stacked=True, **common),
            " ".join(
                filter(
                    None,
                    [
                        "" if waits else "No wait event was sampled in this range.",
                        profile_over_cap_note(profile_over_cap),
                    ],
                )
            ),
        ),
        Chart(
            "chart-entries",
            "Entries against pg_stat_statements.max",
            time_chart(
                series=[
                    Series("entries (peak)", [p.entries_peak for p in points], EXEC_COLOR),
                    Series("pg_stat_statements.max", [p.entries_max for p in points], "#b3261e"),
                ],
                unit="entries",
                **common,
            ),
        ),
        hit_ratio_chart([p.hit_ratio for p in points], **common),
    ]


def setting_rows(settings: ServerSettings) -> list[SettingRow]:
    return [SettingRow(name, settings.text(column), meaning, missing) for column, name, meaning, missing in SETTINGS]


def server(request: HttpRequest, server_id: int) -> HttpResponse:
    """/servers/<id>/: the whole page, or for an htmx request from its table, the table alone."""
    server = server_for(request.user, server_id)
    tr = parse_range(request.GET, history_from=history_coverage(server.pk).data_from)
    state = parse_table(request.GET)
    base = reverse("server", args=[server.pk])
    context = {**server_header(server), **range_context(base, tr, state), **statements_table(server, tr, state, base)}
    if is_fragment_request(request):  # the table alone: no charts to read
        return render_page(request, "console/server.html", context, fragment="table")
    series = server_series(server_id=server.pk, window=tr.window)
    settings = server_settings(server_id=server.pk)
    changes = config_changes(server_id=server.pk, window=tr.window)
    context.update(
        series=series,
        charts=server_charts(
            series, change_markers(changes), settings, tr.window, wait_profile_cap(server_id=server.pk)
        ),
        changes=changes,
        settings=settings,
        setting_rows=setting_rows(settings),
        errors=recent_errors(server_id=server.pk, limit=RECENT_ERRORS),
        advice=recommendation_counts(server_ids=[server.pk])[server.pk],
    )
    return render_page(request, "console/server.html", context)


urlpatterns = [path("servers/<int:server_id>/", server, name="server")]
