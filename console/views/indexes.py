"""The Indexes page of a server: what the schema reading last found in each database (read, refused, capped),
the advisor's index advice for it, and its tables and indexes by size with their scans and writes over the range.
Nothing is dropped silently: a table's and index's list says how many there are beyond what it shows."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse

from accounts.access import server_for
from advisor.selectors import INDEX_RULES, recommendations
from console.ranges import parse_range
from console.views.common import range_links, render_page, server_header
from presentation.formatting import DASH, bytes_text, count_text, number_text
from readtier import IndexRow, TableRow, history_coverage, schema_overview

SHOWN = 100  # tables and indexes listed, the largest first
DEFINITION_CHARS = 160


@dataclass(frozen=True)
class TableLine:
    name: str
    database: str
    size: str
    live: str
    dead: str
    seq_scans: str
    index_scans: str
    writes: str  # inserts / updates (HOT) / deletes over the range
    index_writes_per_day: str
    indexes: int
    vacuumed: object
    analyzed: object


@dataclass(frozen=True)
class IndexLine:
    name: str
    table: str
    database: str
    definition: str
    size: str
    scans: str  # over the range
    scans_since: str
    since: object
    last_scan: object
    flags: list[str]
    invalid: bool


def _count(n: int | None) -> str:
    return DASH if n is None else count_text(n)


def table_line(t: TableRow) -> TableLine:
    writes = (
        DASH
        if t.n_tup_ins is None
        else f"{t.n_tup_ins:,} / {t.n_tup_upd:,} ({t.n_tup_hot_upd:,} HOT) / {t.n_tup_del:,}"
    )
    return TableLine(
        name=f"{t.schema_name}.{t.name}",
        database=t.database,
        size=bytes_text(t.size_bytes),
        live=count_text(t.n_live_tup),
        dead=count_text(t.n_dead_tup),
        seq_scans=_count(t.seq_scan),
        index_scans=_count(t.idx_scan),
        writes=writes,
        index_writes_per_day=number_text(t.per_day(t.index_writes), 0),
        indexes=t.indexes,
        vacuumed=t.last_vacuum_at,
        analyzed=t.last_analyze_at,
    )


def index_flags(i: IndexRow) -> list[str]:
    flags = []
    if i.is_primary:
        flags.append("primary key")
    elif i.is_unique:
        flags.append("unique")
    if i.constraint and not i.is_primary:
        flags.append(f"constraint {i.constraint}")
    if i.predicate_md5:
        flags.append("partial")
    if i.expressions_md5:
        flags.append("expression")
    if i.include_count:
        flags.append(f"{i.include_count} INCLUDE column{'s' if i.include_count > 1 else ''}")
    if not i.is_valid:
        flags.append("invalid")
    return flags


def index_line(i: IndexRow) -> IndexLine:
    return IndexLine(
        name=f"{i.schema_name}.{i.name}",
        table=i.table_name,
        database=i.database,
        definition=i.definition,
        size=bytes_text(i.size_bytes),
        scans=_count(i.scans),
        scans_since=count_text(i.scans_since),
        since=i.watched_since,
        last_scan=i.last_scan_at,
        flags=index_flags(i),
        invalid=not i.is_valid,
    )


def server_indexes(request: HttpRequest, server_id: int) -> HttpResponse:
    """/servers/<id>/indexes/: the whole page, or for an htmx request the range-dependent body."""
    server = server_for(request.user, server_id)
    tr = parse_range(request.GET, history_from=history_coverage(server.pk).data_from)
    base = reverse("server-indexes", args=[server.pk])
    overview = schema_overview(server_id=server.pk, window=tr.window, limit=SHOWN)
    advice = recommendations(server_ids=[server.pk], rules=INDEX_RULES)
    context = {
        **server_header(server),
        "range": tr,
        "ranges": range_links(base, tr, {}),
        "range_base": base,
        "range_keep": {},
        "statement_query": urlencode(tr.params),
        "overview": overview,
        "advice": advice,
        "tables": [table_line(t) for t in overview.tables],
        "tables_total": overview.tables_total,
        "indexes": [index_line(i) for i in overview.indexes],
        "indexes_total": overview.indexes_total,
        "shown": SHOWN,
        "definition_chars": DEFINITION_CHARS,
    }
    return render_page(request, "console/indexes.html", context, fragment="body")


urlpatterns = [path("servers/<int:server_id>/indexes/", server_indexes, name="server-indexes")]
