"""A "test connection" check queued for a worker (collectors.queued_checks), on real Redis and a real server: what the
broker and the cache hold of the password, the worker's side run here in the test's process, and the checks
that never end (no worker took it, a worker stopped, keys that differ). The page and the API that poll it are
tested in tests/console/views/test_manage.py, tests/console/api/test_servers.py and in a browser."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from collectors.queued_checks import QUEUE_WAIT_S, check_queue, check_run, check_state, longest_check_s
from collectors.tasks import check_enqueue
from inventory.endpoint import Endpoint
from tests.conftest import MONITOR_PASSWORD, MONITOR_USER

ORG = 4242  # no database row is needed: a check is keyed by the organization's id


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete("checks")
    yield client
    client.delete("checks")


def _queue(port: int, password: str | None = MONITOR_PASSWORD, **changes):
    fields = {"host": "127.0.0.1", "port": port, "database": "app", "user": MONITOR_USER, "sslmode": "disable"}
    endpoint = Endpoint(**{**fields, **changes})
    return check_queue(organization_id=ORG, server_id=None, endpoint=endpoint, password=password, enqueue=check_enqueue)


def _entry(check_id: str) -> dict:
    return cache.get(f"connection-check:{check_id}")


def _age(check_id: str, **seconds: float) -> None:
    """Move the entry's times back, as if `queued_at` / `started_at` were that many seconds older."""
    entry = _entry(check_id)
    cache.set(f"connection-check:{check_id}", {**entry, **{k: entry[k] - v for k, v in seconds.items()}})


def test_the_password_is_never_in_the_broker_and_leaves_the_cache_when_taken(broker, pg_clusters):
    queued = _queue(pg_clusters[16].port)
    assert queued.status == "queued" and queued.report is None and queued.organization_id == ORG
    messages = broker.lrange("checks", 0, -1)
    assert len(messages) == 1
    raw = messages[0]
    body = base64.b64decode(json.loads(raw)["body"])
    assert json.loads(body)[0] == [queued.check_id]  # the task's only argument: the check's id
    sealed = _entry(queued.check_id)["password"]
    for text in (raw, body):
        assert MONITOR_PASSWORD.encode() not in text and sealed.encode() not in text
    assert MONITOR_PASSWORD not in repr(_entry(queued.check_id))  # encrypted at rest in the cache too

    assert check_run(queued.check_id) == "done"  # the worker's side, here in the test's process
    entry = _entry(queued.check_id)
    assert "password" not in entry and MONITOR_PASSWORD not in repr(entry)
    done = check_state(check_id=queued.check_id)
    assert done.status == "done" and not done.pending and done.report.ready
    assert (
        done.report.server_version.startswith("16")
        and done.target == f"{MONITOR_USER}@127.0.0.1:{pg_clusters[16].port}/app"
    )
    assert check_run(queued.check_id) is None  # a redelivered message runs nothing twice
    assert check_state(check_id=queued.check_id).report == done.report


def test_without_a_password_the_server_asks_for_one(broker, pg_clusters):
    queued = _queue(pg_clusters[16].port, password=None)
    assert _entry(queued.check_id)["password"] is None
    assert check_run(queued.check_id) == "done"
    report = check_state(check_id=queued.check_id).report
    assert not report.connected and report.failure == "authentication"


def test_a_check_no_worker_took_is_given_up_with_a_reason(broker):
    queued = _queue(1)
    assert check_state(check_id=queued.check_id).status == "queued"
    _age(queued.check_id, queued_at=QUEUE_WAIT_S + 1)
    lost = check_state(check_id=queued.check_id)
    assert lost.status == "lost" and not lost.pending and lost.waited_s > QUEUE_WAIT_S
    assert f"No worker took the check within {QUEUE_WAIT_S} s" in lost.problem
    # Its message expires with it: a worker that takes it late runs nothing.
    headers = json.loads(broker.lrange("checks", 0, -1)[0])["headers"]
    assert headers["expires"] and headers["id"] == queued.check_id


def test_a_check_whose_worker_stopped_is_given_up(broker):
    queued = _queue(1)
    entry = _entry(queued.check_id)
    cache.set(f"connection-check:{queued.check_id}", {**entry, "status": "running", "started_at": entry["queued_at"]})
    assert check_state(check_id=queued.check_id).status == "running"
    _age(queued.check_id, queued_at=longest_check_s() + 1, started_at=longest_check_s() + 1)
    lost = check_state(check_id=queued.check_id)
    assert lost.status == "lost" and "stopped in the middle of the check" in lost.problem


def test_a_worker_with_another_credentials_key_says_so(broker, settings):
    queued = _queue(1)
    settings.CREDENTIALS_KEY = base64.urlsafe_b64encode(b"k" * 32).decode()  # the worker's, not the web's
    assert check_run(queued.check_id) == "lost"
    lost = check_state(check_id=queued.check_id)
    assert lost.status == "lost" and "different CREDENTIALS_KEY values" in lost.problem
    assert "password" not in _entry(queued.check_id)


def test_an_unknown_check_is_none(broker):
    assert check_state(check_id="7c4d2b9e-0000-4000-8000-000000000000") is None
    assert check_run("7c4d2b9e-0000-4000-8000-000000000000") is None
