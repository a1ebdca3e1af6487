"""/metrics: a token needed; an organization's token sees its servers only, an operator's every server and the
console's health; each figure the fleet selector's over the window; what a server does not give (planning time
with track_planning off) an absent series, never 0; OpenMetrics or Prometheus' text format as asked, each passing
`promtool check metrics` (Debian's prometheus package); a real Prometheus scraping the console with the token
finds the series through its query API. What a token costs is bounded: concurrent scrapes read the figures once,
one key per scope and kind whatever the format or the statements asked, and scrapes past the token's rate get a
429 with Retry-After."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from kombu import Queue
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from accounts.tokens import token_create
from alerts.models import Delivery
from alerts.services import channel_create
from console.celery import app as celery_app
from history.models import ServerState, Snapshot
from inventory.connection import parse_dsn
from inventory.models import Membership
from inventory.services import server_create
from readtier import Window, fleet_summary
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "pgconsole-dashboard.json"


@pytest.fixture
def world(pg_clusters, settings):
    """A collected server of "acme" (PostgreSQL 16, track_planning off), a never collected one of "other", their
    members' tokens and an operator's."""
    settings.METRICS = {**settings.METRICS, "CACHE_S": 0, "RATE": "1000/min"}  # the rate: its own tests'
    c = pg_clusters[16]
    run(c, "SELECT pg_stat_statements_reset()")  # the top 3 are this world's, not what tests before it ran here
    ours = register(c, name="metrics-16", org="acme")
    collect(ours)
    run(c, "SELECT 1 AS metrics_workload", 40)  # its own text: pg_stat_statements keeps the first seen
    collect(ours)
    theirs = server_create(
        name="metrics-theirs", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="other"
    )
    tokens = {}
    for name, organization in (("metrics-acme", ours.organization), ("metrics-other", theirs.organization)):
        user = User.objects.create_user(name, password="pw-metrics-1")
        Membership.objects.create(user=user, organization=organization, role=Membership.Role.VIEWER)
        tokens[name] = token_create(user=user, name="prometheus", read_only=True)[1]
    operator = User.objects.create_superuser("metrics-operator", password="pw-metrics-2")
    tokens["operator"] = token_create(user=operator, name="prometheus")[1]
    return ours, theirs, tokens


def scrape(token: str | None, accept: str = "") -> tuple[int, str, str]:
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    response = Client().get("/metrics", **headers)
    return response.status_code, response["Content-Type"], response.content.decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def of(found: dict, name: str, server: str) -> dict[tuple, float]:
    return {labels: v for (n, labels), v in found.items() if n == name and ("server", server) in labels}


def test_nothing_without_a_valid_token(world):
    for token in (None, "pgc_nope_nope", "Basic abc"):
        status, _, body = scrape(token)
        assert status == 401 and "token" in body
    response = Client().get("/metrics")
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'


def test_an_organizations_token_sees_its_servers_with_the_selectors_figures(world):
    ours, theirs, tokens = world
    status, content_type, body = scrape(tokens["metrics-acme"])
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    found = samples(body)
    assert not any(("server", "metrics-theirs") in labels for _, labels in found)  # the other organization's
    assert ("pgconsole_history_store_size_bytes", ()) not in found  # the console's health: operators only
    labels = (("organization", "acme"), ("server", "metrics-16"), ("tags", ""))
    assert found[("pgconsole_server_up", labels)] == 1.0
    now = timezone.now()
    (truth,) = fleet_summary(server_ids=[ours.pk], window=Window(now - timedelta(minutes=5), now))
    assert found[("pgconsole_server_calls_per_second", labels)] == pytest.approx(truth.calls_per_s, rel=1e-6)
    assert truth.calls_per_s > 0
    assert found[("pgconsole_server_statements_max", labels)] == truth.entries_max
    assert 0 <= found[("pgconsole_server_last_snapshot_age_seconds", labels)] < 60
    ours.refresh_from_db()
    took = (ours.last_success_at - ours.last_attempt_at).total_seconds()
    assert found[("pgconsole_server_collection_duration_seconds", labels)] == pytest.approx(took)
    assert 0 < took < 30
    # track_planning is off: no planning series at all, never a 0.
    assert of(found, "pgconsole_server_planning_seconds_per_second", "metrics-16") == {}
    assert of(found, "pgconsole_server_execution_seconds_per_second", "metrics-16")
    assert found[("pgconsole_server_open_alerts", (*labels[:2], ("severity", "critical"), labels[2]))] == 0.0
    # The running totals as counters, each the stored deltas' sum since the first snapshot (its _created).
    state = ServerState.objects.get(server_id=ours.pk)
    first = Snapshot.objects.filter(server_id=ours.pk).earliest("taken_at")
    assert found[("pgconsole_server_calls_total", labels)] == state.calls_total >= 40
    assert found[("pgconsole_server_calls_created", labels)] == first.taken_at.timestamp()
    assert found[("pgconsole_server_execution_seconds_total", labels)] == pytest.approx(state.exec_us_total / 1e6)
    assert found[("pgconsole_server_deallocations_total", labels)] == state.dealloc_total  # PostgreSQL 16: known
    assert of(found, "pgconsole_server_planning_seconds_total", "metrics-16") == {}  # never tracked: absent

    _, _, theirs_body = scrape(tokens["metrics-other"])
    other = samples(theirs_body)
    never = (("organization", "other"), ("server", "metrics-theirs"), ("tags", ""))
    assert other[("pgconsole_server_up", never)] == 0.0  # never collected: down, and no rates at all
    assert of(other, "pgconsole_server_collection_duration_seconds", "metrics-theirs") == {}
    assert of(other, "pgconsole_server_calls_per_second", "metrics-theirs") == {}
    assert of(other, "pgconsole_server_calls_total", "metrics-theirs") == {}  # nothing counted yet: no counter
    assert not any(("server", "metrics-16") in labels for _, labels in other)


def test_an_operator_sees_every_server_and_the_console(world, settings):
    ours, _, tokens = world
    # A task sent to a queue no worker reads: it waits there, stamped with its sending time by the publisher.
    queue = f"metrics-probe-{os.getpid()}"
    settings.CELERY_TASK_QUEUES = (*settings.CELERY_TASK_QUEUES, Queue(queue))
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    celery_app.send_task("pgconsole.metrics_probe", queue=queue)
    channel = channel_create(
        organization=ours.organization, name="metrics-hook", kind="email", addresses=["ops@example.com"]
    ).channel
    Delivery.objects.create(channel=channel, event="open", title="t", attempts=1, status=Delivery.Status.PENDING)
    try:
        time.sleep(1.0)
        found = samples(scrape(tokens["operator"])[2])
    finally:
        broker.delete(queue)
    servers = {dict(labels)["server"] for name, labels in found if name == "pgconsole_server_up"}
    assert {"metrics-16", "metrics-theirs"} <= servers
    assert found[("pgconsole_history_store_size_bytes", ())] > 1_000_000
    assert found[("pgconsole_queue_waiting_tasks", (("queue", queue),))] == 1.0
    assert 1.0 <= found[("pgconsole_queue_oldest_task_age_seconds", (("queue", queue),))] < 30
    assert ("pgconsole_queue_waiting_tasks", (("queue", "collection"),)) in found
    assert found[("pgconsole_deliveries_failing", (("kind", "email"),))] == 1.0  # retrying after a failure
    assert found[("pgconsole_deliveries_failing", (("kind", "webhook"),))] == 0.0
    assert found[("pgconsole_collections_behind", ())] == 0.0  # the world's servers are not overdue
    assert found[("pgconsole_broker_up", ())] == 1.0
    # The broker down: said, the rest served.
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_free_port()}/0"
    status, _, body = scrape(tokens["operator"])
    down = samples(body)
    assert status == 200 and down[("pgconsole_broker_up", ())] == 0.0
    assert not any(name == "pgconsole_queue_waiting_tasks" for name, _ in down)
    assert down[("pgconsole_history_store_size_bytes", ())] > 0


def test_a_scrape_within_the_cache_time_reads_no_selector(world, settings, django_assert_max_num_queries):
    _, _, tokens = world
    settings.METRICS = {**settings.METRICS, "CACHE_S": 60}
    first = scrape(tokens["operator"])[2]
    with django_assert_max_num_queries(2):  # the token's lookup (and its last use, once a minute): no figure
        again = scrape(tokens["operator"])[2]
    assert again == first
    assert scrape(tokens["metrics-acme"])[2] != first  # another token: its own scope, its own answer


def test_a_metrics_token_sees_its_one_organization_even_an_operators(world):
    ours, theirs, _ = world
    operator = User.objects.get(username="metrics-operator")
    _, secret = token_create(user=operator, name="prometheus-other", organization=theirs.organization)
    found = samples(scrape(secret)[2])
    servers = {dict(labels)["server"] for name, labels in found if name == "pgconsole_server_up"}
    assert servers == {"metrics-theirs"}
    assert not any(name.startswith(("pgconsole_queue_", "pgconsole_history_")) for name, _ in found)


def test_statements_only_on_request_bounded_and_said(world, settings):
    ours, _, tokens = world
    plain = samples(scrape(tokens["metrics-acme"])[2])
    assert not any(name.startswith("pgconsole_statement_") for name, _ in plain)
    response = Client().get("/metrics", {"statements": "3"}, HTTP_AUTHORIZATION=f"Bearer {tokens['metrics-acme']}")
    found = samples(response.content.decode())
    calls = of(found, "pgconsole_statement_calls_per_second", "metrics-16")
    assert 1 <= len(calls) <= 3
    select = ours.statements.get(
        query="SELECT $1 AS metrics_workload"
    )  # the workload's, 40 calls between the two collections
    (rate,) = [v for labels, v in calls.items() if ("queryid", str(select.queryid)) in labels]
    now = timezone.now()
    (row,) = fleet_summary(server_ids=[ours.pk], window=Window(now - timedelta(minutes=5), now))
    assert rate == pytest.approx(40 / row.span_s, rel=1e-6)
    assert of(found, "pgconsole_statement_planning_seconds_per_second", "metrics-16") == {}  # not tracked
    assert found[("pgconsole_scrape_statement_servers_left_out", ())] == 0.0
    assert not any("SELECT" in str(labels) for labels in calls)  # never the text
    # Over the cap of servers: left out, and said.
    settings.METRICS = {**settings.METRICS, "STATEMENTS_MAX_SERVERS": 0}
    response = Client().get("/metrics", {"statements": "3"}, HTTP_AUTHORIZATION=f"Bearer {tokens['metrics-acme']}")
    capped = samples(response.content.decode())
    assert capped[("pgconsole_scrape_statement_servers_left_out", ())] == 1.0
    assert of(capped, "pgconsole_statement_calls_per_second", "metrics-16") == {}
    for bad in ("0", "11", "ten", ""):
        refused = Client().get("/metrics", {"statements": bad}, HTTP_AUTHORIZATION=f"Bearer {tokens['operator']}")
        assert refused.status_code == 400 and b"from 1 to 10" in refused.content


def test_both_formats_pass_their_checkers(world):
    """Prometheus' text format through `promtool check metrics` (whose parser reads that format only: an
    OpenMetrics counter's HELP names its family, not the _total sample); OpenMetrics through prometheus_client's
    strict OpenMetrics parser, which refuses what the standard does not allow."""
    _, _, tokens = world

    def get(accept: str) -> tuple[str, str]:
        response = Client().get(
            "/metrics", {"statements": "5"}, HTTP_AUTHORIZATION=f"Bearer {tokens['operator']}", HTTP_ACCEPT=accept
        )
        assert response.status_code == 200
        return response["Content-Type"], response.content.decode()

    content_type, text = get("")
    assert content_type.startswith("text/plain; version=0.0.4")
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    content_type, body = get(OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text") and body.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(body)}
    assert families["pgconsole_server_calls"].type == "counter"
    assert families["pgconsole_server_up"].type == "gauge"
    assert families["pgconsole_server_last_snapshot_age_seconds"].unit == "seconds"
    with pytest.raises(ValueError):  # the parser is strict: a counter without its _total is refused
        list(openmetrics_families(body.replace("pgconsole_server_calls_total{", "pgconsole_server_calls{", 1)))


def test_the_grafana_dashboard_reads_only_what_the_console_serves(world):
    _, _, tokens = world
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["query"]["query"] for v in dashboard["templating"]["list"]]
    used = set(re.findall(r"\bpgconsole_[a-z_]+", " ".join(queries)))
    served = {family.name for family in text_string_to_metric_families(scrape(tokens["operator"])[2])}
    assert len(used) >= 10 and used <= served, used - served
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in dashboard["panels"])
    assert {r["title"] for r in dashboard["panels"] if r["type"] == "row"} == {"Fleet", "Server", "Console"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_prometheus_scrapes_the_console_with_a_token(world, live_server, tmp_path):
    ours, _, tokens = world
    target = urllib.parse.urlsplit(live_server.url).netloc
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(  # YAML's superset: JSON
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "pgconsole",
                        "metrics_path": "/metrics",
                        "authorization": {"type": "Bearer", "credentials": tokens["metrics-acme"]},
                        "static_configs": [{"targets": [target]}],
                    }
                ],
            }
        )
    )
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    query = urllib.parse.urlencode({"query": 'pgconsole_server_calls_per_second{server="metrics-16"}'})
    try:
        deadline, result = time.monotonic() + 30, []
        while time.monotonic() < deadline and not result:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}", timeout=2) as r:
                    result = json.load(r)["data"]["result"]
            except OSError:
                continue
        assert result, "Prometheus found no series of the console within 30 s"
        (series,) = result
        assert series["metric"]["organization"] == "acme" and series["metric"]["job"] == "pgconsole"
        assert float(series["value"][1]) > 0
        # The running totals reach Prometheus as counters (their family's metadata says so), with the console's value.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/metadata?metric=pgconsole_server_calls") as r:
            assert [m["type"] for m in json.load(r)["data"]["pgconsole_server_calls"]] == ["counter"]
        query = urllib.parse.urlencode({"query": 'pgconsole_server_calls_total{server="metrics-16"}'})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}", timeout=2) as r:
            (series,) = json.load(r)["data"]["result"]
        assert float(series["value"][1]) == ServerState.objects.get(server_id=ours.pk).calls_total
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=2) as r:
            (up,) = json.load(r)["data"]["activeTargets"]
        assert up["health"] == "up" and up["lastError"] == ""
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=10)


def _reads(caplog) -> list[str]:
    """The cache keys whose figures were read, once a line each (console.views.metrics logs every reading)."""
    return [r.getMessage().split()[3] for r in caplog.records if r.getMessage().startswith("metrics: figures of ")]


def test_concurrent_scrapes_of_one_scope_read_the_figures_once(world, settings, live_server, caplog):
    """Eight scrapes at the same moment over real HTTP (the live server's threads), the figures not cached yet: one
    reads them, the others wait for them; each gets the same figures."""
    _, _, tokens = world
    settings.METRICS = {**settings.METRICS, "CACHE_S": 60}
    start = threading.Barrier(8)
    bodies: list[bytes] = []

    def get() -> None:
        request = urllib.request.Request(
            f"{live_server.url}/metrics", headers={"Authorization": f"Bearer {tokens['metrics-acme']}"}
        )
        start.wait()
        with urllib.request.urlopen(request, timeout=30) as r:
            bodies.append(r.read())

    with caplog.at_level(logging.DEBUG, logger="console.views.metrics"):
        threads = [threading.Thread(target=get) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(bodies) == 8 and len(set(bodies)) == 1
    assert len(_reads(caplog)) == 1, _reads(caplog)
    assert b'pgconsole_server_up{organization="acme",server="metrics-16"' in bodies[0]


def test_one_key_per_scope_and_kind_whatever_the_format_the_statements_or_the_token(world, settings, caplog):
    """22 variants of one token's scrape (two formats, without statements and with 1 to 10), and another token of
    the same user and scope: two readings, two keys in Redis; each answer in its format, with the statements
    asked."""
    ours, _, tokens = world
    settings.METRICS = {**settings.METRICS, "CACHE_S": 60}
    user = User.objects.get(username="metrics-acme")
    again = token_create(user=user, name="prometheus-2", read_only=True)[1]
    with caplog.at_level(logging.DEBUG, logger="console.views.metrics"):
        for token in (tokens["metrics-acme"], again):
            for accept in ("", OPENMETRICS):
                for n in (None, *range(1, 11)):
                    response = Client().get(
                        "/metrics",
                        {} if n is None else {"statements": str(n)},
                        HTTP_AUTHORIZATION=f"Bearer {token}",
                        HTTP_ACCEPT=accept,
                    )
                    assert response.status_code == 200
                    assert response["Content-Type"].startswith("application/openmetrics" if accept else "text/plain")
                    if n == 1 and not accept:
                        found = samples(response.content.decode())
                        assert len(of(found, "pgconsole_statement_calls_per_second", "metrics-16")) == 1
    assert sorted(_reads(caplog)) == [f"metrics:user-{user.pk}:fleet", f"metrics:user-{user.pk}:statements"]
    broker = redis.Redis.from_url(settings.REDIS_URL)
    keys = {k.decode().split(":", 2)[2] for k in broker.scan_iter(match=f"*metrics:user-{user.pk}:*")}
    assert keys == {f"metrics:user-{user.pk}:fleet", f"metrics:user-{user.pk}:statements"}
    # A metrics token of the same user is another scope (its one organization): a key of its own.
    _, scoped = token_create(user=user, name="prometheus-acme", organization=ours.organization)
    with caplog.at_level(logging.DEBUG, logger="console.views.metrics"):
        assert scrape(scoped)[0] == 200
    assert _reads(caplog)[-1] == f"metrics:user-{user.pk}-org-{ours.organization_id}:fleet"


def test_scrapes_past_the_tokens_rate_get_429_with_retry_after(world, settings):
    """Per token and kind: the third scrape of a minute at 2/min is refused, said, with when to come back;
    the same token's scrapes with statements, and another token's, have their own count."""
    _, _, tokens = world
    settings.METRICS = {**settings.METRICS, "RATE": "2/min"}
    assert [scrape(tokens["metrics-acme"])[0] for _ in range(2)] == [200, 200]
    refused = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {tokens['metrics-acme']}")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert refused.content == b"too many scrapes with this token: at most 2/min\n"
    with_statements = Client().get(
        "/metrics", {"statements": "2"}, HTTP_AUTHORIZATION=f"Bearer {tokens['metrics-acme']}"
    )
    assert with_statements.status_code == 200
    assert scrape(tokens["metrics-other"])[0] == 200
    assert scrape(None)[0] == 401  # no token: refused before any count
