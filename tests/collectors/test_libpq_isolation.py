"""libpq offers a monitored server nothing of the console's machine, with every such thing present: a password
file (~/.pgpass and PGPASSFILE) and PGPASSWORD holding the monitoring role's password, a service file naming
the server with that password (PGSERVICE), and a client certificate and key (~/.postgresql and PGSSLCERT,
PGSSLKEY) that libpq could not even read. A server registered without a password is refused for want of one; one
registered with its password over TLS is collected, the certificate never read; and the console's processes
start with no PG* variable."""

from __future__ import annotations

import os
import subprocess

import pytest

from collectors.connection import isolate_libpq_environment
from collectors.services import server_collect
from inventory.models import Server
from tests.conftest import APP_DB, MONITOR_PASSWORD, MONITOR_USER
from tests.processes import BIN, ROOT, console_env
from tests.world import register

pytestmark = pytest.mark.django_db
MAJOR = 15


@pytest.fixture
def machine_credentials(pg_clusters, tmp_path, monkeypatch):
    """The console account's home and environment, holding the monitoring role's credentials."""
    c = pg_clusters[MAJOR]
    home = tmp_path / "home"
    (home / ".postgresql").mkdir(parents=True)
    pgpass = home / ".pgpass"
    pgpass.write_text(f"*:*:*:{MONITOR_USER}:{MONITOR_PASSWORD}\n")
    pgpass.chmod(0o600)
    for name in ("postgresql.crt", "postgresql.key"):
        (home / ".postgresql" / name).write_text("not a certificate: libpq fails if it reads this\n")
        (home / ".postgresql" / name).chmod(0o600)
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[monitored]\nhost=127.0.0.1\nport={c.port}\ndbname={APP_DB}\nuser={MONITOR_USER}\n"
        f"password={MONITOR_PASSWORD}\n"
    )
    env = {
        "HOME": str(home),
        "PGPASSFILE": str(pgpass),
        "PGPASSWORD": MONITOR_PASSWORD,
        "PGSERVICEFILE": str(services),
        "PGSERVICE": "monitored",
        "PGSSLCERT": str(home / ".postgresql" / "postgresql.crt"),
        "PGSSLKEY": str(home / ".postgresql" / "postgresql.key"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return c, env


def test_a_server_without_a_password_is_offered_none_of_the_machines(machine_credentials):
    c, _ = machine_credentials
    dropped = isolate_libpq_environment()  # as the console's processes do at start (history/apps.py)
    assert {"PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGSSLCERT", "PGSSLKEY"} <= set(dropped)
    bare = register(c, password=None)
    result = server_collect(server_id=bare.pk)
    assert not result.ok
    bare.refresh_from_db()
    assert "no password" in bare.last_error_message.lower(), bare.last_error_message
    # The same server with its password, over TLS: collected, the home's certificate never read.
    with_password = register(c)
    Server.objects.filter(pk=with_password.pk).update(sslmode="require")
    assert server_collect(server_id=with_password.pk).ok


def test_without_the_isolation_the_machines_password_would_have_been_offered(machine_credentials):
    """The control: libpq, left to itself, logs in with what the machine holds (so the test above shows the
    isolation, not a server that refuses anyway)."""
    import psycopg

    c, _ = machine_credentials
    with psycopg.connect(f"host=127.0.0.1 port={c.port} dbname={APP_DB} user={MONITOR_USER} sslmode=disable") as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == MONITOR_USER


def test_the_consoles_processes_start_without_pg_variables(machine_credentials):
    _, env = machine_credentials
    script = "import os; print(sorted(n for n in os.environ if n.startswith('PG') and not n.startswith('PGCONSOLE')))"
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env={**os.environ, **console_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
