"""The weekly mail as a real SMTP server receives it: its MIME structure (text and HTML alternatives, the charts
inline by cid:), its headers (RFC 8058 unsubscribe), and its figures, which are the selectors' for the week of
the known history, written as the mail writes them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from advisor.models import Recommendation, RecommendationEvent
from presentation import formatting as f
from readtier import StatementChange, compare_windows
from readtier.coverage import collection_coverage, window_summary
from reports.digest import organization_digest
from reports.mail import render, weekly_context
from reports.models import ReportDelivery, WeeklySend
from reports.services import report_send_weekly
from reports.weekly import server_section, weekly_report
from tests.reports.weekly_world import CONSOLE, PNG, cids, mail_parts

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(known_history, readers, smtp):
    """The report of the known week, sent once to the three recipients; (result, {address: parts})."""
    result = report_send_weekly(organization_id=known_history.organization.pk, week=known_history.week)
    messages = {a: smtp.inbox.to(a) for a in ("alice@acme.example", "bob@acme.example", readers.client)}
    return result, messages


def test_each_recipient_gets_one_mail_with_text_html_and_inline_charts(sent, known_history):
    result, messages = sent
    assert (result.claimed, result.status, result.sent, result.failed, result.pending) == (True, "sent", 3, 0, 0)
    assert {a: len(m) for a, m in messages.items()} == {a: 1 for a in messages}
    message = messages["alice@acme.example"][0]
    assert message["To"] == "alice@acme.example"
    assert message["From"] == "pgconsole <reports@console.example>"
    assert message["Subject"].startswith(f"rep-acme weekly report {known_history.week.label}: ")
    parts = mail_parts(message)  # alternative[text, related[html, png...]]
    assert parts.images and set(parts.images) == cids(parts.html)  # every cid has its part, and every part is shown
    assert all(png.startswith(PNG) for png in parts.images.values())
    assert "rep-main" in parts.text and "rep-main" in parts.html
    assert "<html" not in parts.text and "&lt;" not in parts.text  # the text part is text, not escaped HTML
    assert "max-width:600px" in parts.html
    # Recorded: the week's send and a delivery per address.
    send = WeeklySend.objects.get(pk=result.send_id)
    assert (send.kind, send.week, send.status) == ("weekly", known_history.week.label, "sent")
    assert sorted(send.deliveries.values_list("address", "status", "attempts")) == [
        ("alice@acme.example", "sent", 1),
        ("bob@acme.example", "sent", 1),
        ("cto@client.example", "sent", 1),
    ]


def test_one_unsubscribe_link_per_recipient_with_one_click_headers(sent):
    _, messages = sent
    links = {}
    for address, (message,) in messages.items():
        link = message["List-Unsubscribe"].strip()  # folded: longer than a header line
        assert link.startswith(f"<{CONSOLE}/reports/unsubscribe/") and link.endswith("/>")
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        parts = mail_parts(message)
        assert link[1:-1] in parts.text and link[1:-1] in parts.html
        links[address] = link
    assert len(set(links.values())) == 3  # each its own


def test_the_figures_are_the_selectors_figures(sent, known_history):
    _, messages = sent
    parts = mail_parts(messages["bob@acme.example"][0])
    server_id, week = known_history.server.pk, known_history.week
    now, before = (
        window_summary(server_id=server_id, window=week.window),
        window_summary(server_id=server_id, window=week.previous().window),
    )
    comparison = compare_windows(server_id=server_id, window=week.window, previous=week.previous().window)
    top = comparison.changes[0]
    coverage = collection_coverage(server_id=server_id, window=week.window)
    expected = [
        f"Database time: {f.duration_text(now.db_time_ms)} ({f.change_text(now.db_time_ms / before.db_time_ms - 1)}; "
        f"previous week {f.duration_text(before.db_time_ms)})",
        f"Calls: {f.count_text(now.calls)} ({f.change_text(now.calls / before.calls - 1)}; "
        f"previous week {f.count_text(before.calls)})",
        f"1. {f.duration_text(top.current.total_ms)} ({f.change_text(top.change('total_ms'))}) · "
        f"{f.calls_text(top.current.calls)}",
        f"{len(coverage.gaps)} gap, {f.hours_text(coverage.gap_hours)} in all",
        f"gap: {f.span_text(*known_history.outage, known_history.outage[0].tzinfo)} (3 h)",
    ]
    for text in expected:
        assert text in parts.text, text
    assert f"{now.calls:,}" in parts.html and f.duration_text(now.db_time_ms) in parts.html
    assert f.duration_text(top.current.total_ms) in parts.html and f.change_text(top.change("total_ms")) in parts.html
    # Links into the console are absolute, to the week: the server, its statements compared, each statement.
    assert f"{CONSOLE}/servers/{server_id}/?range=custom&amp;start=" in parts.html
    assert f"{CONSOLE}/statements/{top.statement_id}/?range=custom" in parts.text


def test_planning_not_tracked_is_said_never_zero(sent):
    _, messages = sent
    parts = mail_parts(messages["alice@acme.example"][0])
    assert "Planning share: not tracked (previous week not tracked)" in parts.text
    assert "<strong>not tracked</strong><br>" in " ".join(parts.html.split())
    for body in (parts.text, " ".join(parts.html.split())):
        assert "Planning time: not tracked (pg_stat_statements.track_planning is off)" in body
        assert "Database time per second (planning not tracked)" in body or body is parts.text
        assert "0 ms planning" not in body and "Planning took" not in body and "planning 0" not in body.lower()


def test_failing_delivery_is_retried_then_recorded(known_history, readers, smtp):
    """A 4xx answer is tried again (and goes through); a 5xx one fails at once, with the server's reply."""
    smtp.inbox.refuse["bob@acme.example"] = ("451 4.3.0 try again later", 1)
    smtp.inbox.refuse["cto@client.example"] = ("550 5.1.1 no such user", None)
    first = report_send_weekly(organization_id=known_history.organization.pk, week=known_history.week)
    assert (first.status, first.sent, first.failed, first.pending) == ("sending", 1, 1, 1)
    bob = ReportDelivery.objects.get(send_id=first.send_id, address="bob@acme.example")
    assert (bob.status, bob.attempts, bob.last_error) == ("pending", 1, "451 4.3.0 try again later")
    from reports.services import report_send_retry

    again = report_send_retry(send_id=first.send_id)
    assert (again.status, again.sent, again.failed, again.pending) == ("partial", 2, 1, 0)
    assert smtp.inbox.count("bob@acme.example") == 1 and smtp.inbox.count("cto@client.example") == 0
    rows = {
        d.address: (d.status, d.attempts, d.last_error) for d in ReportDelivery.objects.filter(send_id=first.send_id)
    }
    assert rows["bob@acme.example"] == ("sent", 2, "")
    assert rows["cto@client.example"] == ("failed", 1, "550 5.1.1 no such user")
    assert WeeklySend.objects.get(pk=first.send_id).error == "1 of 3 recipients failed"


def test_new_statements_regressions_and_the_advisor_are_listed_and_texts_escaped(known_history):
    """The sections the known week does not need, on its own statements: one made new (with a hostile text), one
    made three times slower, and a recommendation opened in the week."""
    week = known_history.week
    inside = week.window.start + timedelta(days=1)
    rec = Recommendation.objects.create(
        server=known_history.server,
        rule="pgss_max",
        subject="server",
        subject_key="k",
        severity="critical",
        title="Raise pg_stat_statements.max",
        explanation="x",
        first_seen_at=inside,
        opened_at=inside,
        last_seen_at=inside,
    )
    RecommendationEvent.objects.create(recommendation=rec, at=inside, kind="opened", severity="critical")
    report = weekly_report(organization_id=known_history.organization.pk, week=week, charts=False)
    d = organization_digest(organization_id=known_history.organization.pk, week=week).servers[0]
    a, b = d.top[0], d.top[1]
    new = StatementChange(replace(a.current, query="SELECT '<script>alert(1)</script>' FROM t"), None)
    slower = StatementChange(b.current, replace(b.previous, exec_ms=b.previous.exec_ms / 3))
    section = server_section(
        replace(d, new=[new], new_count=4, regressions=[slower], regression_count=1), week, charts=False
    )
    _, text, html = render("weekly", weekly_context(replace(report, servers=[section]), unsubscribe_url="u"))
    before, after = slower.previous.total_ms / slower.previous.calls, slower.current.total_ms / slower.current.calls
    for body in (text, " ".join(html.split())):
        assert "New statements: 4" in body and "Regressions: 1" in body
        assert f"mean {f.mean_text(before)} → {f.mean_text(after)}" in body
        assert "Raise pg_stat_statements.max" in body and f"/advisor/recommendations/{rec.pk}/" in body
    assert "(the 1 heaviest)" in text and "opened: Raise pg_stat_statements.max (critical, " in text
    assert "SELECT '<script>alert(1)</script>' FROM t" in text  # plain text: as it is
    assert "<script>" not in html and "SELECT &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27; FROM t" in html
    assert "The advisor opened 1 recommendation and 0 were resolved." in report.highlights


def test_a_regression_names_its_plan_change_of_the_week(known_history):
    """A statement three times slower whose plan changed this week (recorded through the plans' writer): its line
    says so, with the day and time, and the digest reads only the listed regressions' changes."""
    from history.models import Statement
    from readtier import plan_changes_by_statement
    from tests.plans_world import report_plan, store

    week = known_history.week
    d = organization_digest(organization_id=known_history.organization.pk, week=week).servers[0]
    b = d.top[1]
    slower = StatementChange(b.current, replace(b.previous, exec_ms=b.previous.exec_ms / 3))
    statement = Statement.objects.get(pk=slower.statement_id)
    changed = week.window.start + timedelta(days=2, hours=3)
    store(statement.server_id, statement.pk, report_plan(indexed=True), week.window.start - timedelta(days=3))
    store(statement.server_id, statement.pk, report_plan(indexed=False), changed)
    planned = plan_changes_by_statement(
        server_id=statement.server_id, window=week.window, statement_ids=[slower.statement_id]
    )
    assert list(planned) == [statement.pk] and planned[statement.pk][0].at == changed
    assert plan_changes_by_statement(server_id=statement.server_id, window=week.window, statement_ids=[]) == {}

    section = server_section(
        replace(d, regressions=[slower], regression_count=1, plan_changes=planned), week, charts=False
    )
    report = weekly_report(organization_id=known_history.organization.pk, week=week, charts=False)
    _, text, html = render("weekly", weekly_context(replace(report, servers=[section]), unsubscribe_url="u"))
    said = (
        "the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders "
        f"({changed:%a %H:%M} UTC)"
    )
    assert said in text and said in " ".join(html.split())
