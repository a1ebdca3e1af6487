"""Every sentence of the audit PDF against its inputs, over the known history (its first snapshot at the start of
week W-1, a 3-hour outage in week W): a window before any history, a window in which the history begins, the
full week with its outage, and a server on a release without the deallocation counter. The PDF is read back with
pdftotext for the empty case (what a consultant gets for a client added yesterday)."""

from __future__ import annotations

import dataclasses
import html as htmllib
import re
import subprocess
import zoneinfo
from datetime import timedelta

import pytest

from exports.audit import audit_content
from exports.formats.pdf import _server_view, audit_html, pdf_bytes
from presentation import formatting as fmt
from readtier import Window

pytestmark = pytest.mark.django_db
PARIS = zoneinfo.ZoneInfo("Europe/Paris")


def audit(h, window: Window):
    return audit_content(
        organization_id=h.organization.pk,
        server_ids=[h.server.pk],
        window=window,
        requested_by="exp-dba",
        time_zone="Europe/Paris",
    )


def text_of(content) -> str:
    """The report's words, tags dropped and spaces folded, as a reader takes them in."""
    body = audit_html(content)
    body = body[body.index("<body>") :]
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def first_snapshot(h):
    return h.week.previous().window.start


def test_a_window_before_any_history_claims_nothing(known_history, tmp_path):
    start = first_snapshot(known_history)
    content = audit(known_history, Window(start - timedelta(days=8), start - timedelta(days=1)))
    text = text_of(content)
    assert "No snapshot of rep-main was taken in this window: there are no figures to report for it" in text
    for claim in (
        "Every hour of the window has snapshots",
        "no gap of an hour",
        "The advisor raised nothing",
        "ran 0 statement calls",
        "Every hour since",
    ):
        assert claim not in text, claim
    assert "The advisor had no history of these servers in the window to judge them by." in text
    assert "No history for this server in the window." in text and "0 snapshots read." in text
    # The figures say there is no data, never 0 ms, 0 calls, 0 h or "not tracked".
    assert "no data database time" in text and "no data calls" in text and "no data without collection" in text
    row = text[text.index("Coverage rep-main") :]
    assert row.startswith("Coverage rep-main 17.10 no data no data no data no data no data no data")
    # The PDF itself says so (pdftotext), on a cover page that still names the server and the window.
    path = tmp_path / "empty.pdf"
    path.write_bytes(pdf_bytes(content))
    pdf = " ".join(
        subprocess.run(["pdftotext", str(path), "-"], check=True, capture_output=True, text=True).stdout.split()
    )
    assert "No snapshot of rep-main was taken in this window" in pdf and "rep-main" in pdf
    assert "no gap" not in pdf


def test_a_window_in_which_the_history_begins_says_where(known_history):
    start = first_snapshot(known_history)
    window = Window(start - timedelta(days=2), start + timedelta(days=3))
    content = audit(known_history, window)
    (s,) = content.servers
    assert s.summary.snapshots > 0 and s.coverage.history_from is not None
    text = text_of(content)
    began = s.coverage.history_from.astimezone(PARIS)
    assert f"rep-main was first collected on {began:%-d %b %Y %H:%M}, inside the window: its figures begin" in text
    assert "Every hour since each server's history begins has snapshots: no gap of an hour or more." in text
    assert "Every hour of the window" not in text
    assert fmt.count_text(s.summary.calls) in text
    # Coverage is of the time since the history began, not of the days before it.
    assert s.coverage.share == pytest.approx(1.0) and s.coverage.gaps == []
    assert f"History since {began:%-d %b %Y %H:%M}." in text


def test_the_full_week_with_its_outage(known_history):
    content = audit(known_history, known_history.week.window)
    text = text_of(content)
    assert "Collection missed 3 hours of the window in 1 gap (chapter 5)" in text
    assert "first collected" not in text and "has no snapshot in the window" not in text
    assert "The advisor had no history" not in text
    gap = fmt.span_text(*known_history.outage, PARIS)
    assert f"{gap} (3 h)" in text


def test_deallocations_say_why_there_is_no_figure(known_history):
    content = audit(known_history, known_history.week.window)
    (s,) = content.servers
    assert _server_view(s, PARIS)["dealloc_per_s"] == fmt.rate_text(s.summary.dealloc_per_s)  # 17: measured
    # The same server as if it ran 13, where pg_stat_statements_info does not exist: unknown, and why.
    values = [(n, "13.16" if n == "server version" else v) for n, v in s.settings.values]
    on_13 = dataclasses.replace(
        s,
        settings=dataclasses.replace(s.settings, values=values),
        summary=dataclasses.replace(s.summary, dealloc_per_s=None),
    )
    assert _server_view(on_13, PARIS)["dealloc_per_s"] == "unknown (PostgreSQL 13)"
    start = first_snapshot(known_history)
    (empty,) = audit(known_history, Window(start - timedelta(days=8), start - timedelta(days=1))).servers
    assert _server_view(empty, PARIS)["dealloc_per_s"] == "no data"


def test_a_plan_change_in_the_window_is_named_beside_the_settings(known_history, tmp_path):
    from history.models import Statement
    from tests.plans_world import report_plan, store

    statement = Statement.objects.filter(server=known_history.server).order_by("pk").first()
    window = known_history.week.window
    changed = window.start + timedelta(days=3, hours=5, minutes=2)
    store(statement.server_id, statement.pk, report_plan(indexed=True), window.start - timedelta(days=2))
    store(statement.server_id, statement.pk, report_plan(indexed=False), changed)
    content = audit(known_history, window)
    said = "the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders"
    when = f"{changed.astimezone(PARIS):%-d %b %Y %H:%M}"
    header = "Plan changes seen in the window When (Europe/Paris) queryid Change"
    assert f"{header} {when} {statement.queryid} {said}" in text_of(content)
    path = tmp_path / "plans.pdf"
    path.write_bytes(pdf_bytes(content))
    pdf = " ".join(
        subprocess.run(["pdftotext", str(path), "-"], check=True, capture_output=True, text=True).stdout.split()
    )
    assert "Plan changes seen in the window" in pdf and "to Seq Scan on orders" in pdf
