"""/healthz: 200 `ok` while the history store answers, 503 with a short reason when it does not; no login,
never cached, and not redirected with HTTPS=true, so that docker-compose.yml's web healthcheck holds there.
The healthcheck command itself is run once against gunicorn in production mode."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from console.views.health import HISTORY_STORE_DOWN

ROOT = Path(__file__).resolve().parents[3]
# What the settings read that a developer's shell (or the test settings) may have set.
CLEARED = ("DEBUG", "SECRET_KEY", "CREDENTIALS_KEY", "STATIC_ROOT", "ALLOWED_HOSTS", "HTTPS", "DJANGO_SETTINGS_MODULE")


def _clean_env(**env: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in CLEARED}, **env}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.django_db
def test_ok_without_a_login_and_never_cached():
    assert reverse("healthz") == "/healthz"
    for host in ("testserver", "127.0.0.1"):  # compose's healthcheck asks as 127.0.0.1
        response = Client().get("/healthz", HTTP_HOST=host)
        assert response.status_code == 200, (host, response)
        assert response.content == b"ok" and response["Content-Type"].startswith("text/plain")
        assert "no-store" in response["Cache-Control"]
        # The other middleware still ran (and did not get in the way).
        assert "default-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_only_get():
    client = Client()
    assert client.post("/healthz").status_code == 405
    assert client.put("/healthz").status_code == 405


def _https_settings() -> dict:
    """The security settings console/settings.py makes of HTTPS=true (loaded in a fresh interpreter)."""
    code = (
        "import json, console.settings as s; print(json.dumps({'SECURE_SSL_REDIRECT': s.SECURE_SSL_REDIRECT, "
        "'SECURE_REDIRECT_EXEMPT': s.SECURE_REDIRECT_EXEMPT, 'SECURE_PROXY_SSL_HEADER': s.SECURE_PROXY_SSL_HEADER}))"
    )
    env = _clean_env(DEBUG="true", HTTPS="true")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    out["SECURE_PROXY_SSL_HEADER"] = tuple(out["SECURE_PROXY_SSL_HEADER"])
    return out


@pytest.mark.django_db
def test_with_https_pages_are_redirected_but_not_the_health_check():
    https = _https_settings()
    assert https["SECURE_SSL_REDIRECT"] is True
    with override_settings(**https):
        client = Client()  # its middleware is loaded at its first request: with these settings
        assert client.get("/healthz").status_code == 200
        login = client.get("/admin/login/")
        assert login.status_code == 301 and login["Location"] == "https://testserver/admin/login/"
        # Behind the TLS proxy, pages are served.
        assert client.get("/admin/login/", HTTP_X_FORWARDED_PROTO="https").status_code == 200


def test_503_with_a_short_reason_when_the_history_store_does_not_answer():
    port = _free_port()  # nothing listens there: refused at once
    dsn = f"postgres://pgconsole:s3cret-pw@127.0.0.1:{port}/pgconsole"
    code = (
        "import json, django; django.setup(); from django.test import Client; "
        "r = Client().get('/healthz', HTTP_HOST='127.0.0.1'); "
        "print(json.dumps([r.status_code, r.content.decode(), r['Content-Type'], r['Cache-Control']]))"
    )
    env = _clean_env(DEBUG="true", DJANGO_SETTINGS_MODULE="console.settings", DATABASE_URL=dsn)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    status, body, content_type, cache_control = json.loads(result.stdout.splitlines()[-1])
    assert (status, body) == (503, HISTORY_STORE_DOWN)
    assert content_type.startswith("text/plain") and "no-store" in cache_control
    # Whoever reaches the port learns nothing of the store's address or credentials.
    assert "s3cret-pw" not in body and "pgconsole:" not in body and str(port) not in body and len(body) < 60
    # The operator's log says what happened.
    assert "healthz: history store not answering" in result.stderr


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"gunicorn exited ({proc.returncode}):\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"gunicorn did not listen on {port} within {timeout_s} s:\n{log.read_text()}")


@pytest.fixture
def https_gunicorn(tmp_path, transactional_db, collected_static):
    """gunicorn as the image runs it, with HTTPS=true and DEBUG off (real keys, collected static files), on
    the test database; -> (its port, the environment of a healthcheck command, its log)."""
    keys = tmp_path / "keys.env"
    subprocess.run([sys.executable, "console/keys.py", str(keys)], cwd=ROOT, check=True, capture_output=True)
    key_env = dict(line.split("=", 1) for line in keys.read_text().splitlines() if line and not line.startswith("#"))
    db = connection.settings_dict
    port = _free_port()
    env = _clean_env(
        **key_env,
        DEBUG="false",
        HTTPS="true",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        STATIC_ROOT=str(collected_static.root),  # as the image's build collects them
        # A home of its own, as in the image: gunicorn puts its control socket there (~/.gunicorn/gunicorn.ctl),
        # where another gunicorn of this machine's user would take it over.
        HOME=str(tmp_path / "home"),
    )
    env.pop("XDG_RUNTIME_DIR", None)  # it would win over HOME for that socket
    (tmp_path / "home").mkdir()
    log = tmp_path / "gunicorn.log"
    gunicorn = Path(sys.executable).parent / "gunicorn"
    with log.open("w") as out:
        # Its own session, so that only this gunicorn and its workers are ever killed below.
        # compose's web command (workers, threads), bound to this test's port.
        web = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]
        _, *args = web["command"]
        command = [str(gunicorn), *(f"127.0.0.1:{port}" if arg == "0.0.0.0:8000" else arg for arg in args)]
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_listening(port, proc, log)
        # `python` in the command is the image's; here, this virtualenv's.
        check_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        yield port, check_env, log
    finally:
        proc.terminate()  # the master stops its workers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.django_db(transaction=True)
def test_the_compose_healthcheck_passes_against_gunicorn_with_https(https_gunicorn):
    port, check_env, log = https_gunicorn
    web = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]
    kind, *command = web["healthcheck"]["test"]
    assert kind == "CMD" and any("127.0.0.1:8000/healthz" in arg for arg in command)
    command = [arg.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for arg in command]
    # As Docker runs it: a failure within the start period does not count (a worker still loading Django on a
    # busy machine answers its first request late), so the check is repeated until it passes or the period ends.
    start_period_s = int(web["healthcheck"]["start_period"].removesuffix("s"))
    deadline = time.monotonic() + start_period_s
    while True:
        check = subprocess.run(command, env=check_env, capture_output=True, text=True, timeout=30)
        if check.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert check.returncode == 0, f"{check.stderr}\n{log.read_text()}"
    # HTTPS really was on: the command against a page (what the healthcheck asked before) fails on the redirect.
    page = [arg.replace("/healthz", "/admin/login/") for arg in command]
    redirected = subprocess.run(page, env=check_env, capture_output=True, text=True, timeout=30)
    assert redirected.returncode != 0 and "URLError" in redirected.stderr, redirected.stderr
    log_text = log.read_text()
    assert "Traceback" not in log_text, log_text
