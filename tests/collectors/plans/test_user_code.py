"""collectors/plans/user_code.py: no code an ordinary user of the monitored server wrote runs while the console plans.

On a real server of every major, `mallory` (a login role with CREATE on public, as on 13 and 14 by default) plants
what the planner would call: an immutable function that tells her, through NOTIFY, who ran it; an operator, casts,
a domain check, a function named like PostgreSQL's; tables whose index, default, view, partition, policy or foreign
server reach her code. The census finds each; explain() refuses what could reach one, with a reason naming it; and
the attack is real: once the DBA trusts mallory, the same EXPLAIN runs her function as the monitoring role."""

from __future__ import annotations

import time

import psycopg
import pytest

from collectors.connection import PINNED_OPTIONS
from collectors.plans import user_code
from collectors.plans.explain import Plan, Trust, Unexplained, explain
from collectors.plans.statement import classify
from tests.world import MONITOR_PASSWORD, MONITOR_USER

MAJORS = (13, 14, 15, 16, 17, 18)
LIMITS = {"statement_timeout_ms": 2000, "lock_timeout_ms": 200}
DB = "usercode"

MALLORY = """
CREATE FUNCTION public.leak() RETURNS int IMMUTABLE LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_notify('leak', current_user); RETURN 1; END $$;
CREATE FUNCTION public.same(int, int) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT $1 = $2';
CREATE OPERATOR public.=== (leftarg = int, rightarg = int, function = public.same);
CREATE DOMAIN public.checked AS int CHECK (VALUE > public.leak());
CREATE TYPE public.mood AS ENUM ('ok');
CREATE FUNCTION public.mood_text(public.mood) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT ''ok''';
CREATE CAST (public.mood AS text) WITH FUNCTION public.mood_text(public.mood);
CREATE TABLE public.items (id int PRIMARY KEY, note text);
GRANT SELECT ON public.items TO monitor;
CREATE TABLE public.indexed (id int);
CREATE INDEX ON public.indexed ((id + public.leak()));
CREATE TABLE public.defaulted (id int, n int DEFAULT public.leak());
CREATE VIEW public.viewed AS SELECT id FROM public.indexed;
CREATE TABLE public.parted (id int) PARTITION BY RANGE (id);
CREATE TABLE public.parted_1 PARTITION OF public.parted FOR VALUES FROM (0) TO (10);
CREATE INDEX ON public.parted_1 ((id * public.leak()));
CREATE TABLE public.guarded (id int);
CREATE POLICY mine ON public.guarded USING (id = public.leak());
CREATE SERVER elsewhere FOREIGN DATA WRAPPER nowhere;
CREATE FOREIGN TABLE public.remote (id int) SERVER elsewhere;
"""
VERDICTS = {  # a statement's text -> what it may reach of mallory's, as the census names it
    "SELECT * FROM public.items WHERE id = public.leak()": "function leak",
    "SELECT * FROM items WHERE id === $1": "operator ===",
    "SELECT $1::checked": "domain checked",
    "SELECT 'ok'::mood::text": "cast public.mood AS text",
    "SELECT * FROM indexed WHERE id = $1": "relation indexed",
    "SELECT * FROM viewed": "relation viewed",
    "SELECT * FROM parted WHERE id = $1": "relation parted",
    "SELECT * FROM guarded": "relation guarded",
    "SELECT * FROM remote": "relation remote",
    "INSERT INTO defaulted (id) VALUES ($1)": "written relation defaulted",
    "SELECT * FROM items WHERE id = $1": None,
    "SELECT * FROM defaulted WHERE id = $1": None,  # a default is folded only for a statement that writes
    "SELECT count(*) FROM pg_class": None,
}


@pytest.fixture
def mallorys(pg_clusters, request):
    """Database usercode on the cluster of the test's major, with mallory's objects in it; dropped after."""
    c = pg_clusters[request.node.callspec.params["major"]]
    c.execute(f"DROP DATABASE IF EXISTS {DB}")
    c.execute(f"CREATE DATABASE {DB}")
    c.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mallory') THEN "
        "CREATE ROLE mallory LOGIN; END IF; END $$"
    )
    with c.connect(DB) as conn:
        conn.execute("GRANT CREATE ON SCHEMA public TO mallory")
        conn.execute("CREATE FOREIGN DATA WRAPPER nowhere")
        conn.execute("GRANT USAGE ON FOREIGN DATA WRAPPER nowhere TO mallory")
        conn.execute("SET ROLE mallory")
        conn.execute(MALLORY)
        if c.major >= 14:  # statistics on expressions, from 14
            conn.execute("CREATE STATISTICS public.folded ON (id + public.leak()), id FROM public.items")
    try:
        yield c
    finally:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)" if c.major >= 13 else f"DROP DATABASE {DB}")


def _monitor(c) -> psycopg.Connection:
    # The console's own session (collectors/connection.py): its search path pinned, no JIT.
    return psycopg.connect(c.dsn(DB, MONITOR_USER, MONITOR_PASSWORD), autocommit=True, options=PINNED_OPTIONS)


def _census(c, **trust) -> user_code.Census:
    with _monitor(c) as conn:
        return user_code.census(
            conn, trusted_roles=trust.get("roles", []), trusted_schemas=trust.get("schemas", []), timeout_ms=5000
        )


def _verdict(found: user_code.Census, text: str, path: str = "mallory, public") -> str | None:
    untrusted = user_code.planning_could_call(found, classify(text, 170000), path)
    return None if untrusted is None else f"{untrusted.kind} {untrusted.name}"


@pytest.mark.parametrize("major", MAJORS)
def test_the_census_names_what_each_statement_could_reach(mallorys, major):
    found = _census(mallorys)
    assert {(u.kind, u.name) for u in found.found} >= {
        ("function", "leak"),
        ("operator", "==="),
        ("domain", "checked"),
        ("cast", "public.mood AS text"),
        ("relation", "indexed"),
        ("relation", "viewed"),
        ("relation", "parted"),
        ("relation", "parted_1"),
        ("relation", "guarded"),
        ("relation", "remote"),
        ("written relation", "defaulted"),
    }
    if major >= 14:
        assert ("relation", "items") in {(u.kind, u.name) for u in found.found}  # its statistics' expression
    for text, expected in VERDICTS.items():
        if text.startswith("SELECT * FROM items WHERE id = $1") and major >= 14:
            expected = "relation items"
        got = _verdict(found, text)
        assert got == expected or (expected is None and got is None) or got.startswith(expected.split()[0]), (
            text,
            got,
        )
    # Mallory trusted, every statement may be planned; public trusted, all but the foreign table, whose server (in
    # no schema) is still hers.
    assert [text for text in VERDICTS if _verdict(_census(mallorys, roles=["mallory"]), text)] == []
    refused = [text for text in VERDICTS if _verdict(_census(mallorys, schemas=["public"]), text)]
    assert refused == ["SELECT * FROM remote"]


@pytest.mark.parametrize("major", [15, 17])
def test_a_function_named_like_postgresqls_on_the_roles_path_stops_every_statement(mallorys, major):
    with mallorys.connect(DB) as conn:
        conn.execute("SET ROLE mallory")
        conn.execute("CREATE FUNCTION public.lower(varchar) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT $1::text'")
    found = _census(mallorys)
    assert _verdict(found, "SELECT count(*) FROM pg_class") == "shadow lower"  # public is on the role's path
    assert _verdict(found, "SELECT count(*) FROM pg_class", path="app") is None  # a path without it


def _notified(c, channel: str, act) -> list[str]:
    """The payloads of `channel` that arrive while `act()` runs, as the server's superuser listens."""
    with psycopg.connect(c.dsn(DB), autocommit=True) as listener:
        listener.execute(f"LISTEN {channel}")
        act()
        time.sleep(0.2)
        return [n.payload for n in listener.notifies(timeout=0.5, stop_after=10)]


@pytest.mark.parametrize("major", MAJORS)
def test_mallorys_immutable_function_never_runs_as_the_monitoring_role_while_planning(mallorys, major):
    text = "SELECT * FROM public.items WHERE id = public.leak()"
    outcomes = []

    def plan(trust: Trust):
        with _monitor(mallorys) as conn:
            outcomes.append(
                explain(conn, text, server_version_num=major * 10000, role="mallory", trust=trust, **LIMITS)
            )

    assert _notified(mallorys, "leak", lambda: plan(Trust())) == []
    refused = outcomes[-1]
    assert isinstance(refused, Unexplained) and refused.code == "user_code", refused
    assert "function public.leak() of role mallory" in refused.reason and "trust" in refused.reason
    # The danger was real: trusted, the planner folds leak() and it runs as the console's role.
    assert _notified(mallorys, "leak", lambda: plan(Trust(roles=("mallory",)))) == [MONITOR_USER]
    assert isinstance(outcomes[-1], Plan)
