"""/api/v1/ tables and indexes of a server: what the schema reading last found in each database, and each table
and index with its scans and writes over a window, from the selector the Indexes page reads (the largest first,
paged). Why a database was not read reads as on the page: libpq's words for console staff, the console's sentence
for everyone else (collectors.schema.reading.database_error)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from accounts.access import sees_connection_detail, server_for
from collectors.public import database_error
from console.api.common import (
    PAGE_PARAMETERS,
    TABLE_RENDERERS,
    WINDOW_PARAMETERS,
    api,
    page_of,
    page_schema,
    window_params,
)
from readtier import IndexRow, TableRow, schema_overview


class DatabaseOut(serializers.Serializer):
    name = serializers.CharField()
    ok = serializers.BooleanField(help_text="read at the last reading (false: why not is in error)")
    read_at = serializers.DateTimeField(allow_null=True, help_text="its last reading")
    complete = serializers.BooleanField(
        help_text="every table and index read (false: the reading's cap kept the largest)"
    )
    tables = serializers.IntegerField()
    tables_total = serializers.IntegerField()
    indexes = serializers.IntegerField()
    indexes_total = serializers.IntegerField()
    code = serializers.CharField(
        allow_blank=True,
        help_text="why not read: privilege, time, cap (tables), or a failure's class (unreachable, auth_failed, ...)",
    )
    error = serializers.CharField(
        allow_blank=True,
        help_text="why not read, in the console's words; console staff read libpq's or the server's own instead",
    )


class TableOut(serializers.Serializer):
    database = serializers.CharField()
    schema_name = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField(help_text="pg_class.relkind: r table, p partitioned, m materialized view")
    partition = serializers.BooleanField()
    size_bytes = serializers.IntegerField(help_text="its main fork")
    n_live_tup = serializers.IntegerField()
    n_dead_tup = serializers.IntegerField()
    last_vacuum_at = serializers.DateTimeField(allow_null=True)
    last_analyze_at = serializers.DateTimeField(allow_null=True)
    seq_scan = serializers.IntegerField(allow_null=True, help_text="over the window; null: no reading in it")
    idx_scan = serializers.IntegerField(allow_null=True)
    n_tup_ins = serializers.IntegerField(allow_null=True)
    n_tup_upd = serializers.IntegerField(allow_null=True)
    n_tup_hot_upd = serializers.IntegerField(allow_null=True)
    n_tup_del = serializers.IntegerField(allow_null=True)
    index_writes_per_day = serializers.FloatField(
        allow_null=True, help_text="inserts and non-HOT updates a day, each written to every index of the table"
    )
    indexes = serializers.IntegerField()


class IndexOut(serializers.Serializer):
    database = serializers.CharField()
    schema_name = serializers.CharField()
    name = serializers.CharField()
    table_name = serializers.CharField()
    definition = serializers.CharField(help_text="pg_get_indexdef, redacted as query texts are")
    method = serializers.CharField()
    key_columns = serializers.ListField(child=serializers.CharField(allow_null=True))
    is_unique = serializers.BooleanField()
    is_primary = serializers.BooleanField()
    constraint = serializers.CharField(allow_blank=True)
    is_valid = serializers.BooleanField()
    partial = serializers.BooleanField()
    size_bytes = serializers.IntegerField()
    scans = serializers.IntegerField(allow_null=True, help_text="over the window; null: no reading in it")
    scans_since = serializers.IntegerField(help_text="since watched_since, without a statistics reset")
    watched_since = serializers.DateTimeField()
    last_scan_at = serializers.DateTimeField(allow_null=True)


ABOUT = {
    "read_at": serializers.DateTimeField(allow_null=True, help_text="the last schema reading; null: never read"),
    "databases": DatabaseOut(many=True),
    "databases_total": serializers.IntegerField(
        allow_null=True,
        help_text="the server's databases when more than a reading takes (databases_cap); null: every one is taken",
    ),
    "databases_cap": serializers.IntegerField(
        allow_null=True,
        help_text="databases a reading takes (COLLECTOR_SCHEMA_MAX_DATABASES): the monitored one, then the first "
        "others by name; null: every one is taken",
    ),
    "databases_not_read": serializers.ListField(
        child=serializers.CharField(), help_text="the first few of the databases past the cap, by name"
    ),
}
TablePage = page_schema(TableOut, "TablePage", **ABOUT)
IndexPage = page_schema(IndexOut, "IndexPage", **ABOUT)


def _table(t: TableRow) -> dict:
    return {f: getattr(t, f) for f in TableOut().fields if f != "index_writes_per_day"} | {
        "index_writes_per_day": t.per_day(t.index_writes)
    }


def _index(i: IndexRow) -> dict:
    return {f: getattr(i, f) for f in IndexOut().fields if f not in ("partial", "watched_since")} | {
        "partial": bool(i.predicate_md5),
        "watched_since": i.watched_since,
    }


def _databases(overview, *, detail: bool) -> list[dict]:
    return [
        {f: getattr(d, f) for f in DatabaseOut().fields} | {"error": database_error(d.code, d.error, detail=detail)}
        for d in overview.databases
    ]


def _capped(overview) -> dict:
    capped = overview.capped
    return {
        "databases_total": capped.total if capped else None,
        "databases_cap": capped.cap if capped else None,
        "databases_not_read": capped.named if capped else [],
    }


def _paged(request, server_id: int, rows_of, out):
    """A page of the server's tables or indexes over the request's window, with each database's last reading."""
    server = server_for(request.user, server_id)
    overview = schema_overview(server_id=server.pk, window=window_params(request))
    response = page_of(rows_of(overview), request, out=out)
    detail = sees_connection_detail(request.user)
    databases = _databases(overview, detail=detail)
    response.data = {**response.data, "read_at": overview.read_at, "databases": databases, **_capped(overview)}
    return response


class Tables(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="server_tables",
        parameters=[*WINDOW_PARAMETERS, *PAGE_PARAMETERS],
        responses=TablePage,
        description="The server's tables, the largest first, with their scans and writes over the window.",
    )
    def get(self, request, server_id: int):
        return _paged(request, server_id, lambda overview: overview.tables, _table)


class Indexes(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="server_indexes",
        parameters=[*WINDOW_PARAMETERS, *PAGE_PARAMETERS],
        responses=IndexPage,
        description="The server's indexes, the largest first, with their scans over the window and since watched.",
    )
    def get(self, request, server_id: int):
        return _paged(request, server_id, lambda overview: overview.indexes, _index)


urlpatterns = [
    path("servers/<int:server_id>/tables/", api(Tables.as_view()), name="api-server-tables"),
    path("servers/<int:server_id>/indexes/", api(Indexes.as_view()), name="api-server-indexes"),
]
