"""manage.py advise: evaluates the rules now and prints each server's open recommendations, as text or as one JSON
document whose entries are the advisor's own rows; --all takes every enabled server; an unknown server or none is
an error, and a server never collected has nothing yet but says why. On the known history (tests/known_history.py)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from advisor.selectors import evaluations, recommendations
from inventory.models import Server

pytestmark = pytest.mark.django_db


def _advise(*args: str) -> str:
    out = StringIO()
    call_command("advise", *args, stdout=out)
    return out.getvalue()


def test_the_text_lists_what_the_advisor_stored(known_history):
    server = known_history.server
    text = _advise("--server", server.name)
    rows = recommendations(server_ids=[server.pk])
    assert text.splitlines()[0] == f"{server.name}: {len(rows)} open recommendation(s)"
    for r in rows:
        assert f"  [{r.severity}] {r.rule} {r.subject}: {r.title}" in text
        if r.change_text:
            assert f"change ({r.change_apply}): {r.change_text}" in text
    run = evaluations(server_ids=[server.pk])[server.pk]
    assert all(f"  note: {note}" in text for note in run.notes)


def test_the_json_is_every_field_of_the_advisors_rows(known_history):
    server = known_history.server
    (entry,) = json.loads(_advise("--server", server.name, "--json"))
    run = evaluations(server_ids=[server.pk])[server.pk]
    assert entry["server"] == server.name and entry["organization"] == known_history.organization.name
    assert (entry["evaluated_at"], entry["partial"], entry["error"]) == (run.at.isoformat(), run.partial, run.error)
    assert entry["recommendations"] == [r.as_json() for r in recommendations(server_ids=[server.pk])]


def test_all_takes_every_enabled_server_and_no_disabled_one(known_history):
    Server.objects.filter(pk=known_history.other.pk).update(enabled=False)
    names = [entry["server"] for entry in json.loads(_advise("--all", "--json"))]
    assert known_history.server.name in names and known_history.other.name not in names
    assert names == sorted(names)


def test_an_unknown_server_is_an_error_and_a_server_never_collected_has_nothing_yet(known_history):
    with pytest.raises(CommandError, match="no server named"):
        _advise("--server", "no-such-server")
    with pytest.raises(CommandError, match="one of the arguments --server --all is required"):
        _advise()
    never = Server.objects.create(organization=known_history.organization, name="never-collected", host="192.0.2.9")
    text = _advise("--server", never.name)
    run = evaluations(server_ids=[never.pk])[never.pk]
    assert text.splitlines()[0] == "never-collected: 0 open recommendation(s)" and not run.error
    assert run.notes and all(f"  note: {note}" in text for note in run.notes)
