"""Every session the console opens on a monitored server has its settings pinned (collectors/connection.py): the
search path PostgreSQL's own schema alone, standard strings, `= NULL` as the standard reads it, no JIT, whatever
the database and the role set. So a function a user of the server planted in public, with a signature that matches
the console's calls better than PostgreSQL's, is never what the console's SQL calls (finding H3: mallory's
public.pg_relation_size(oid) ran in the schema reading's transaction and sent her the rows of a table she could
not read)."""

import time

import psycopg
import pytest

from collectors import connection as monitored
from collectors.connection import PINNED_SETTINGS
from history.models import SchemaTable
from tests.world import collect, register

pytestmark = pytest.mark.django_db(transaction=True)
SETTINGS = {  # what the database and the role set against the console: each outranked by the startup options
    "search_path": "public, pg_catalog",
    "standard_conforming_strings": "off",
    "transform_null_equals": "on",
    "jit": "on",
}  # (values as ALTER ... SET takes them: a list, unquoted)
SHADOW = """
CREATE FUNCTION public.pg_relation_size(oid) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('leak', current_user || ':' || (SELECT string_agg(secret, ',') FROM private.secrets));
    RETURN 0;
END $$;
"""


@pytest.fixture
def hostile(pg_clusters):
    """The database and the monitoring role set against the console, and mallory's shadow of pg_relation_size in
    public, with a table only the superuser and the monitoring role may read; undone after."""
    c = pg_clusters[15]
    c.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mallory') THEN "
        "CREATE ROLE mallory LOGIN; END IF; END $$"
    )
    for name, value in SETTINGS.items():
        c.execute(f"ALTER DATABASE app SET {name} = {value}")
        c.execute(f"ALTER ROLE monitor IN DATABASE app SET {name} = {value}")
    c.execute(
        "CREATE SCHEMA private; CREATE TABLE private.secrets (secret text); "
        "INSERT INTO private.secrets VALUES ('s3cr3t'); GRANT USAGE ON SCHEMA private TO monitor; "
        "GRANT SELECT ON private.secrets TO monitor; GRANT CREATE ON SCHEMA public TO mallory; "
        "SET ROLE mallory; " + SHADOW,
        dbname="app",
    )
    try:
        yield c
    finally:
        for name in SETTINGS:
            c.execute(f"ALTER DATABASE app RESET {name}")
            c.execute(f"ALTER ROLE monitor IN DATABASE app RESET {name}")
        c.execute(
            "DROP FUNCTION public.pg_relation_size(oid); DROP SCHEMA private CASCADE; "
            "REVOKE CREATE ON SCHEMA public FROM mallory",
            dbname="app",
        )


def test_the_consoles_sessions_keep_their_own_settings_whatever_the_database_and_the_role_set(hostile):
    server = register(hostile)
    conn = monitored.connect(monitored.monitoring_target(server))
    try:
        shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in PINNED_SETTINGS}
    finally:
        conn.close()
    assert shown == PINNED_SETTINGS
    # ... while any other session of the monitoring role gets what was set.
    with psycopg.connect(hostile.dsn("app", "monitor", "monitor-pw")) as plain:
        assert plain.execute("SHOW search_path").fetchone()[0] == "public, pg_catalog"


def test_the_schema_reading_calls_postgresqls_functions_not_mallorys(hostile, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    hostile.execute("CREATE TABLE IF NOT EXISTS public.sized (id int); INSERT INTO public.sized SELECT 1", dbname="app")
    server = register(hostile)
    with psycopg.connect(hostile.dsn("app"), autocommit=True) as listener:
        listener.execute("LISTEN leak")
        collect(server)
        time.sleep(0.2)
        assert [n.payload for n in listener.notifies(timeout=0.5, stop_after=5)] == []
    sized = SchemaTable.objects.get(server_id=server.pk, database="app", name="sized")
    assert sized.size_bytes == 8192  # PostgreSQL's pg_relation_size: the shadow answers 0
    # The shadow is there, and takes the call wherever the path lets it: the attack is real.
    with psycopg.connect(hostile.dsn("app", "monitor", "monitor-pw"), autocommit=True) as plain:
        plain.execute("LISTEN leak")
        plain.execute("SELECT pg_relation_size(oid) FROM pg_class WHERE relname = 'sized'")
        assert [n.payload for n in plain.notifies(timeout=1, stop_after=1)] == ["monitor:s3cr3t"]
