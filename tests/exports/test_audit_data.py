"""audit_data: the audit's content as one JSON document (times in UTC, milliseconds to 3 decimals, shares to 6,
null where unknown or where planning was not tracked) and that document as the tables the workbook and the CSV files
are written from ("not tracked" in planning cells, queryids as text, empty texts as empty cells). Shown on content
built here by hand, with the cases the known history never has (test_audit.py checks its figures against it)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import jsonschema

from advisor.selectors import RecommendationRow
from exports.audit import AuditContent, AuditFinding, ServerAudit, SettingsAt
from exports.audit_data import SCHEMA_PATH, audit_json, audit_tables
from readtier import Planning, ServerSeries, StatementTotals, Window
from readtier.coverage import CollectionCoverage, Gap, WindowSummary
from readtier.server import ConfigChange, RecentError

PARIS = ZoneInfo("Europe/Paris")
W = Window(datetime(2026, 11, 2, 9, 0, tzinfo=PARIS), datetime(2026, 11, 9, 9, 0, tzinfo=PARIS))  # UTC+1
QUERYID = -9_123_456_789_012_345_678  # more digits than a spreadsheet keeps


def statement(sid: int, plan_ms: float | None, query: str | None = "SELECT 1", queryid: int = QUERYID):
    plans = None if plan_ms is None else 2
    return StatementTotals(
        sid, queryid, "app", "web", True, query, "stored", 3, plans, 100.0, plan_ms, 7, 2, 1, 0, 0.0, 0
    )


def server(sid: int, name: str, plan_ms: float | None, *, history: bool = True) -> ServerAudit:
    planning = "tracked" if plan_ms is not None else "not tracked"
    summary = WindowSummary(W, 3, 1800.0004, planning, 9, 1234.56789, plan_ms, None, None, 120, 5000)
    gap = Gap(datetime(2026, 11, 3, 1, 0, tzinfo=UTC), datetime(2026, 11, 3, 2, 20, tzinfo=UTC))
    errors = [RecentError(datetime(2026, 11, 4, 12, 0, tzinfo=PARIS), "timeout", "took too long")]
    coverage = CollectionCoverage(
        W, W.start if history else None, 604800.0, 600000.0, "hourly", [gap] if history else [], None, errors, 4
    )
    rows = [statement(1, plan_ms), statement(2, None, query="")]
    settings = SettingsAt(None, False, [("pg_stat_statements.max", 5000)])
    changes = [ConfigChange(W.start + timedelta(hours=1), "pg_stat_statements.max", "5000", "10000")]
    planned = Planning(1800.0 if plan_ms is not None else 0.0, 1800.0)
    top = {"total": rows, "exec": rows, "plan": [], "calls": rows[::-1]}
    series = ServerSeries(sid, W, "hourly", [], [])
    return ServerAudit(sid, name, settings, changes, summary, coverage, planned, 2, top, frozenset({2}), series)


def finding() -> AuditFinding:
    at = datetime(2026, 11, 5, 10, 0, tzinfo=UTC)
    points = [[at.isoformat(), 1.5], [at.isoformat(), None]]
    texts = ["pgss_max", "server", "warning", "open", "Raise max", "because", "", "", "fewer", "memory"]
    evidence = [{"label": "deallocations", "unit": "dealloc/s", "points": points}]
    references = ["doc one", "https://example.org/two"]
    return AuditFinding(
        RecommendationRow(5, 7, "db-a", 1, "acme", *texts, evidence, references, at, at, at, *[None] * 4, 1), "active"
    )


def content() -> AuditContent:
    servers = [server(7, "db-a", None), server(8, "db-b", 12.3456789, history=False)]
    return AuditContent(
        1, "acme", W, datetime(2026, 11, 9, 9, 30, tzinfo=PARIS), None, "Europe/Paris", servers, [finding()]
    )


def test_times_are_utc_and_figures_are_rounded_to_what_the_history_stores():
    doc = audit_json(content())
    assert doc["window"] == {"start": "2026-11-02T08:00:00+00:00", "end": "2026-11-09T08:00:00+00:00"}
    a = doc["servers"][0]
    assert a["coverage"]["errors"][0]["at"] == "2026-11-04T11:00:00+00:00" and a["settings"]["as_of"] is None
    assert (a["summary"]["span_s"], a["summary"]["exec_ms"], a["coverage"]["share"]) == (1800.0, 1234.568, 0.992063)
    assert a["coverage"]["gaps"][0]["hours"] == 1.333 and a["coverage"]["gap_hours"] == 1.333
    top = a["top"]["total"][0]
    assert (top["mean_exec_ms"], top["hit_ratio"], top["total_ms"], top["queryid"]) == (
        33.333,
        0.666667,
        100.0,
        QUERYID,
    )


def test_missing_values_are_null_and_planning_is_null_where_not_tracked():
    doc = audit_json(content())
    a, b = doc["servers"]
    assert (a["summary"]["plan_ms"], a["summary"]["plan_share"], a["summary"]["dealloc_per_s"]) == (None, None, None)
    assert (b["summary"]["plan_ms"], b["summary"]["db_time_ms"]) == (12.346, 1246.914)
    assert (b["coverage"]["history_from"], b["coverage"]["gaps"], b["coverage"]["gap_hours"]) == (None, [], 0)
    assert a["top"]["total"][1]["plan_ms"] is None and a["top"]["total"][1]["query_truncated"] is True
    summary = [doc["summary"][k] for k in ("servers", "calls", "exec_ms", "plan_ms", "db_time_ms", "gap_hours")]
    assert summary == [2, 18, 2469.136, 12.346, 2481.481, 1.333]  # planning: of the servers that tracked it
    assert (doc["summary"]["collection_errors"], doc["summary"]["planning_not_tracked"]) == (8, ["db-a"])
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)


def test_tables_say_not_tracked_in_planning_cells_and_keep_queryids_as_text():
    t = audit_tables(audit_json(content()))
    top = [dict(zip(t["top_total"].header, r, strict=True)) for r in t["top_total"].rows]
    assert [(r["server"], r["statement_id"]) for r in top] == [("db-a", 1), ("db-a", 2), ("db-b", 1), ("db-b", 2)]
    assert {r["queryid"] for r in top} == {str(QUERYID)}
    assert [r["plan_ms"] for r in top] == ["not tracked", "not tracked", 12.346, "not tracked"]
    assert top[2]["mean_plan_ms"] == 6.173 and top[1]["query"] is None  # an empty text is an empty cell
    servers = [dict(zip(t["servers"].header, r, strict=True)) for r in t["servers"].rows]
    assert [(s["plan_ms"], s["plan_share"], s["dealloc"]) for s in servers][0] == ("not tracked", "not tracked", None)
    assert [(s["plan_ms"], s["plan_share"], s["dealloc"]) for s in servers][1] == (12.346, 0.009901, None)


def test_every_list_becomes_rows_of_its_server_and_findings_are_flattened():
    t = audit_tables(audit_json(content()))
    assert t["gaps"].rows == [[7, "db-a", "2026-11-03T01:00:00+00:00", "2026-11-03T02:20:00+00:00", 1.333]]
    assert [r[:2] for r in t["collection_errors"].rows] == [[7, "db-a"], [8, "db-b"]]
    assert t["setting_changes"].rows[1][:3] == [8, "db-b", "2026-11-02T09:00:00+00:00"]
    assert t["setting_changes"].rows[1][3:] == ["pg_stat_statements.max", "5000", "10000"]
    assert t["settings"].rows[0] == [7, "db-a", None, False, "pg_stat_statements.max", 5000]
    (row,) = [dict(zip(t["findings"].header, r, strict=True)) for r in t["findings"].rows]
    assert (row["change_text"], row["change_apply"]) == (None, None)  # no change to make
    assert row["references"] == "doc one\nhttps://example.org/two"
    assert t["evidence"].rows == [
        [5, "db-a", "deallocations", "dealloc/s", "2026-11-05T10:00:00+00:00", 1.5],
        [5, "db-a", "deallocations", "dealloc/s", "2026-11-05T10:00:00+00:00", None],
    ]
    about = dict(t["export"].rows)
    assert (about["format"], about["findings_warning"], about["findings_critical"]) == (
        "pgconsole-audit-export 1",
        1,
        0,
    )
    assert about["planning_not_tracked"] == "db-a"
    assert about["requested_by"] is None and about["time_zone"] == "Europe/Paris"


def test_plan_changes_are_in_the_document_and_a_table_of_their_own():
    from readtier import PlanChangeRow

    at = datetime(2026, 11, 4, 14, 2, tzinfo=PARIS)
    change = PlanChangeRow(
        1,
        at,
        ["Index Scan using orders_customer_idx on orders"],
        ["Seq Scan on orders"],
        "a" * 32,
        "b" * 32,
        queryid=QUERYID,
    )
    a, b = content().servers
    doc = audit_json(
        AuditContent(
            1,
            "acme",
            W,
            datetime(2026, 11, 9, 9, 30, tzinfo=PARIS),
            None,
            "Europe/Paris",
            [replace(a, plan_changes=[change]), b],
            [finding()],
        )
    )
    said = "the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders"
    assert doc["servers"][0]["plan_changes"] == [
        {
            "at": "2026-11-04T13:02:00+00:00",
            "statement_id": 1,
            "queryid": QUERYID,
            "before": ["Index Scan using orders_customer_idx on orders"],
            "after": ["Seq Scan on orders"],
            "described": said,
        }
    ]
    assert doc["servers"][1]["plan_changes"] == []
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    t = audit_tables(doc)
    assert t["plan_changes"].rows == [[7, "db-a", "2026-11-04T13:02:00+00:00", 1, str(QUERYID), said]]
