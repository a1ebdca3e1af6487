"""The audit's data: one JSON document written from the content (raw numbers: milliseconds to 3 decimals,
shares as fractions, times as ISO 8601 in UTC, null where planning was not tracked), and the canonical
tables flattened from that document, which the XLSX sheets and the CSV files are both written from — so
the three formats cannot disagree. Its JSON Schema is exports/schemas/audit-export.schema.json.

One module over 400 lines: the JSON document and the tables flattened from it are written together, so that the
three formats built from them cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from collectors.public import shown
from exports.audit import TOP_ORDERS, AuditContent, AuditFinding, ServerAudit
from presentation.formatting import NOT_TRACKED
from readtier import StatementTotals

FORMAT = "pgconsole-audit-export"
VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "audit-export.schema.json"
# Columns that hold planning figures: empty where planning was not tracked reads "not tracked" (never 0).
PLANNING_COLUMNS = ("plans", "plan_ms", "mean_plan_ms", "plan_share")


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat()


def _ms(value: float | None) -> float | None:
    """Milliseconds to the microsecond the history stores."""
    return None if value is None else round(float(value), 3)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


STATEMENT_FIELDS = (
    "rank",
    "statement_id",
    "queryid",
    "database",
    "user",
    "toplevel",
    "calls",
    "plans",
    "exec_ms",
    "plan_ms",
    "total_ms",
    "mean_exec_ms",
    "mean_plan_ms",
    "plan_share",
    "rows",
    "shared_blks_hit",
    "shared_blks_read",
    "hit_ratio",
    "temp_blks",
    "io_ms",
    "wal_bytes",
    "text_status",
    "query",
    "query_truncated",
)


def _statement(rank: int, r: StatementTotals, cut: frozenset[int]) -> dict:
    return {
        "rank": rank,
        "statement_id": r.statement_id,
        "queryid": r.queryid,
        "database": r.database,
        "user": r.user,
        "toplevel": r.toplevel,
        "calls": r.calls,
        "plans": r.plans,
        "exec_ms": _ms(r.exec_ms),
        "plan_ms": _ms(r.plan_ms),
        "total_ms": _ms(r.total_ms),
        "mean_exec_ms": _ms(r.mean_exec_ms),
        "mean_plan_ms": _ms(r.mean_plan_ms),
        "plan_share": _ratio(r.plan_share),
        "rows": r.rows,
        "shared_blks_hit": r.shared_blks_hit,
        "shared_blks_read": r.shared_blks_read,
        "hit_ratio": _ratio(r.hit_ratio),
        "temp_blks": r.temp_blks,
        "io_ms": _ms(r.io_ms),
        "wal_bytes": r.wal_bytes,
        "text_status": r.text_status,
        "query": r.query,
        "query_truncated": r.statement_id in cut,
    }


def _server(s: ServerAudit) -> dict:
    w, c = s.summary, s.coverage
    return {
        "id": s.server_id,
        "name": s.name,
        "server_version": s.version,
        "planning": s.planning_state,
        "statement_count": s.statement_count,
        "settings": {
            "as_of": _iso(s.settings.as_of),
            "in_window": s.settings.in_window,
            "values": [{"setting": n, "value": v} for n, v in s.settings.values],
        },
        "setting_changes": [
            {"at": _iso(ch.at), "setting": ch.setting, "before": ch.before, "after": ch.after} for ch in s.changes
        ],
        "plan_changes": [
            {
                "at": _iso(pc.at),
                "statement_id": pc.statement_id,
                "queryid": pc.queryid,
                "before": list(pc.before),
                "after": list(pc.after),
                "described": pc.described,
            }
            for pc in s.plan_changes
        ],
        "summary": {
            "snapshots": w.snapshots,
            "span_s": _ms(w.span_s),
            "calls": w.calls,
            "exec_ms": _ms(w.exec_ms),
            "plan_ms": _ms(w.plan_ms),
            "db_time_ms": _ms(w.db_time_ms),
            "plan_share": _ratio(w.plan_share),
            "dealloc": w.dealloc,
            "dealloc_per_s": _ms(w.dealloc_per_s),
            "entries_peak": w.entries_peak,
            "entries_max": w.entries_max,
        },
        "coverage": {
            "history_from": _iso(c.history_from),
            "expected_s": _ms(c.expected_s),
            "covered_s": _ms(c.covered_s),
            "share": _ratio(c.share),
            "resolution": c.resolution,
            "gap_hours": _ms(c.gap_hours),
            "peak_dealloc_per_s": _ms(c.peak_dealloc_per_s),
            "error_count": c.error_count,
            "gaps": [{"start": _iso(g.start), "end": _iso(g.end), "hours": _ms(g.hours)} for g in c.gaps],
            # Bundles leave the console: the console's sentence for each failure, never libpq's words
            "errors": [
                {
                    "at": _iso(e.at),
                    "error_class": e.error_class,
                    "message": shown(e.error_class, e.message, detail=False),
                }
                for e in c.errors
            ],
        },
        "top": {
            order: [_statement(i, r, s.cut_texts) for i, r in enumerate(s.top[order], start=1)] for order in TOP_ORDERS
        },
    }


def _finding(f: AuditFinding) -> dict:
    r = f.rec
    return {
        "id": r.id,
        "server_id": r.server_id,
        "server": r.server,
        "rule": r.rule,
        "subject": r.subject,
        "severity": r.severity,
        "status": r.status,
        "state_at_end": f.state_at_end,
        "title": r.title,
        "explanation": r.explanation,
        "change": {"text": r.change_text, "apply": r.change_apply} if r.change_text else None,
        "effect": r.effect,
        "cost": r.cost,
        "evidence": r.evidence,
        "references": list(r.references),
        "first_seen_at": _iso(r.first_seen_at),
        "opened_at": _iso(r.opened_at),
        "last_seen_at": _iso(r.last_seen_at),
        "acknowledged_at": _iso(r.acknowledged_at),
        "resolved_at": _iso(r.resolved_at),
        "times_opened": r.times_opened,
    }


def audit_json(c: AuditContent) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "organization": {"id": c.organization_id, "name": c.organization},
        "window": {"start": _iso(c.window.start), "end": _iso(c.window.end)},
        "generated_at": _iso(c.generated_at),
        "requested_by": c.requested_by,
        "time_zone": c.time_zone,
        "summary": {
            "servers": len(c.servers),
            "calls": c.calls,
            "exec_ms": _ms(c.exec_ms),
            "plan_ms": _ms(c.plan_ms),
            "db_time_ms": _ms(c.db_time_ms),
            "gap_hours": _ms(c.gap_hours),
            "collection_errors": c.collection_errors,
            "findings": c.findings_by_severity(),
            "planning_not_tracked": c.not_tracked,
        },
        "servers": [_server(s) for s in c.servers],
        "findings": [_finding(f) for f in c.findings],
    }


# -- the canonical tables -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    name: str
    header: list[str]
    rows: list[list]  # JSON values (None or "": empty), "not tracked" in planning columns where it was not tracked


def _planning_cells(header: list[str], row: list) -> list:
    """Planning cells of a row whose plan_ms is null (the selectors' "not tracked") read "not tracked"."""
    if "plan_ms" not in header or row[header.index("plan_ms")] is not None:
        return row
    return [NOT_TRACKED if h in PLANNING_COLUMNS and v is None else v for h, v in zip(header, row, strict=True)]


def _cell(column: str, value):
    # A queryid is a 64-bit integer; a spreadsheet keeps 15 significant digits: in the tables it is text.
    return str(value) if column == "queryid" and value is not None else value


def _table(name: str, header: list[str], rows: list[list]) -> Table:
    # An empty text is an empty cell, as a workbook reads it back (None).
    return Table(name, header, [_planning_cells(header, [None if v == "" else v for v in r]) for r in rows])


SUMMARY_FIELDS = (
    "snapshots",
    "span_s",
    "calls",
    "exec_ms",
    "plan_ms",
    "db_time_ms",
    "plan_share",
    "dealloc",
    "dealloc_per_s",
    "entries_peak",
    "entries_max",
)
COVERAGE_FIELDS = (
    "history_from",
    "expected_s",
    "covered_s",
    "share",
    "resolution",
    "gap_hours",
    "peak_dealloc_per_s",
    "error_count",
)
FINDING_FIELDS = (
    "id",
    "server_id",
    "server",
    "rule",
    "severity",
    "status",
    "state_at_end",
    "subject",
    "title",
    "explanation",
    "change_text",
    "change_apply",
    "effect",
    "cost",
    "references",
    "first_seen_at",
    "opened_at",
    "last_seen_at",
    "acknowledged_at",
    "resolved_at",
    "times_opened",
)


def _finding_row(f: dict) -> list:
    change = f["change"] or {}
    flat = {
        **f,
        "change_text": change.get("text"),
        "change_apply": change.get("apply"),
        "references": "\n".join(f["references"]),
    }
    return [flat[k] for k in FINDING_FIELDS]


def audit_tables(doc: dict) -> dict[str, Table]:
    """The document as tables (name -> Table), in the order the workbook lists its sheets."""
    servers = doc["servers"]
    ids = [(s["id"], s["name"]) for s in servers]
    about = [
        ["format", f"{doc['format']} {doc['version']}"],
        ["organization", doc["organization"]["name"]],
        ["organization_id", doc["organization"]["id"]],
        ["window_start", doc["window"]["start"]],
        ["window_end", doc["window"]["end"]],
        ["generated_at", doc["generated_at"]],
        ["requested_by", doc["requested_by"]],
        ["time_zone", doc["time_zone"]],
        *[[k, v] for k, v in doc["summary"].items() if not isinstance(v, dict | list)],
        *[[f"findings_{k}", v] for k, v in doc["summary"]["findings"].items()],
        ["planning_not_tracked", ", ".join(doc["summary"]["planning_not_tracked"])],
    ]
    tables = [
        _table("export", ["field", "value"], about),
        _table(
            "servers",
            ["server_id", "server", "server_version", "planning", "statement_count", *SUMMARY_FIELDS],
            [
                [
                    s["id"],
                    s["name"],
                    s["server_version"],
                    s["planning"],
                    s["statement_count"],
                    *[s["summary"][k] for k in SUMMARY_FIELDS],
                ]
                for s in servers
            ],
        ),
        _table(
            "settings",
            ["server_id", "server", "as_of", "in_window", "setting", "value"],
            [
                [i, n, s["settings"]["as_of"], s["settings"]["in_window"], v["setting"], v["value"]]
                for (i, n), s in zip(ids, servers, strict=True)
                for v in s["settings"]["values"]
            ],
        ),
        _table(
            "setting_changes",
            ["server_id", "server", "at", "setting", "before", "after"],
            [
                [i, n, ch["at"], ch["setting"], ch["before"], ch["after"]]
                for (i, n), s in zip(ids, servers, strict=True)
                for ch in s["setting_changes"]
            ],
        ),
        _table(
            "plan_changes",
            ["server_id", "server", "at", "statement_id", "queryid", "change"],
            [
                [i, n, pc["at"], pc["statement_id"], _cell("queryid", pc["queryid"]), pc["described"]]
                for (i, n), s in zip(ids, servers, strict=True)
                for pc in s["plan_changes"]
            ],
        ),
        _table(
            "coverage",
            ["server_id", "server", *COVERAGE_FIELDS],
            [[s["id"], s["name"], *[s["coverage"][k] for k in COVERAGE_FIELDS]] for s in servers],
        ),
        _table(
            "gaps",
            ["server_id", "server", "start", "end", "hours"],
            [
                [i, n, g["start"], g["end"], g["hours"]]
                for (i, n), s in zip(ids, servers, strict=True)
                for g in s["coverage"]["gaps"]
            ],
        ),
        _table(
            "collection_errors",
            ["server_id", "server", "at", "error_class", "message"],
            [
                [i, n, e["at"], e["error_class"], e["message"]]
                for (i, n), s in zip(ids, servers, strict=True)
                for e in s["coverage"]["errors"]
            ],
        ),
        *[
            _table(
                f"top_{order}",
                ["server_id", "server", *STATEMENT_FIELDS],
                [
                    [i, n, *[_cell(k, r[k]) for k in STATEMENT_FIELDS]]
                    for (i, n), s in zip(ids, servers, strict=True)
                    for r in s["top"][order]
                ],
            )
            for order in TOP_ORDERS
        ],
        _table("findings", list(FINDING_FIELDS), [_finding_row(f) for f in doc["findings"]]),
        _table(
            "evidence",
            ["finding_id", "server", "series", "unit", "at", "value"],
            [
                [f["id"], f["server"], e.get("label", ""), e.get("unit", ""), p[0], p[1]]
                for f in doc["findings"]
                for e in f["evidence"]
                for p in e.get("points") or []
            ],
        ),
    ]
    return {t.name: t for t in tables}
