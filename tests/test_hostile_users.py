"""Issue 52's attacks, H1 to H5, by an ordinary user of a monitored server, through the console's real paths.

On a PostgreSQL 15 server of its own, `mallory` logs in as any application role does, with CREATE on public (the
default on 13 and 14, and on clusters upgraded from them). She plants what would run as the console's roles: an
immutable function that tells her, through NOTIFY, who ran it and what it read; a shadow of pg_relation_size(oid)
for the schema reading; a statement whose text, read with standard strings on, holds a second statement that
would copy a secret table to her and change the monitoring role's password; a table and an index whose names
break out of the advisor's script; `DO` texts built against the redaction. The console then does what it does:
collections (statements, texts, the schema reading of every database), the automatic plan round and "EXPLAIN now",
the advisor, whose script a DBA pastes into psql as the superuser. Nothing ran as the console's roles: no
notification arrived, no table or role was made, no password changed, no file written; the hostile texts cost
about what benign ones of their length do."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db.models import F

from advisor.selectors import recommendations
from advisor.services import server_advise
from collectors import redact
from collectors.connection_check import server_check
from collectors.plans.auto import plan_top_statements
from collectors.plans.explain import HELPER_SQL
from collectors.plans.service import statement_plan
from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, monitored_setup, start_many, stop_many
from devenv.ports import TEST_ATTACK_PORT
from history.models import PlanAttempt, SchemaIndex, Statement
from inventory.endpoint import Endpoint
from tests import slots
from tests.conftest import MONITOR_HBA
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER, collect, register

pytestmark = pytest.mark.django_db(transaction=True)

MALLORY_PASSWORD = "mallory-pw"
TABLE = "ev\nCREATE ROLE injected SUPERUSER;--"  # H5: names that end the advisor's comment
INDEX = "ix\n\\! touch pwned #"
SECRETS = (
    "CREATE SCHEMA private; CREATE TABLE private.secrets (secret text); INSERT INTO private.secrets VALUES ('s3cr3t')"
)
PLANTED = """
CREATE FUNCTION public.leak() RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> 'mallory' THEN  -- run by someone else: who, and what they can read that she cannot
        PERFORM pg_notify('leak', current_user || ' ' || (SELECT string_agg(secret, ',') FROM private.secrets));
    END IF;
    RETURN 1;
END $$;
CREATE FUNCTION public.pg_relation_size(oid) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.leak(); RETURN 0; END $$;
CREATE TABLE public.items (id int PRIMARY KEY, note text);
INSERT INTO public.items SELECT g, 'n' || g FROM generate_series(1, 1000) g;
CREATE DOMAIN public."x$e" AS text CHECK (pg_sleep(0.05) IS NOT NULL);
"""  # (the domain's check makes her injection the costliest statement: the plan round takes it first)
# H1: read with standard_conforming_strings off, as she sends it, one statement (a string cast to her domain);
# read with it on, as the console reads it, a statement and six more.
INJECTION = (
    "SELECT x$e'\\' ; COMMIT; SET default_transaction_read_only = off; COMMIT; "
    "CREATE TABLE public.loot AS SELECT * FROM private.secrets; GRANT ALL ON public.loot TO mallory; "
    f"ALTER ROLE {MONITOR_USER} PASSWORD $p$pwned$p$; SELECT 1 -- '"
)
# H2: planning folds the immutable call.
FOLDED = "SELECT note FROM public.items WHERE id = public.leak()"


def _do(i: int, hostile: bool) -> str:
    """H4: a DO body pg_stat_statements keeps whole, 34 KB; hostile, the set_config chain the redaction once
    searched again for every literal."""
    if hostile:
        call = f"set_config('{'a' * 17_000}{i}', " + "||".join(["'b'"] * 4_000) + ")"
    else:
        call = f"length('{'a' * 17_000}{i}' || " + "||".join(["'b'"] * 4_000) + ")"
    return f"DO $$ BEGIN IF false THEN PERFORM {call}; END IF; END $$"


@pytest.fixture(scope="module")
def server_of_mallory(cluster_lock, django_db_blocker) -> Iterator[Cluster]:
    """A PostgreSQL 15 of this module's own (hypopg, the EXPLAIN helper installed, pg_stat_statements.max at its
    least so that entries are evicted), the monitoring role reading everything, mallory's objects planted."""
    spec = ClusterSpec(
        name="test-hostile-users",
        major=15,
        port=slots.port(TEST_ATTACK_PORT),
        base=slots.cluster_dir(),
        fresh=True,
        hba=MONITOR_HBA,
        settings={"pg_stat_statements.max": "100", "pg_stat_statements.track": "all"},
        preload=["pg_stat_statements"],
        setup=monitored_setup(
            dbname=APP_DB,
            monitor_user=MONITOR_USER,
            monitor_password=MONITOR_PASSWORD,
            extensions=["pg_stat_statements", "hypopg"],
        ),
    )
    c = start_many([spec])[spec.name]
    try:
        c.execute(f"GRANT pg_read_all_data TO {MONITOR_USER}")
        c.execute(f"CREATE ROLE mallory LOGIN PASSWORD '{MALLORY_PASSWORD}'")
        c.execute(SECRETS + "; GRANT CREATE ON SCHEMA public TO mallory", dbname=APP_DB)
        c.execute(HELPER_SQL.read_text().replace("pgconsole_monitor", MONITOR_USER), dbname=APP_DB)
        with _as_mallory(c) as conn:
            conn.execute(PLANTED)
            conn.execute(
                psycopg.sql.SQL("CREATE TABLE public.{} (id int, note text)").format(psycopg.sql.Identifier(TABLE))
            )
            conn.execute(
                psycopg.sql.SQL("CREATE INDEX {} ON public.{} (note)").format(
                    psycopg.sql.Identifier(INDEX), psycopg.sql.Identifier(TABLE)
                )
            )
        yield c
    finally:
        stop_many([c])


def _as_mallory(c: Cluster) -> psycopg.Connection:
    return psycopg.connect(c.dsn(APP_DB, "mallory", MALLORY_PASSWORD), autocommit=True, prepare_threshold=None)


def _what_she_could_have_made(c: Cluster) -> dict[str, object]:
    return {
        "roles": sorted(r for (r,) in c.execute("SELECT rolname FROM pg_roles")),
        "tables": sorted(
            r
            for (r,) in c.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 2200", dbname=APP_DB
            )
        ),
        "monitor password": c.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", params=[MONITOR_USER]),
        "read only": c.execute("SHOW default_transaction_read_only"),
    }


def _evict_then_run(c: Cluster, text: str) -> None:
    """The text parsed as mallory sends it (standard strings off), its entry evicted by others before it runs:
    pg_stat_statements then keeps the text as it came, not normalized (finding H1's recipe)."""
    with _as_mallory(c) as conn:
        conn.execute("SET standard_conforming_strings = off")
        parsed = conn.pgconn.prepare(b"h1", text.encode())
        assert parsed.status == psycopg.pq.ExecStatus.COMMAND_OK, parsed.error_message
        for n in range(1, 400):  # 400 statements of distinct shapes, past pg_stat_statements.max
            conn.execute("SELECT " + ", ".join(["1"] * (n % 120 + 1)) + f" FROM (VALUES ({n})) v{n % 7}(c)")
        for _ in range(5):
            assert conn.pgconn.exec_prepared(b"h1", []).status == psycopg.pq.ExecStatus.TUPLES_OK


def _kept(c: Cluster, like: str) -> list[str]:
    return [
        q
        for (q,) in c.execute("SELECT query FROM pg_stat_statements WHERE query LIKE %s", params=[like], dbname=APP_DB)
    ]


def _psql(c: Cluster, script: str, cwd) -> subprocess.CompletedProcess:
    """The advisor's script as a DBA runs it: psql as the superuser, in the database it names."""
    env = {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(c.port), "PGUSER": "postgres", "PGDATABASE": APP_DB}
    return subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=0"], input=script, env=env, cwd=cwd, capture_output=True, text=True
    )


def test_nothing_mallory_wrote_runs_as_the_consoles_roles(server_of_mallory, settings, tmp_path):
    c = server_of_mallory
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    before = _what_she_could_have_made(c)
    listener = psycopg.connect(c.dsn(APP_DB), autocommit=True)
    listener.execute("LISTEN leak")
    server = register(c)
    collect(server)
    with _as_mallory(c) as conn:  # her workload: what the console collects and plans
        for _ in range(20):
            conn.execute(FOLDED)
        for i in range(3):
            conn.execute(_do(i, hostile=True))
            conn.execute(_do(i, hostile=False))

    # H2 and H3: collections with the schema reading, the plan round, "EXPLAIN now".
    collect(server)
    folded = Statement.objects.get(server_id=server.pk, query__startswith="SELECT note FROM public.items")
    round_ = plan_top_statements(server.pk)
    assert round_.outcomes[folded.pk].code == "user_code", round_.outcomes[folded.pk]
    assert "function public.leak() of role mallory" in round_.outcomes[folded.pk].reason
    assert statement_plan(server_id=server.pk, statement_id=folded.pk).code == "user_code"

    # H4: the DO texts were stored whole, redacted as fast as benign ones of their length.
    stored = list(
        Statement.objects.filter(server_id=server.pk, query__startswith="DO $$").values_list("query", flat=True)
    )
    assert len(stored) == 6 and not any("was cut" in q for q in stored)
    for i in range(3):
        hostile, benign = _cpu(redact.redact, _do(i, hostile=True)), _cpu(redact.redact, _do(i, hostile=False))
        assert hostile < benign * 3 + 0.05, (hostile, benign)

    # H5: the advisor's script for her unused index, pasted into psql as the superuser.
    collect(server)
    SchemaIndex.objects.filter(server_id=server.pk, name=INDEX).update(stats_since=F("stats_since") - timedelta(days=8))
    server_advise(server_id=server.pk)
    (card,) = [
        r for r in recommendations(server_ids=[server.pk]) if r.subject.endswith(INDEX) and r.rule == "unused_index"
    ]
    ran = _psql(c, card.change_text, tmp_path)
    assert "ERROR" not in ran.stderr, ran.stderr
    assert not c.execute("SELECT FROM pg_indexes WHERE indexname = %s", params=[INDEX], dbname=APP_DB)  # dropped
    assert list(tmp_path.iterdir()) == []  # psql's \! never ran

    # H1: the injection, kept as she sent it, then collected, planned in the round and on demand.
    _evict_then_run(c, INJECTION)
    assert _kept(c, "SELECT x$e%") == [INJECTION]
    collect(server)
    injected = Statement.objects.get(server_id=server.pk, query__startswith="SELECT x$e")
    assert plan_top_statements(server.pk).outcomes[injected.pk].code in ("ambiguous", "several")
    assert statement_plan(server_id=server.pk, statement_id=injected.pk).code in ("ambiguous", "several")

    time.sleep(0.3)  # a notification is delivered at its transaction's commit
    assert [n.payload for n in listener.notifies(timeout=1, stop_after=5)] == []
    listener.close()
    assert _what_she_could_have_made(c) == before
    with psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD)) as monitor:  # its password is its own
        assert monitor.execute("SELECT current_user").fetchone()[0] == MONITOR_USER
    # Her shadow of pg_relation_size lies in public, on every role's path: no statement of the database is planned
    # while it is there, each told why.
    codes = set(PlanAttempt.objects.filter(server_id=server.pk).values_list("code", flat=True))
    assert codes <= {"user_code", "ambiguous", "several", "utility"} and "user_code" in codes, codes
    shadowed = PlanAttempt.objects.filter(server_id=server.pk, reason__contains="public.pg_relation_size()")
    assert shadowed.exists()

    # The attacks are real: her function runs as whoever plans it, her shadow takes pg_relation_size(oid) where
    # public is on the path, and her text holds seven statements to the console's lexer.
    with psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD), autocommit=True) as plain:
        plain.execute("LISTEN leak")
        plain.execute("EXPLAIN " + FOLDED)
        plain.execute("SELECT pg_relation_size(oid) FROM pg_class WHERE relname = 'items'")
        assert [n.payload for n in plain.notifies(timeout=1, stop_after=2)] == ["monitor s3cr3t"] * 2


def _cpu(act, *args) -> float:
    started = time.thread_time()
    act(*args)
    return time.thread_time() - started


# Every name the console's SQL calls on a monitored server (collectors/: its modules' SQL and the helper's), to be
# shadowed. Python's calls are read too; only the names PostgreSQL has as functions are kept.
def _console_function_names() -> list[str]:
    root = Path(__file__).resolve().parent.parent / "collectors"
    sources = [*root.rglob("*.py"), *root.rglob("*.sql")]
    return sorted(
        {m.lower() for path in sources for m in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", path.read_text())}
    )


# For each PostgreSQL function of those names (plain functions whose types plpgsql can take), and each operator
# of the symbols the console writes, one of the same signature in public that NOTIFYs, then does what PostgreSQL's
# does: with public first in the path the database and the role set, each would be the one called.
SHADOW_ALL = r"""
DO $shadow$
DECLARE
    f record;
    made int := 0;
    args text;
    body text;
BEGIN
    FOR f IN
        SELECT p.oid, p.proname, p.proretset, p.pronargs,
               pg_get_function_identity_arguments(p.oid) AS arguments, format_type(p.prorettype, NULL) AS returns
        FROM pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
          AND p.proname = ANY(string_to_array(current_setting('pgconsole.names'), ','))
          AND p.proallargtypes IS NULL AND p.provariadic = 0
          AND (SELECT typtype FROM pg_type WHERE oid = p.prorettype) <> 'p'
          AND NOT EXISTS (SELECT FROM unnest(p.proargtypes) a JOIN pg_type t ON t.oid = a WHERE t.typtype = 'p')
    LOOP
        SELECT string_agg('$' || i, ', ') INTO args FROM generate_series(1, f.pronargs) i;
        body := CASE WHEN f.proretset THEN 'RETURN QUERY SELECT * FROM pg_catalog.' || quote_ident(f.proname)
                     ELSE 'RETURN pg_catalog.' || quote_ident(f.proname) END || '(' || coalesce(args, '') || ');';
        BEGIN
            EXECUTE format('CREATE FUNCTION public.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L',
                           f.proname, f.arguments, CASE WHEN f.proretset THEN 'SETOF ' ELSE '' END, f.returns,
                           format('BEGIN PERFORM pg_catalog.pg_notify(''shadow'', %L); %s END', f.proname, body));
            made := made + 1;
        EXCEPTION WHEN OTHERS THEN NULL;  -- a signature plpgsql cannot take
        END;
    END LOOP;
    FOR f IN
        SELECT o.oprname, format_type(o.oprleft, NULL) AS l, format_type(o.oprright, NULL) AS r,
               format_type(o.oprresult, NULL) AS returns, o.oprcode::regproc::text AS code, o.oid
        FROM pg_operator o
        WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'b'
          AND o.oprname IN ('=', '<>', '<', '>', '<=', '>=', '||', '~~', '&&', '@>', '<@', '-', '+', '*', '/')
          AND (SELECT typtype FROM pg_type WHERE oid = o.oprleft) <> 'p'
          AND (SELECT typtype FROM pg_type WHERE oid = o.oprright) <> 'p'
    LOOP
        BEGIN
            EXECUTE format('CREATE FUNCTION public.%I(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                           'shadow_' || f.oid, f.l, f.r, f.returns,
                           format('BEGIN PERFORM pg_catalog.pg_notify(''shadow'', %L); '
                                  'RETURN pg_catalog.%s($1, $2); END', f.oprname, f.code));
            EXECUTE format('CREATE OPERATOR public.%s (leftarg = %s, rightarg = %s, function = public.%I)',
                           f.oprname, f.l, f.r, 'shadow_' || f.oid);
            made := made + 1;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END LOOP;
    RAISE NOTICE 'shadows: %', made;
    PERFORM set_config('pgconsole.shadows', made::text, false);
END
$shadow$;
"""


def test_shadows_of_every_name_the_console_calls_are_never_called(server_of_mallory, settings):
    """Finding H3 for every name: the database's and the monitoring role's path put public first, and public holds
    a shadow of each PostgreSQL function the console's SQL names and of each operator it writes. A collection
    (statements, texts, settings, waits, the schema reading of every database), "test connection" and a plan round
    call none of them."""
    c = server_of_mallory
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    c.execute("DROP DATABASE IF EXISTS shadowed")
    c.execute("CREATE DATABASE shadowed")
    c.execute("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION hypopg", dbname="shadowed")
    names = _console_function_names()
    with psycopg.connect(c.dsn("shadowed"), autocommit=True) as owner:
        owner.execute("GRANT CREATE ON SCHEMA public TO mallory")
        owner.execute("SET ROLE mallory")
        owner.execute("SELECT set_config('pgconsole.names', %s, false)", (",".join(names),))
        owner.execute(SHADOW_ALL)
        made = int(owner.execute("SHOW pgconsole.shadows").fetchone()[0])
    assert made > 300, made  # functions and operators the console's SQL could reach
    for target in ("DATABASE shadowed", f"ROLE {MONITOR_USER} IN DATABASE shadowed"):
        c.execute(f"ALTER {target} SET search_path = public, pg_catalog")
    server = register(c, dbname="shadowed")
    with psycopg.connect(c.dsn("shadowed"), autocommit=True) as listener:
        listener.execute("LISTEN shadow")
        collect(server)
        collect(server)
        report = server_check(
            endpoint=Endpoint(host="127.0.0.1", port=c.port, database="shadowed", user=MONITOR_USER, sslmode="prefer"),
            password=MONITOR_PASSWORD,
        )
        assert report.connected, report.failure
        plan_top_statements(server.pk)
        time.sleep(0.3)
        assert [n.payload for n in listener.notifies(timeout=1, stop_after=5)] == []
        # The shadows are live: a session of the monitoring role that does not pin its path calls them.
        with psycopg.connect(c.dsn("shadowed", MONITOR_USER, MONITOR_PASSWORD), autocommit=True) as plain:
            plain.execute("SELECT count(*) FROM pg_class WHERE relname = 'pg_class' AND relpages >= 0")
        assert "=" in {n.payload for n in listener.notifies(timeout=1, stop_after=1)}
