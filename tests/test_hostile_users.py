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
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.db.models import F

from advisor.selectors import recommendations
from advisor.services import server_advise
from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, monitored_setup, start_many, stop_many
from devenv.ports import TEST_ATTACK_PORT
from history import redact
from history.models import PlanAttempt, SchemaIndex, Statement
from readings.plans.auto import plan_top_statements
from readings.plans.explain import HELPER_SQL
from readings.plans.service import statement_plan
from tests import slots
from tests.conftest import MONITOR_HBA
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER, collect, register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

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
