"""Production mode, outside Docker: exactly the commands of docker-compose.yml's services (migrate, the
Dockerfile's collectstatic, gunicorn, the collection, alerts, alert rules, plans and tasks workers, the wait sampler,
beat, the demo server's registration) with DEBUG off and the keys of the documented env file
(`python3 console/keys.py .env.compose`), against a database of their own. A user logs in with a real browser,
opens the fleet, a server and a statement, sets the weekly report and opts in, requests an audit export and
downloads it; beat mails the weekly report; beat has the plans worker read the top statement's plan; each
service's healthcheck command passes. Only the addresses (and the plans' tick, 5 s instead of 15 minutes) change:
the services' host names, ports and folders become this machine's."""

from __future__ import annotations

import hashlib
import io
import os
import re
import socket
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import redis
import yaml
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import Page, expect, sync_playwright

from devenv import browser as chromium
from devenv.ports import HISTORY_PORT
from tests.conftest import APP_DB, MONITOR_PASSWORD, MONITOR_USER
from tests.processes import BIN, ROOT, Processes, age_beat_schedule, processes, wait_for
from tests.reports.weekly_world import Inbox, SmtpServer, free_port
from tests.world import run

pytestmark = pytest.mark.slow

DB = "pgconsole_production_test"
ADMIN_DSN = f"postgresql://postgres@127.0.0.1:{HISTORY_PORT}/postgres"
REDIS_URL = "redis://127.0.0.1:6379/11"  # a database of its own (docs/development.md, Redis databases)
ADMIN, PASSWORD, EMAIL = "admin", "a-long-production-password", "admin@production.example"
LOCAL = "%Y-%m-%dT%H:%M"


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def local(argv: list[str], *, port: int, folder: Path, dsn: str = "") -> list[str]:
    """A compose command as it runs on this machine: this virtualenv's programs, loopback, the test's folder."""
    programs = {"python": str(BIN / "python"), "gunicorn": str(BIN / "gunicorn"), "celery": str(BIN / "celery")}
    args = [a.replace("0.0.0.0:8000", f"127.0.0.1:{port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in argv]
    args = [a.replace("/tmp/", f"{folder}/") for a in args]  # the compose file's paths only, not this machine's
    args = [dsn if a.startswith("postgresql://") and "@monitored:" in a else a for a in args]
    return [programs.get(argv[0], args[0]), *args[1:]]


def healthcheck(service: dict, *, port: int, folder: Path) -> list[str]:
    """The service's healthcheck command, as Docker runs it (CMD: the words, CMD-SHELL: sh -c)."""
    kind, *test = service["healthcheck"]["test"]
    if kind == "CMD-SHELL":
        # Compose's $$ is a literal $; the container's HOSTNAME is the worker's node name there, this host's here.
        script = test[0].replace("$$", "$").replace("celery ", f"{BIN / 'celery'} ", 1)
        return ["sh", "-c", script]
    return local(test, port=port, folder=folder)


def _env_file(path: Path) -> dict[str, str]:
    subprocess.run([str(BIN / "python"), "console/keys.py", str(path)], cwd=ROOT, check=True, capture_output=True)
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def production_env(folder: Path, *, port: int, smtp_port: int, static_root: Path | None = None) -> dict[str, str]:
    """The environment of the compose file's console services, keys from the documented env file, addresses
    of this machine."""
    return {
        **compose()["web"]["environment"],
        **_env_file(folder / ".env.compose"),
        "DJANGO_SETTINGS_MODULE": "console.settings",  # pytest's own is tests.settings
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{HISTORY_PORT}/{DB}",
        "REDIS_URL": REDIS_URL,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "EXPORT_ROOT": str(folder / "exports"),
        "STATIC_ROOT": str(static_root or folder / "static"),
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp_port}",
        "DEFAULT_FROM_EMAIL": "pgconsole <reports@production.example>",
        "CONSOLE_URL": f"http://127.0.0.1:{port}",
        "HOME": str(folder),  # gunicorn's control socket, fontconfig's cache: the image user's home
        "MONITOR_ALLOW_LOOPBACK": "true",  # the monitored cluster runs on this machine
        "PLANS_TICK_S": "5",  # beat's plans round every 5 s, not every 15 minutes: the test's window
    }


@dataclass
class Production:
    procs: Processes
    folder: Path
    port: int
    smtp: SmtpServer
    cluster: object
    env: dict[str, str]
    outputs: dict[str, str] = field(default_factory=dict)
    browser_errors: list[str] = field(default_factory=list)
    seen: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sql(self, query: str, params: tuple | list = ()) -> list[tuple]:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{HISTORY_PORT}/{DB}", autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def manage(self, *args: str, **env: str) -> str:
        return self.procs.run("manage.py", [str(BIN / "python"), "manage.py", *args], **env)


def _database() -> None:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")


def _drop_database() -> None:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def _watch(page: Page, errors: list[str]) -> None:
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status} {r.url}") if r.status >= 500 else None)


def _log_in(page: Page) -> None:
    page.goto("/")
    page.get_by_label("User name").fill(ADMIN)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Fleet")).to_be_visible()


def _report_due_now(p: Production, page: Page, org_id: int) -> None:
    """On the organization's report page: the report due at this very hour (UTC), and sent to me."""
    now = datetime.now(UTC)
    page.goto(f"/organizations/{org_id}/reports/")
    page.get_by_label("Day").select_option(str(now.weekday()))
    page.get_by_label("Hour").select_option(str(now.hour))
    page.locator("#id_time_zone").fill("UTC")
    page.get_by_role("button", name="Save settings").click()
    page.get_by_role("button", name="Send it to me every week").click()
    expect(page.get_by_role("button", name="Stop sending it to me")).to_be_visible()


def _read_the_console(p: Production, page: Page, server_id: int) -> None:
    page.goto("/fleet/")
    row = page.locator("table tr", has=page.get_by_role("link", name="demo", exact=True))
    expect(row.first).to_be_visible()
    p.seen["fleet_row"] = row.first.inner_text()
    page.get_by_role("link", name="demo", exact=True).first.click()
    expect(page.get_by_role("heading", name="demo")).to_be_visible()
    p.seen["server_url"] = page.url
    query = page.locator("#top-statements td.query-cell a", has_text="prod_items").first
    expect(query).to_be_visible(timeout=30_000)
    query.click()
    expect(page.get_by_role("heading", name="Statement")).to_be_visible()
    p.seen["statement_sql"] = page.locator("pre.sql").inner_text()


def _test_the_connection(p: Production, page: Page, server_id: int) -> None:
    """ "Test connection" on the server's form: queued for compose's collection worker, polled by the page."""
    page.goto(f"/manage/servers/{server_id}/edit/")
    page.get_by_role("button", name="Test connection").click()
    summary = page.locator("#check-result .check-summary")
    expect(summary).to_contain_text("ready", timeout=60_000)
    p.seen["check_summary"] = summary.inner_text()


def _export_and_download(p: Production, page: Page, org_id: int) -> None:
    page.goto(f"/organizations/{org_id}/exports/")
    page.get_by_label("demo").check()
    now = datetime.now(UTC)
    page.locator("#id_window_start").fill((now - timedelta(minutes=30)).strftime(LOCAL))
    page.locator("#id_window_end").fill(now.strftime(LOCAL))
    page.get_by_role("button", name="Request the export").click()
    expect(page.locator(".messages")).to_contain_text("is queued")
    link = page.locator("#exports-list tbody tr").first.get_by_role("link", name="audit-")
    expect(link).to_be_visible(timeout=120_000)  # built by the worker; the list polls until it is done
    with page.expect_download() as download:
        link.click()
    p.seen["download"] = Path(download.value.path()).read_bytes()


def _compose_up(p: Production, services: dict, dsn: str) -> None:
    """The one-shot services, then the long-running ones, as compose orders them (the image's build step, its
    collectstatic, ran once for the test run: tests/static_world.py)."""
    here = {"port": p.port, "folder": p.folder}
    p.outputs["migrate"] = p.procs.run("migrate", local(services["migrate"]["command"], **here))
    for name in ("web", "worker", "alerts", "alert-rules", "plans", "tasks", "sampler"):
        p.procs.start(name, local(services[name]["command"], **here))
    web_check = healthcheck(services["web"], **here)
    wait_for(
        lambda: subprocess.run(web_check, env=p.env, capture_output=True).returncode == 0,
        60,
        what="the web healthcheck",
        logs=p.procs.logs,
    )
    p.outputs["register"] = p.procs.run("register-demo", local(services["register-demo"]["command"], **here, dsn=dsn))
    p.manage("servers", "update", "demo", "--interval", "5")  # the product's shortest, for the test's sake
    p.manage("createsuperuser", "--noinput", "--username", ADMIN, "--email", EMAIL, DJANGO_SUPERUSER_PASSWORD=PASSWORD)


def _snapshots(p: Production, server_id: int, kind: str) -> int:
    return p.sql("SELECT count(*) FROM collectors_snapshot WHERE server_id = %s AND kind = %s", [server_id, kind])[0][0]


def _sleeper_plan(p: Production, server_id: int) -> list[tuple]:
    """The sleeping statement's last EXPLAIN and the access paths of its plans, once the plans worker has read it."""
    return p.sql(
        "SELECT a.code, a.reason, array_agg(h.access_paths::text ORDER BY h.id) FROM collectors_plan_attempt a "
        "JOIN collectors_statement s ON s.server_id = a.server_id AND s.id = a.statement_id "
        "LEFT JOIN collectors_statement_plan sp ON sp.server_id = a.server_id AND sp.statement_id = a.statement_id "
        "LEFT JOIN collectors_plan_shape h ON h.server_id = sp.server_id AND h.id = sp.shape_id "
        "WHERE a.server_id = %s AND s.query LIKE '%%prod_items, pg_sleep%%' GROUP BY a.code, a.reason",
        [server_id],
    )


@pytest.fixture(scope="module")
def production(pg_clusters, tmp_path_factory, collected_static) -> Iterator[Production]:
    folder = tmp_path_factory.mktemp("production")
    services = compose()
    port, smtp = free_port(), SmtpServer(Inbox(), free_port())
    env = production_env(folder, port=port, smtp_port=smtp.port, static_root=collected_static.root)
    assert env["DEBUG"] == "false"
    _database()
    redis.Redis.from_url(REDIS_URL).flushdb()
    smtp.start()
    cluster = pg_clusters[16]
    run(cluster, "DROP TABLE IF EXISTS prod_items; CREATE TABLE prod_items (id int)")
    run(cluster, f"GRANT SELECT ON prod_items TO {MONITOR_USER}")  # its statements' plans may be read
    try:
        with processes(folder, env) as procs, sync_playwright() as pw:
            p = Production(procs, folder, port, smtp, cluster, env)
            _compose_up(p, services, cluster.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD))
            org_id, server_id = p.sql("SELECT organization_id, id FROM console_server WHERE name = 'demo'")[0]
            browser = pw.chromium.launch(executable_path=chromium.check(), headless=True, args=chromium.launch_args())
            context = browser.new_context(base_url=p.url, viewport=chromium.VIEWPORT, timezone_id="UTC")
            context.set_default_timeout(10_000)
            page = context.new_page()
            _watch(page, p.browser_errors)
            _log_in(page)
            _report_due_now(p, page, org_id)
            # Beat back after a stop: every entry of the schedule is due at once, the weekly report's too.
            beat = local(services["beat"]["command"], port=port, folder=folder)
            age_beat_schedule(Path(beat[beat.index("--schedule") + 1]), by=timedelta(hours=2))
            procs.start("beat", beat)
            wait_for(
                lambda: _snapshots(p, server_id, "baseline") >= 1,
                60,
                what="the demo server's baseline",
                logs=procs.logs,
            )
            run(cluster, "SELECT count(*) FROM prod_items", 5)
            run(cluster, "SELECT count(*) FROM prod_items, pg_sleep(0.2)", 5)  # a second: among the top statements
            wait_for(lambda: _snapshots(p, server_id, "delta") >= 1, 60, what="a delta", logs=procs.logs)
            _read_the_console(p, page, server_id)
            _test_the_connection(p, page, server_id)
            _export_and_download(p, page, org_id)
            p.seen["export"] = p.sql("SELECT status, sha256, file_name FROM reports_auditexport")
            wait_for(lambda: _sleeper_plan(p, server_id), 60, what="the top statement's plan", logs=procs.logs)
            p.seen["plan"] = _sleeper_plan(p, server_id)
            wait_for(lambda: smtp.inbox.count(EMAIL) >= 1, 120, what="the weekly report from beat", logs=procs.logs)
            # Each service's healthcheck, as Docker runs it inside the service's container.
            check_env = {**os.environ, **env, "HOSTNAME": socket.gethostname()}
            p.seen["checks"] = {
                name: subprocess.run(
                    healthcheck(services[name], port=port, folder=folder), env=check_env, capture_output=True, text=True
                )
                for name in ("web", "worker", "alerts", "alert-rules", "plans", "tasks", "sampler", "beat")
            }
            context.close()
            browser.close()
            yield p
    finally:
        smtp.stop()
        _drop_database()
        redis.Redis.from_url(REDIS_URL).flushdb()


def test_the_compose_services_run_as_written(production):
    p = production
    assert "Applying reports.0003_export_claim... OK" in p.outputs["migrate"] or "No migrations" in p.outputs["migrate"]
    assert (Path(p.env["STATIC_ROOT"]) / "staticfiles.json").is_file()  # hashed names, as WhiteNoise serves them
    assert "registered" in p.outputs["register"].lower() or "added" in p.outputs["register"].lower()
    # The admin made by createsuperuser under the product's settings: Django's PBKDF2 at its full rounds (the
    # tests' own settings take one round), and gunicorn logged them in with it.
    [(password,)] = p.sql("SELECT password FROM auth_user WHERE username = %s", [ADMIN])
    assert password.startswith(f"pbkdf2_sha256${PBKDF2PasswordHasher.iterations}$"), password[:30]
    for name, done in p.seen["checks"].items():
        assert done.returncode == 0, f"the {name} healthcheck failed: {done.stdout}{done.stderr}"
    for proc in p.procs.started:
        assert proc.alive(), f"{proc.name} exited:\n{proc.text()[-3000:]}"
        assert "Traceback" not in proc.text(), f"{proc.name}:\n{proc.text()[-5000:]}"


def test_a_user_reads_the_fleet_a_server_and_a_statement(production):
    p = production
    assert not p.browser_errors, p.browser_errors
    cells = p.seen["fleet_row"].split("\t")
    assert cells[0] == "ok" and "demo" in cells and any(c.startswith("16.") for c in cells), cells
    assert "SELECT count(*) FROM prod_items" in p.seen["statement_sql"]


def test_test_connection_runs_on_the_collection_worker(production):
    """The web process queues the check; compose's collection worker (queues collection,checks) runs it."""
    summary = production.seen["check_summary"]
    assert summary.startswith("ready") and "monitor@127.0.0.1:" in summary and "/app" in summary, summary


def test_an_audit_export_built_by_the_worker_is_downloaded(production):
    p = production
    [(status, sha256, file_name)] = p.seen["export"]
    data = p.seen["download"]
    assert status == "done" and hashlib.sha256(data).hexdigest() == sha256
    assert (p.folder / "exports" / file_name).read_bytes() == data
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None and {"audit.pdf", "audit.json", "SHA256SUMS"} <= set(z.namelist())
        assert z.read("audit.pdf").startswith(b"%PDF")


def test_beat_mails_the_weekly_report(production):
    p = production
    [message] = p.smtp.inbox.to(EMAIL)
    assert "demo" in message["Subject"]
    # The last complete week has no history here (the server is minutes old): a report without charts.
    text, html = (part.get_content() for part in message.get_payload())
    assert "demo" in text and f"{p.url}/servers/" in text and f'href="{p.url}/' in html  # links to CONSOLE_URL
    assert p.sql("SELECT kind, status FROM reports_weeklysend") == [("weekly", "sent")]


def test_beat_has_the_plans_worker_read_the_top_statements_plan(production):
    """Beat's plans entry sends the demo server's round to the `plans` queue; compose's plans worker EXPLAINs the
    server's top statements there (the monitoring role may read the table: it is planned, not refused)."""
    [(code, reason, shapes)] = production.seen["plan"]
    assert (code, reason) == ("planned", "")
    assert any("Seq Scan on prod_items" in shape for shape in shapes), shapes
    worker = next(proc for proc in production.procs.started if proc.name == "plans")
    assert "collectors.tasks.plan_server" in worker.text() and "plans of server" in worker.text()


def _deploy_warnings(env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", "check", "--deploy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    return set(re.findall(r"\(((?:security|console)\.[EW]\d+)\)", done.stdout + done.stderr))


def test_check_deploy_is_clean_apart_from_what_the_docs_explain(tmp_path):
    """Behind TLS (HTTPS=true) only the HSTS choices that are the operator's domain's remain; over plain HTTP the
    four that HTTPS=true sets and the console's own error, a warning once plain HTTP is acknowledged.
    docs/operations.md ("TLS in front") names each."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    env = production_env(tmp_path, port=8000, smtp_port=25)
    behind_tls = _deploy_warnings({**env, "HTTPS": "true"})
    plain = _deploy_warnings({**env, "HTTPS": "false", "ALLOW_PLAIN_HTTP": "false"})
    acknowledged = _deploy_warnings({**env, "HTTPS": "false", "ALLOW_PLAIN_HTTP": "true"})
    http_warnings = {"security.W004", "security.W008", "security.W012", "security.W016"}
    assert behind_tls <= {"security.W005", "security.W021"}, behind_tls
    assert plain == {*http_warnings, "console.E001"}, plain
    assert acknowledged == {*http_warnings, "console.W001"}, acknowledged
    for warning in behind_tls | plain | acknowledged:
        assert warning in operations, f"docs/operations.md does not explain {warning}"
