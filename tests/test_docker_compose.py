"""docker-compose.yml and the Dockerfile stay consistent with the settings (no Docker engine here: they are
parsed): no key in the file, migrations before anything starts, healthchecks, audit bundles shared by web and
worker, the demo server ready and registered."""

import re
import shlex
from pathlib import Path

import environ
import pytest
import yaml

from console.keys import DEV_CREDENTIALS_KEY, DEV_SECRET_KEY, env_file_text, key_problems
from inventory.connection import parse_dsn
from tests.dockerfile import dockerfile_env, dockerfile_instructions

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = (
    "migrate",
    "web",
    "worker",
    "alerts",
    "alert-rules",
    "plans",
    "tasks",
    "sampler",
    "beat",
    "register-demo",
)  # the services that run the console's image
WORKERS = ("worker", "alerts", "alert-rules", "plans", "tasks")
LONG_RUNNING = ("history", "redis", "web", *WORKERS, "sampler", "beat", "monitored")
ENV_FILE = ".env.compose"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def _settings_names() -> set[str]:
    """The environment variables console/settings.py reads."""
    text = (ROOT / "console" / "settings.py").read_text()
    return set(re.findall(r'\benv(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]*)"', text))


def _command(service: dict) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else command


def _healthcheck(service: dict) -> str:
    return " ".join(service["healthcheck"]["test"])


def test_services_images_and_environment(services):
    assert set(services) == {
        "history",
        "redis",
        "migrate",
        "web",
        "worker",
        "alerts",
        "alert-rules",
        "plans",
        "tasks",
        "sampler",
        "beat",
        "monitored",
        "monitored-setup",
        "register-demo",
    }
    assert services["history"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    for name in CONSOLE:
        env = services[name]["environment"]
        db = environ.Env.db_url_config(env["DATABASE_URL"])
        assert db["HOST"] == "history" and db["NAME"] == services["history"]["environment"]["POSTGRES_DB"]
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert env["DEBUG"] == "false"
        assert (ROOT / services[name]["build"] / "Dockerfile").exists()
    assert "worker" in _command(services["worker"]) and "beat" in _command(services["beat"])
    # Only the web console is published; the databases and the broker stay on the private network.
    assert [name for name, service in services.items() if service.get("ports")] == ["web"]


def test_every_variable_it_sets_is_read_by_the_settings(services):
    names = _settings_names()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CREDENTIALS_KEY", "DEBUG", "ALLOWED_HOSTS"} <= names
    for name in CONSOLE:
        assert set(services[name]["environment"]) <= names, name
    written = {line.split("=", 1)[0] for line in env_file_text().splitlines() if not line.startswith("#")}
    assert written == {"SECRET_KEY", "CREDENTIALS_KEY"} <= names


def test_no_key_is_committed(services):
    text = (ROOT / "docker-compose.yml").read_text()
    for name in CONSOLE:
        assert services[name]["env_file"] == [ENV_FILE]
        assert not {"SECRET_KEY", "CREDENTIALS_KEY"} & set(services[name]["environment"]), name
    assert DEV_SECRET_KEY not in text and DEV_CREDENTIALS_KEY not in text and "change-me" not in text
    assert not re.search(r"KEY\s*[:=]", text)
    assert not re.search(r"[A-Za-z0-9_-]{43}=", text), "something that looks like a Fernet key"
    # The generated file never reaches git.
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert ENV_FILE in ignored or f"/{ENV_FILE}" in ignored, f"{ENV_FILE} must be in .gitignore"


def test_the_documented_command_generates_the_env_file():
    compose = (ROOT / "docker-compose.yml").read_text()
    command = f"python3 console/keys.py {ENV_FILE}"
    for documented in ("README.md", "docs/operations.md"):
        assert command in (ROOT / documented).read_text(), documented
    assert command in compose
    keys = dict(line.split("=", 1) for line in env_file_text().splitlines() if not line.startswith("#"))
    assert key_problems(secret_key=keys["SECRET_KEY"], credentials_key=keys["CREDENTIALS_KEY"], debug=False) == []


def test_migrations_run_once_before_web_worker_and_beat(services):
    migrate = services["migrate"]
    assert _command(migrate)[:3] == ["python", "manage.py", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["history"]["condition"] == "service_healthy"
    for name in ("web", *WORKERS, "sampler", "beat", "register-demo"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert "migrate" not in " ".join(_command(services[name])), f"{name} must not migrate by itself"
    for name in (*WORKERS, "sampler", "beat"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_long_running_services_have_healthchecks(services):
    for name in LONG_RUNNING:
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and len(check["test"]) > 1, name
        assert services[name].get("restart") == "unless-stopped", name
    assert "pg_isready" in _healthcheck(services["history"]) and "pg_isready" in _healthcheck(services["monitored"])
    assert "ping" in _healthcheck(services["redis"])
    for name in WORKERS:  # the ping goes to the node name the worker is given
        command = _command(services[name])
        node = command[command.index("--hostname") + 1].replace("%h", "$$HOSTNAME")
        assert f"inspect ping --destination {node} " in _healthcheck(services[name]), name
    # /healthz: no login, and answered over plain HTTP even with HTTPS=true (tests/console/views/test_health.py runs
    # this very command against gunicorn) ...
    assert "'http://127.0.0.1:8000/healthz'" in _healthcheck(services["web"])
    web = _command(services["web"])
    assert web[web.index("--bind") + 1] == "0.0.0.0:8000", "the port the check asks"
    # ... a host Django accepts whatever ALLOWED_HOSTS the user passes.
    assert "127.0.0.1" in services["web"]["environment"]["ALLOWED_HOSTS"].split("${")[0].split(",")
    # Beat's check reads the schedule file beat is told to write.
    beat = _command(services["beat"])
    assert beat[beat.index("--schedule") + 1] in _healthcheck(services["beat"])


def test_web_serves_with_a_production_server_and_static_files():
    command = _command(yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"])
    assert command[0] == "gunicorn" and "runserver" not in command
    dockerfile = (ROOT / "Dockerfile").read_text()
    # gunicorn is a dependency of the package (pinned with the others), not something the image adds.
    assert re.search(r'^\s*"gunicorn==[\d.]+",', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert "gunicorn" not in " ".join(i.args for i in dockerfile_instructions(dockerfile) if i.keyword == "RUN")
    assert "collectstatic --noinput" in dockerfile
    # WhiteNoise serves what collectstatic wrote; it must be installed with the package.
    settings = (ROOT / "console" / "settings.py").read_text()
    assert "whitenoise.middleware.WhiteNoiseMiddleware" in settings
    assert re.search(r'"whitenoise==[\d.]+"', (ROOT / "pyproject.toml").read_text()), "pin whitenoise in pyproject"


def test_the_image_runs_as_a_user_of_its_own():
    instructions = dockerfile_instructions((ROOT / "Dockerfile").read_text())
    users = [i.args for i in instructions if i.keyword == "USER"]
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith(("root:", "0:")), users
    user = users[-1].split(":")[0]
    created = [i.args for i in instructions if i.keyword == "RUN" and "useradd" in i.args]
    assert len(created) == 1 and re.search(rf"--uid (\d+) .*{user}\b", created[0]), created
    assert int(re.search(r"--uid (\d+)", created[0]).group(1)) >= 1000
    # A home it owns: libpq reads ~/.postgresql/root.crt there, matplotlib and fontconfig keep caches.
    home = dockerfile_env(instructions)["HOME"]
    assert "--create-home" in created[0] and re.search(rf"--home-dir {re.escape(home)}(\s|$)", created[0])


def test_audit_bundles_are_shared_by_web_and_worker(services):
    """The tasks worker builds a bundle, the web serves its download: the same volume at the same path, EXPORT_ROOT."""
    instructions = dockerfile_instructions((ROOT / "Dockerfile").read_text())
    export_root = dockerfile_env(instructions)["EXPORT_ROOT"]
    assert export_root.startswith("/") and not export_root.startswith("/app/"), "outside the (root's) source"
    # The image's user owns the folder: a new named volume is initialized from it, ownership included.
    user = [i.args for i in instructions if i.keyword == "USER"][-1]
    made = rf"install -d -o {user} -g {user} .*{re.escape(export_root)}(\s|$)"
    runs = [i.args for i in instructions if i.keyword == "RUN"]
    assert any(re.search(made, args) for args in runs), "the exports folder belongs to the image's user"
    mounts = {}
    for name in ("web", "tasks"):
        assert services[name]["environment"]["EXPORT_ROOT"] == export_root, name
        volumes = [v.split(":") for v in services[name].get("volumes", [])]
        mounts[name] = [source for source, target, *_ in volumes if target == export_root]
        assert len(mounts[name]) == 1, f"{name} must mount a volume at EXPORT_ROOT ({export_root})"
    assert mounts["web"] == mounts["tasks"], "web and the worker that builds bundles share one volume"
    volume = mounts["web"][0]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert volume in compose["volumes"], "a named volume (kept across restarts), not a bind mount"


def test_the_demo_server_is_ready_to_monitor_and_registered(services):
    monitored = " ".join(_command(services["monitored"]))
    assert "shared_preload_libraries=pg_stat_statements" in monitored
    setup = services["monitored-setup"]
    assert setup["depends_on"]["monitored"]["condition"] == "service_healthy"
    assert setup["environment"]["PGHOST"] == "monitored"
    sql = " ".join(_command(setup))
    assert "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" in sql
    role = re.search(r"GRANT pg_monitor TO (\w+)", sql).group(1)
    assert f"ALTER ROLE {role} LOGIN PASSWORD '" in sql and "SUPERUSER" not in sql.upper()
    assert f"GRANT pg_read_all_data TO {role}" in sql  # plans of its statements (docs/monitoring-role.md)

    register = services["register-demo"]
    command = _command(register)
    assert command[:5] == ["python", "manage.py", "servers", "add", "demo"] and "--update" in command
    connection = parse_dsn(command[command.index("--dsn") + 1])
    assert (connection.host, connection.user) == ("monitored", role) and connection.password
    password = re.search(rf"ALTER ROLE {role} LOGIN PASSWORD '([^']+)'", sql).group(1)
    assert connection.password == password
    assert register["depends_on"]["monitored-setup"]["condition"] == "service_completed_successfully"
    assert register["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert register["restart"] == "no"


def _queues(service: dict) -> set[str]:
    command = _command(service)
    return set(command[command.index("--queues") + 1].split(",")) if "--queues" in command else set()


def test_collections_have_a_worker_of_their_own_and_every_queue_a_worker(services, settings):
    """A slow export, report or advisor run never delays a collection: collections (and connection checks, which
    also wait on monitored servers) are routed to queues that one worker serves alone, with threads; every other
    queue is served, by processes (time limits hold)."""
    from console.celery import app

    workers = {name: s for name, s in services.items() if "command" in s and "worker" in _command(s)[:4]}
    assert set(workers) == set(WORKERS)
    declared = {q.name for q in settings.CELERY_TASK_QUEUES}
    assert set().union(*map(_queues, workers.values())) == declared
    assert _queues(workers["worker"]) == {"collection", "checks"}
    # Alerts wait on receivers anywhere: apart from the collections, on threads of their own; the rules'
    # evaluations apart from the deliveries, so that no receiver keeps an evaluation waiting until it expires.
    assert _queues(workers["alerts"]) == {"alerts"} and _queues(workers["alert-rules"]) == {"alert-rules"}
    # Plans wait on monitored servers, within each server's budget: apart from the collections too.
    assert _queues(workers["plans"]) == {"plans"}
    assert all("threads" in _command(workers[name]) for name in ("worker", "alerts", "alert-rules", "plans"))
    assert "prefork" in _command(workers["tasks"])
    app.loader.import_default_modules()
    routed = {
        name: app.amqp.router.route({}, name)["queue"].name for name in app.tasks if not name.startswith("celery.")
    }
    assert (
        routed["collectors.tasks.collect_server"] == routed["collectors.tasks.dispatch_due_collections"] == "collection"
    )
    assert {name for name, queue in routed.items() if queue == "checks"} == {"collectors.tasks.check_connection"}
    assert {name for name, queue in routed.items() if queue == "collection"} <= {
        "collectors.tasks.collect_server",
        "collectors.tasks.dispatch_due_collections",
        "collectors.tasks.sample_waits",
    }
    assert routed["exports.audit_export_build"] == "exports" and routed["advisor.tasks.advise_server"] == "advisor"
    assert {name for name, queue in routed.items() if queue == "plans"} == {
        "collectors.tasks.plan_fleet",
        "collectors.tasks.plan_server",
        "collectors.tasks.plan_statement",
    }
    assert {name for name, queue in routed.items() if queue == "alert-rules"} == {
        "alerts.tasks.evaluate_alerts",
        "alerts.tasks.evaluate_alert_group",
    }
    assert {name for name, queue in routed.items() if queue == "alerts"} == {
        "alerts.tasks.deliver",
        "alerts.tasks.resend_lost_deliveries",
    }
    assert set(routed.values()) <= declared
