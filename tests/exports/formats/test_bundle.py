"""The bundle's files against each other and against the history: the PDF's text (pdftotext) shows the
selectors' figures, the gap and "not tracked"; the workbook and the CSV files hold exactly the JSON's values;
nothing of another organization, no secret and no monitoring password is in any file; scripts are escaped."""

from __future__ import annotations

import hashlib
import json
import zoneinfo

import jsonschema
import pytest

from exports.audit import audit_content
from exports.audit_data import audit_tables
from exports.formats.bundle import bundle_files
from exports.formats.csvfiles import cell_text
from exports.formats.pdf import audit_html
from presentation import formatting as fmt
from readtier import Page, top_statements
from tests.exports.export_world import CHANGE, MONITOR_PASSWORD, SCRIPT, SECRET, Bundle, add_findings, hostile_texts

pytestmark = pytest.mark.django_db
PARIS = "Europe/Paris"


@pytest.fixture
def exported(known_history):
    recs = add_findings(known_history)
    hostile = hostile_texts(known_history)
    content = audit_content(
        organization_id=known_history.organization.pk,
        server_ids=[known_history.server.pk, known_history.other.pk],
        window=known_history.week.window,
        requested_by="exp-dba",
        time_zone=PARIS,
    )
    return content, Bundle(bundle_files(content, ["pdf", "xlsx", "csv", "json"])), recs, hostile


def test_the_pdf_shows_the_history(known_history, exported, tmp_path):
    content, bundle, recs, _ = exported
    text = bundle.pdf_text(tmp_path)
    window = known_history.week.window
    top = top_statements(server_id=known_history.server.pk, window=window, order="calls", page=Page(1, 1)).rows[0]
    # The heaviest by calls, as the selector gives it, in the calls table of chapter 3.
    assert fmt.count_text(top.calls) in text and fmt.duration_text(top.total_ms) in text
    heaviest = content.servers[0].top["total"][0]
    said = f"{fmt.duration_text(heaviest.total_ms)} over {fmt.count_text(heaviest.calls)} calls"
    assert said in " ".join(text.split())
    # The outage, in the requester's zone, with its length.
    gap = fmt.span_text(*known_history.outage, zoneinfo.ZoneInfo(PARIS))
    assert f"{gap} (3 h)" in text
    assert "not tracked" in text and "Planning was not tracked on this server" in " ".join(text.split())
    assert fmt.count_text(content.calls) in text and fmt.duration_text(content.db_time_ms) in text
    # The finding with its exact change; the finding of before the window is not there.
    assert "Raise pg_stat_statements.max" in text and CHANGE in text and "needs a server restart" in text
    assert "Turn save on" not in text and "Turn track_planning on" not in text
    for title in ("Executive summary", "Findings", "Top statements", "Settings", "Collection coverage", "Methodology"):
        assert title in text
    assert bundle.files["audit.pdf"].count(b"/Subtype /Image") >= 1  # the evidence chart


def test_workbook_and_csv_files_hold_the_json(exported):
    _, bundle, _, _ = exported
    doc = bundle.doc
    jsonschema.Draft202012Validator(json.loads(bundle.files["audit-export.schema.json"])).validate(doc)
    tables = audit_tables(doc)  # what both are written from, rebuilt from the JSON file itself
    sheets, csvs = bundle.sheets(), bundle.csvs()
    assert list(sheets) == list(tables) and set(csvs) == set(tables)
    for name, table in tables.items():
        assert sheets[name][0] == table.header and csvs[name][0] == table.header
        assert sheets[name][1:] == table.rows, name  # numbers as numbers, booleans, None as empty
        assert csvs[name][1:] == [[cell_text(v) for v in row] for row in table.rows], name
    # And read as a consumer would: the figures of the JSON, "not tracked" where it is null.
    header, *rows = csvs["top_total"]
    first = dict(zip(header, rows[0], strict=True))
    top = doc["servers"][0]["top"]["total"][0]
    assert int(first["calls"]) == top["calls"] and float(first["exec_ms"]) == top["exec_ms"]
    assert first["plan_ms"] == "not tracked" and top["plan_ms"] is None
    xl = dict(zip(sheets["servers"][0], sheets["servers"][1], strict=True))
    assert xl["calls"] == doc["servers"][0]["summary"]["calls"] and xl["plan_ms"] == "not tracked"
    gaps = dict(zip(*csvs["gaps"][:2], strict=True))
    assert (gaps["start"], float(gaps["hours"])) == (doc["servers"][0]["coverage"]["gaps"][0]["start"], 3.0)
    sums = dict(line.split("  ")[::-1] for line in bundle.files["SHA256SUMS"].decode().splitlines())
    assert set(sums) == set(bundle.files) - {"SHA256SUMS"}
    assert all(hashlib.sha256(bundle.files[n]).hexdigest() == h for n, h in sums.items())


def test_no_other_organization_no_secret_in_any_file(known_history, exported, tmp_path):
    _, bundle, _, (password_id, _) = exported
    other = known_history.other
    for name, text in bundle.texts(tmp_path).items():
        assert other.name not in text and "rep-other" not in text, name
        assert SECRET not in text and MONITOR_PASSWORD not in text, name
    doc = bundle.doc
    assert {s["id"] for s in doc["servers"]} == {known_history.server.pk}
    assert all(
        r[0] == known_history.server.pk
        for t in audit_tables(doc).values()
        if t.header[0] == "server_id"
        for r in t.rows
    )
    redacted = next(r for r in doc["servers"][0]["top"]["total"] if r["statement_id"] == password_id)
    assert "PASSWORD '<redacted>'" in redacted["query"]
    header, *rows = bundle.csvs()["top_total"]
    assert any("PASSWORD '<redacted>'" in r[header.index("query")] for r in rows)
    assert "<redacted>" in bundle.pdf_text(tmp_path)


def test_a_script_in_a_query_is_escaped_in_the_pdf(exported):
    content, bundle, _, (_, script_id) = exported
    html = audit_html(content)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
    row = next(r for r in bundle.doc["servers"][0]["top"]["total"] if r["statement_id"] == script_id)
    assert SCRIPT in row["query"]  # the data keeps it as it is (data is not markup)


def test_a_csv_cell_is_never_a_formula_and_an_empty_one_stays_empty():
    for hostile in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1+1", "\r=1+1"):
        assert cell_text(hostile) == "'" + hostile
    assert cell_text("") == "" and cell_text(None) == "" and cell_text("SELECT 1") == "SELECT 1"
