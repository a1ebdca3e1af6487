"""manage.py advise: evaluates the rules now and prints each server's open recommendations, as text or as one JSON
document whose entries are the advisor's own rows; --all takes every enabled server; an unknown server or none is
an error, and a server never collected has nothing yet but says why. On a synthetic history of its own (a module's:
the session's known history would put its servers before every later test)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from advisor.selectors import evaluations, recommendations
from console.services import server_delete
from inventory.models import Server
from tests.history_world import build

pytestmark = pytest.mark.django_db
START = datetime(2026, 11, 2, tzinfo=UTC)


@dataclass(frozen=True)
class History:
    server: Server
    other: Server  # of the same organization, disabled in a test


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """Two servers of the `bench` organization with six hours of snapshots each, deleted afterwards."""
    with django_db_blocker.unblock():
        server = build("advise-main", n=20, start=START, end=START + timedelta(hours=6), step=timedelta(minutes=10))
        other = build("advise-other", n=5, start=START, end=START + timedelta(hours=6), step=timedelta(minutes=10))
        yield History(server, other)
        server_delete(server=server)
        server_delete(server=other)


def _advise(*args: str) -> str:
    out = StringIO()
    call_command("advise", *args, stdout=out)
    return out.getvalue()


def test_the_text_lists_what_the_advisor_stored(history):
    server = history.server
    text = _advise("--server", server.name)
    rows = recommendations(server_ids=[server.pk])
    assert text.splitlines()[0] == f"{server.name}: {len(rows)} open recommendation(s)"
    for r in rows:
        assert f"  [{r.severity}] {r.rule} {r.subject}: {r.title}" in text
        if r.change_text:
            assert f"change ({r.change_apply}): {r.change_text}" in text
    run = evaluations(server_ids=[server.pk])[server.pk]
    assert all(f"  note: {note}" in text for note in run.notes)


def test_the_json_is_every_field_of_the_advisors_rows(history):
    server = history.server
    (entry,) = json.loads(_advise("--server", server.name, "--json"))
    run = evaluations(server_ids=[server.pk])[server.pk]
    assert entry["server"] == server.name and entry["organization"] == server.organization.name
    assert (entry["evaluated_at"], entry["partial"], entry["error"]) == (run.at.isoformat(), run.partial, run.error)
    assert entry["recommendations"] == [r.as_json() for r in recommendations(server_ids=[server.pk])]


def test_all_takes_every_enabled_server_and_no_disabled_one(history):
    Server.objects.filter(pk=history.other.pk).update(enabled=False)
    names = [entry["server"] for entry in json.loads(_advise("--all", "--json"))]
    assert history.server.name in names and history.other.name not in names
    assert names == sorted(names)


def test_an_unknown_server_is_an_error_and_a_server_never_collected_has_nothing_yet(history):
    with pytest.raises(CommandError, match="no server named"):
        _advise("--server", "no-such-server")
    with pytest.raises(CommandError, match="one of the arguments --server --all is required"):
        _advise()
    never = Server.objects.create(organization=history.server.organization, name="never-collected", host="192.0.2.9")
    text = _advise("--server", never.name)
    run = evaluations(server_ids=[never.pk])[never.pk]
    assert text.splitlines()[0] == "never-collected: 0 open recommendation(s)" and not run.error
    assert run.notes and all(f"  note: {note}" in text for note in run.notes)
