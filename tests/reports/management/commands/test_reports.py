"""manage.py reports preview | send: the preview writes the mail's HTML, `send --to` sends a test without
claiming the week, `send` claims it once, and an unknown organization or a bad week says what to fix."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from reports.models import WeeklySend
from reports.weeks import week_of

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("reports", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_preview_writes_the_html(known_history, tmp_path):
    out = tmp_path / "weekly.html"
    assert run("preview", "--org", "rep-acme", "--week", known_history.week.label, "--out", str(out)) == ""
    html = out.read_text()
    assert html.startswith("<!doctype html>") and "rep-main" in html and "cid:" not in html
    assert html.count('src="data:image/png;base64,') == 2
    assert f"Week {known_history.week.label}" in html


def test_send_to_sends_a_test_and_send_claims_the_week_once(known_history, readers, smtp):
    week = known_history.week.label
    text = run("send", "--org", "rep-acme", "--week", week, "--to", "someone@elsewhere.example")
    assert text == f"test of {week} to someone@elsewhere.example: sent, 1 sent, 0 failed\n"
    assert smtp.inbox.count() == 1 and smtp.inbox.count("someone@elsewhere.example") == 1
    assert not WeeklySend.objects.filter(kind="weekly").exists()
    assert run("send", "--org", "rep-acme", "--week", week) == (
        f"weekly report {week} of rep-acme: sent, 3 sent, 0 failed\n"
    )
    assert run("send", "--org", str(known_history.organization.pk), "--week", week) == (
        f"weekly report {week} of rep-acme: already sent (sent); nothing sent again\n"
    )
    assert smtp.inbox.count() == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["preview", "--org", "nobody-here"], "--org: no organization 'nobody-here' (organizations: "),
        (["send", "--org", "rep-acme", "--week", "47"], "--week: week '47': write it as an ISO week, e.g. 2026-W47"),
        (["send", "--org", "rep-acme", "--week", "2026-W54"], "--week: week '2026-W54': 2026 has no ISO week 54"),
        (["send", "--org", "rep-acme", "--to", "not-an-address"], "--to: not an email address: not-an-address"),
        (
            ["send", "--org", "rep-acme", "--week", "THIS-WEEK"],
            "--week: week THIS-WEEK is not over yet: a report covers",
        ),
    ],
)
def test_clear_errors(known_history, args, message):
    this_week = week_of(timezone.now(), time_zone="UTC").label
    with pytest.raises(CommandError) as error:
        run(*[a.replace("THIS-WEEK", this_week) for a in args])
    message = message.replace("THIS-WEEK", this_week)
    assert str(error.value).startswith(message)
    assert not WeeklySend.objects.exists()
