"""The audit's content and its JSON against the selectors over the known history (the figures the console
and the API show), the findings a window holds, and the JSON against its published schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from exports.audit import TOP_N, audit_content
from exports.audit_data import SCHEMA_PATH, audit_json
from readtier import Page, top_statements
from readtier.coverage import collection_coverage, window_summary
from tests.exports.export_world import SECRET, add_findings, hostile_texts

pytestmark = pytest.mark.django_db


def _content(history, **kwargs):
    return audit_content(
        organization_id=history.organization.pk,
        server_ids=[history.server.pk, history.other.pk],
        window=history.week.window,
        **kwargs,
    )


def test_json_figures_are_the_selectors_figures(known_history):
    window, sid = known_history.week.window, known_history.server.pk
    doc = audit_json(_content(known_history))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    # Another organization's server is never read, even when its id is asked for.
    assert [s["name"] for s in doc["servers"]] == ["rep-main"]
    server = doc["servers"][0]
    for order in ("total", "exec", "calls"):
        expected = top_statements(server_id=sid, window=window, order=order, page=Page(1, TOP_N)).rows
        got = server["top"][order]
        assert [r["statement_id"] for r in got] == [r.statement_id for r in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert mine["calls"] == theirs.calls and mine["rows"] == theirs.rows
            assert mine["exec_ms"] == round(theirs.exec_ms, 3) == theirs.exec_ms  # microseconds: exact
            assert mine["plan_ms"] is None and mine["plans"] is None and mine["plan_share"] is None
    # Planning was not tracked: no ranking by it (an empty list), and "not tracked" said, never 0.
    assert server["top"]["plan"] == [] and server["planning"] == "not tracked"
    summary = window_summary(server_id=sid, window=window)
    assert server["summary"]["calls"] == summary.calls and server["summary"]["exec_ms"] == round(summary.exec_ms, 3)
    assert server["summary"]["plan_ms"] is None and doc["summary"]["plan_ms"] is None
    assert doc["summary"]["planning_not_tracked"] == ["rep-main"]
    coverage = collection_coverage(server_id=sid, window=window)
    assert [(g["start"], g["end"]) for g in server["coverage"]["gaps"]] == [
        (known_history.outage[0].isoformat(), known_history.outage[1].isoformat())
    ]
    assert server["coverage"]["share"] == round(coverage.share, 6) and server["coverage"]["gap_hours"] == 3
    assert server["statement_count"] == top_statements(server_id=sid, window=window).total_count
    settings = {v["setting"]: v["value"] for v in server["settings"]["values"]}
    assert server["settings"]["in_window"] is True and settings["pg_stat_statements.track_planning"] is False


def test_findings_are_those_active_in_the_window(known_history):
    recs = add_findings(known_history)
    doc = audit_json(_content(known_history))
    found = {f["id"]: f for f in doc["findings"]}
    assert set(found) == {recs["inside"].pk, recs["across"].pk}
    assert [f["severity"] for f in doc["findings"]] == ["critical", "warning"]  # most severe first
    assert found[recs["inside"].pk]["state_at_end"] == "active"
    assert found[recs["across"].pk]["state_at_end"] == "resolved"
    assert found[recs["inside"].pk]["change"] == {"text": recs["inside"].change_text, "apply": "restart"}
    assert doc["summary"]["findings"] == {"critical": 1, "warning": 1, "info": 0}
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)


def test_query_texts_are_redacted_once_for_every_format(known_history):
    password_id, script_id = hostile_texts(known_history)
    content = _content(known_history)
    rows = {r.statement_id: r for r in content.servers[0].top["total"]}
    assert SECRET not in rows[password_id].query and "PASSWORD '<redacted>'" in rows[password_id].query
    assert "<script>" in rows[script_id].query  # data stays data: escaping is each renderer's job
    assert SECRET not in json.dumps(audit_json(content))
