"""The API's throttle (console/api/throttling.py over console/throttling.py): per user whatever the token, with
Retry-After, and no failure when Redis is down."""

from __future__ import annotations

import pytest

from console.api.throttling import TokenRateThrottle
from tests.api_world import assert_error

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


def test_throttled_per_user_with_retry_after(api_world, monkeypatch):
    monkeypatch.setattr(TokenRateThrottle, "rate", "3/min", raising=False)
    c = api_world.client("viewer")
    assert [c.get(ORGS).status_code for _ in range(3)] == [200, 200, 200]
    r = c.get(ORGS)
    assert_error(r, 429, "throttled")
    assert int(r["Retry-After"]) > 0
    # A new token of the same user buys no more requests; another user has a budget of their own.
    assert_error(api_world.client("viewer").get(ORGS), 429, "throttled")
    assert api_world.client("dba").get(ORGS).status_code == 200


def test_with_redis_down_the_api_still_answers(api_world, settings):
    """Throttling counts in Redis: without it, requests go through unthrottled instead of every one failing."""
    c = api_world.client("viewer")
    down = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    settings.CACHES = {"default": down}
    assert [c.get(ORGS).status_code for _ in range(3)] == [200, 200, 200]


def test_the_apis_expensive_operations_have_the_pages_rates(api_world, settings, monkeypatch):
    """A connection check (a worker dials the server) and an alert channel's test (a request to someone else's
    service, or up to 50 mails) cost as much through the API as from a page: the pages' rates, 429 past them."""
    from alerts.services import channel_create
    from inventory.models import Server

    settings.PAGE_RATES = {**settings.PAGE_RATES, "check": "2/min", "test_alert": "2/hour", "test_mail": "1/hour"}
    monkeypatch.setattr("console.api.servers.check_enqueue", lambda *a, **k: None)
    monkeypatch.setattr("alerts.tasks.deliver.delay", lambda pk: None)
    server = Server.objects.create(organization=api_world.acme, name="rated", host="192.0.2.1", user="monitor")
    dba, admin = api_world.client("dba"), api_world.client("admin")
    check = f"/api/v1/servers/{server.pk}/test/"
    assert [dba.post(check).status_code for _ in range(2)] == [202, 202]
    refused = dba.post(check)
    assert_error(refused, 429, "throttled")
    assert int(refused["Retry-After"]) > 0 and "connection checks" in refused.json()["message"]
    assert api_world.client("admin").post(check).status_code == 202  # another user: a budget of their own

    hook = channel_create(organization=api_world.acme, name="h", kind="webhook", target="https://192.0.2.1/x").channel
    mail = channel_create(organization=api_world.acme, name="m", kind="email", addresses=["a@acme.example"]).channel
    tests = {c: f"/api/v1/alert-channels/{c.pk}/test/" for c in (hook, mail)}
    assert admin.post(tests[mail]).status_code == 202
    assert "test mails" in assert_error(admin.post(tests[mail]), 429, "throttled")["message"]
    assert [admin.post(tests[hook]).status_code for _ in range(3)] == [202, 202, 429]
