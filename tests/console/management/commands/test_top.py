"""manage.py top: a server's top statements over a window, as text or JSON, planning "not tracked" where it is not,
and bad input refused with the reason."""

import json

import pytest
from django.core.management import call_command

from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_top_command_and_planning_not_tracked(pg_clusters, capsys):
    c = pg_clusters[18]
    run(c, "DROP TABLE IF EXISTS top_items; CREATE TABLE top_items (id int)")
    server = register(c, name="topsrv")
    collect(server)
    run(c, "INSERT INTO top_items SELECT generate_series(1, 100)", 2)
    run(c, "SELECT count(*) FROM top_items", 9)
    collect(server)
    call_command("top", "--server", "topsrv", "--since", "1h", "--order", "calls", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["planning"] == "not tracked"
    queryid = server_entry(c, "SELECT count(*) FROM top_items%")["queryid"]
    row = next(r for r in data["statements"] if r["queryid"] == queryid)
    assert (row["calls"], row["rows"], row["plan_ms"], row["plans"]) == (9, 9, None, None)
    assert data["statements"][0]["calls"] >= 9  # ordered by calls
    call_command("top", "--server", "topsrv", "--limit", "3")
    text = capsys.readouterr().out
    assert "planning not tracked" in text and "not tracked" in text.splitlines()[2]
    assert len(text.strip().splitlines()) == 2 + 3


def test_top_shows_planning_when_tracked(pg_clusters, capsys):
    c = pg_clusters[16]
    server = register(c, name="plansrv")
    collect(server)
    c.set_config({"pg_stat_statements.track_planning": "on"})
    try:
        run(c, "SELECT count(*) FROM pg_class a JOIN pg_class b USING (oid)", 4)
        collect(server)
    finally:
        c.set_config({"pg_stat_statements.track_planning": "off"})
    call_command("top", "--server", "plansrv", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["planning"] == "tracked"
    row = next(r for r in data["statements"] if "pg_class a JOIN" in (r["query"] or ""))
    assert row["plans"] == 4 and row["plan_ms"] > 0


def test_top_rejects_bad_input():
    with pytest.raises(Exception, match="invalid --since"):
        call_command("top", "--server", "x", "--since", "yesterday")
