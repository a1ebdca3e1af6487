"""Servers through the API: list, create, read, update, delete, test the connection, collect now through a
real Celery worker, snapshots and errors — by role, with the password never in a response."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection

from inventory.models import Server
from tests.api_world import assert_error
from tests.conftest import MONITOR_PASSWORD, MONITOR_USER
from tests.processes import console_env, processes, worker_argv

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "s3cr3t-pw-never-shown"


def _body(c, major: int, **extra) -> dict:
    return {
        "organization": extra.pop("organization"),
        "name": extra.pop("name", f"api-pg{major}"),
        "host": extra.pop("host", "127.0.0.1"),
        "port": extra.pop("port", c.port),
        "database": "app",
        "user": MONITOR_USER,
        "password": extra.pop("password", MONITOR_PASSWORD),
        **extra,
    }


def _post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def _patch(client, url, body):
    return client.patch(url, json.dumps(body), content_type="application/json")


def test_create_read_update_delete_by_role(api_world, pg_clusters):
    c = pg_clusters[17]
    acme = api_world.acme.pk
    assert_error(_post(api_world.client("viewer"), "/api/v1/servers/", _body(c, 17, organization=acme)), 403)
    r = _post(api_world.client("outsider"), "/api/v1/servers/", _body(c, 17, organization=acme))
    assert "organization" in assert_error(r, 400)["errors"]
    assert_error(
        _post(api_world.client("dba", read_only=True), "/api/v1/servers/", _body(c, 17, organization=acme)),
        403,
        "read_only_token",
    )
    dba = api_world.client("dba")
    r = _post(dba, "/api/v1/servers/", _body(c, 17, organization=acme, password=SECRET, tags=["prod"]))
    assert r.status_code == 201, r.content
    created = r.json()
    assert created["has_password"] is True and created["tags"] == ["prod"] and SECRET not in r.content.decode()
    url = f"/api/v1/servers/{created['id']}/"
    assert Server.objects.get(pk=created["id"]).get_password() == SECRET  # stored (encrypted), never shown
    dup = _post(dba, "/api/v1/servers/", _body(c, 17, organization=acme))
    assert "already exists" in assert_error(dup, 400)["message"]
    assert (
        "port"
        in assert_error(_post(dba, "/api/v1/servers/", _body(c, 17, organization=acme, name="x", port=0)), 400)[
            "errors"
        ]
    )
    bad = dba.post("/api/v1/servers/", "{not json", content_type="application/json")
    assert assert_error(bad, 400, "parse_error")["message"]

    for role in ("viewer", "dba", "admin"):
        got = api_world.client(role).get(url)
        assert got.status_code == 200 and SECRET not in got.content.decode()
    assert_error(api_world.client("outsider").get(url), 404)
    assert [s["name"] for s in api_world.client("viewer").get("/api/v1/servers/").json()["results"]] == ["api-pg17"]
    assert api_world.client("outsider").get("/api/v1/servers/").json()["count"] == 0

    assert_error(_patch(api_world.client("viewer"), url, {"interval_s": 30}), 403)
    r = _patch(dba, url, {"interval_s": 30})
    assert r.json()["interval_s"] == 30 and r.json()["has_password"] is True  # same destination: kept
    r = _patch(dba, url, {"host": "localhost"})
    assert r.json()["has_password"] is False  # moved without a password: cleared, never sent elsewhere
    r = _patch(dba, url, {"host": "127.0.0.1", "password": MONITOR_PASSWORD})
    assert r.json()["has_password"] is True and MONITOR_PASSWORD not in r.content.decode()
    assert "interval_s" in assert_error(_patch(dba, url, {"interval_s": 1}), 400)["errors"]

    assert_error(api_world.client("viewer").delete(url), 403)
    assert api_world.client("admin").delete(url).status_code == 204
    assert_error(dba.get(url), 404)


def _checked(client, response, worker_log, timeout_s: float = 30) -> dict:
    """POST .../test/ answered 202 with a check to poll: its state once the worker is done."""
    assert response.status_code == 202, response.content
    state = response.json()
    assert state["status"] in ("queued", "running", "done") and state["status_url"].startswith("/api/v1/checks/")
    deadline = time.monotonic() + timeout_s
    while state["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        polled = client.get(response.json()["status_url"])
        assert polled.status_code == 200 and MONITOR_PASSWORD not in polled.content.decode()
        state = polled.json()
    assert state["status"] == "done", (state, worker_log.read_text()[-2000:])
    return state


def test_test_connection_is_queued_and_polled(api_world, pg_clusters, worker):
    c = pg_clusters[16]
    dba = api_world.client("dba")
    created = _post(dba, "/api/v1/servers/", _body(c, 16, organization=api_world.acme.pk, password="wrong")).json()
    test_url = f"/api/v1/servers/{created['id']}/test/"
    r = dba.post(test_url)
    state = _checked(dba, r, worker)
    body = state["result"]
    assert state["server_id"] == created["id"] and state["problem"] == ""
    assert body["connected"] is False and body["failure"] == "authentication" and "wrong" not in r.content.decode()
    assert body["findings"] and body["findings"][0]["text"]
    _patch(dba, f"/api/v1/servers/{created['id']}/", {"password": MONITOR_PASSWORD})
    body = _checked(dba, dba.post(test_url), worker)["result"]
    assert body["connected"] is True and body["server_version"].startswith("16") and body["extension_version"]
    assert_error(api_world.client("viewer").post(test_url), 403)
    status_url = r.json()["status_url"]
    assert_error(api_world.client("viewer").get(status_url), 403)  # acme's, but a viewer may not test connections
    assert_error(api_world.client("outsider").get(status_url), 404)
    assert_error(dba.get("/api/v1/checks/7c4d2b9e-0000-4000-8000-000000000000/"), 404)


@pytest.fixture
def worker(tmp_path):
    """A real Celery worker on the tests' Redis database and the test database."""
    with processes(tmp_path, console_env(COLLECTOR_ACTIVITY_SAMPLES="2", COLLECTOR_ACTIVITY_SPAN_S="0.1")) as procs:
        yield procs.start("worker", worker_argv()).log


def test_collect_now_then_poll_then_snapshots(api_world, pg_clusters, worker):
    c = pg_clusters[15]
    dba = api_world.client("dba")
    created = _post(dba, "/api/v1/servers/", _body(c, 15, organization=api_world.acme.pk)).json()
    base = f"/api/v1/servers/{created['id']}/"
    assert_error(api_world.client("viewer").post(f"{base}collect/"), 403)
    assert_error(dba.get(f"{base}snapshots/latest/"), 404)
    r = dba.post(f"{base}collect/")
    assert r.status_code == 202 and r.json()["status"] in ("queued", "running", "succeeded")
    status_url = r.json()["status_url"]
    deadline = time.monotonic() + 60
    while (state := dba.get(status_url).json())["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert state["status"] == "succeeded", (state, worker.read_text()[-2000:])
    assert state["result"]["kind"] == "baseline"
    assert_error(api_world.client("outsider").get(status_url), 404)
    assert_error(dba.get("/api/v1/tasks/no-such-task/"), 404)  # not a task id: the API's 404, not a page
    assert_error(dba.get("/api/v1/tasks/7c4d2b9e-0000-4000-8000-000000000000/"), 404)

    latest = dba.get(f"{base}snapshots/latest/").json()
    assert latest["kind"] == "baseline" and latest["track_planning"] is False and latest["sample_rate"] is None
    page = api_world.client("viewer").get(f"{base}snapshots/").json()
    assert page["count"] == 1 and page["results"][0]["taken_at"] == latest["taken_at"]
    assert api_world.client("viewer").get(f"{base}errors/").json()["count"] == 0
    csv = api_world.client("viewer").get(f"{base}snapshots/", {"format": "csv"}).content.decode().splitlines()
    assert csv[0].startswith("taken_at,") and len(csv) == 2
    assert_error(api_world.client("outsider").get(f"{base}snapshots/"), 404)


def test_put_replaces_every_field_and_keeps_the_organization(api_world, pg_clusters):
    c = pg_clusters[17]
    dba = api_world.client("dba")
    created = _post(dba, "/api/v1/servers/", _body(c, 17, organization=api_world.acme.pk, name="put-me")).json()
    body = {k: v for k, v in _body(c, 17, organization=0, name="put-me-2").items() if k != "organization"}
    r = dba.put(
        f"/api/v1/servers/{created['id']}/", json.dumps({**body, "interval_s": 120}), content_type="application/json"
    )
    assert r.status_code == 200, r.content
    assert (r.json()["name"], r.json()["interval_s"], r.json()["organization"]) == ("put-me-2", 120, "acme")
    missing = dba.put(f"/api/v1/servers/{created['id']}/", json.dumps({"name": "x"}), content_type="application/json")
    assert {"host", "user"} <= set(assert_error(missing, 400)["errors"])


def test_the_network_policy_refuses_with_the_reason(api_world, pg_clusters):
    """The console's own history store, the cloud metadata address, a Unix socket, a host list: refused at save
    time with the reason on the host field (inventory.network_policy), nothing stored."""
    c, dba = pg_clusters[17], api_world.client("dba")
    history_port = int(connection.settings_dict["PORT"])
    for i, (host, port, why) in enumerate(
        [
            ("169.254.169.254", 5432, "169.254.169.254 is a link-local or cloud metadata address"),
            ("127.0.0.1", history_port, f"127.0.0.1:{history_port} is the console's own history store or Redis"),
            ("/var/run/postgresql", 5432, "Unix sockets are not monitored"),
            ("db1,db2", 5432, "one host per server"),
        ]
    ):
        body = _body(c, 17, organization=api_world.acme.pk, name=f"refused-{i}", host=host, port=port)
        error = assert_error(_post(dba, "/api/v1/servers/", body), 400)
        assert why in " ".join(error["errors"]["host"]), error
    assert not Server.objects.filter(name__startswith="refused-").exists()
    # Moving a server there is refused the same way.
    created = _post(dba, "/api/v1/servers/", _body(c, 17, organization=api_world.acme.pk, name="allowed"))
    assert created.status_code == 201, created.content
    moved = _patch(dba, f"/api/v1/servers/{created.json()['id']}/", {"host": "169.254.169.254", "port": 80})
    assert "link-local or cloud metadata" in " ".join(assert_error(moved, 400)["errors"]["host"])
    assert Server.objects.get(name="allowed").host == "127.0.0.1"


def test_the_names_trusted_for_plans_are_created_read_and_updated(api_world):
    """Lists of names kept exactly as sent (case and inner blanks), each once; a bad one is a 400 on its field, in
    the one error shape, naming it; changing them keeps the password."""
    dba = api_world.client("dba")
    body = {
        "organization": api_world.acme.pk,
        "name": "trusting",
        "host": "db-trust.example",
        "user": MONITOR_USER,
        "password": SECRET,
        "plans_trusted_roles": ["app_owner", "Reporting", " spaced ", "app_owner"],
        "plans_trusted_schemas": ["a,b"],
    }
    r = _post(dba, "/api/v1/servers/", body)
    assert r.status_code == 201, r.content
    created = r.json()
    assert created["plans_trusted_roles"] == ["app_owner", "Reporting", " spaced "]
    assert created["plans_trusted_schemas"] == ["a,b"]
    url = f"/api/v1/servers/{created['id']}/"
    read = api_world.client("viewer").get(url).json()
    assert (read["plans_trusted_roles"], read["plans_trusted_schemas"]) == (
        ["app_owner", "Reporting", " spaced "],
        ["a,b"],
    )
    listed = dba.get("/api/v1/servers/").json()["results"]
    assert [s["plans_trusted_roles"] for s in listed if s["id"] == created["id"]] == [read["plans_trusted_roles"]]

    r = _patch(dba, url, {"plans_trusted_roles": ["Reporting"], "plans_trusted_schemas": []})
    assert r.status_code == 200, r.content
    assert (r.json()["plans_trusted_roles"], r.json()["plans_trusted_schemas"]) == (["Reporting"], [])
    assert r.json()["has_password"] is True and Server.objects.get(pk=created["id"]).get_password() == SECRET
    r = _patch(dba, url, {"interval_s": 120})  # not sent: unchanged
    assert r.json()["plans_trusted_roles"] == ["Reporting"]

    too_long = "é" * 32
    error = assert_error(_patch(dba, url, {"plans_trusted_roles": ["ok", too_long]}), 400, "invalid")
    assert error["errors"] == {
        "plans_trusted_roles": [
            f"role name {too_long!r} is 64 bytes in UTF-8: PostgreSQL's names have at most 63 (it truncates longer "
            "ones)"
        ]
    }
    error = assert_error(_patch(dba, url, {"plans_trusted_schemas": [""]}), 400)
    assert error["errors"] == {"plans_trusted_schemas": ["a schema name cannot be empty"]}
    assert "plans_trusted_schemas" in assert_error(_patch(dba, url, {"plans_trusted_schemas": "ext"}), 400)["errors"]
    refused = _post(dba, "/api/v1/servers/", {**body, "name": "refused", "plans_trusted_roles": ["x" * 64]})
    assert "is 64 bytes in UTF-8" in assert_error(refused, 400)["errors"]["plans_trusted_roles"][0]
    assert not Server.objects.filter(name="refused").exists()
    assert Server.objects.get(pk=created["id"]).plans_trusted_roles == ["Reporting"]
