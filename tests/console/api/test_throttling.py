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
