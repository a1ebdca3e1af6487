"""The API's test world: two organizations, a user per role, tokens, and a client that sends a token (the
fixture `api_world`, registered in tests/conftest.py for the API's tests and the modules' own)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from accounts.tokens import token_create
from inventory.models import Membership, Organization
from tests.console.api.schema_check import CheckedClient


@dataclass
class ApiWorld:
    acme: Organization
    other: Organization
    users: dict  # role -> user (viewer, dba, admin of acme; "outsider": admin of other)

    def client(self, role: str, *, read_only: bool = False) -> CheckedClient:
        """A client with a new token of that role's user; every response is checked against the schema."""
        _, secret = token_create(user=self.users[role], name=f"test-{role}", read_only=read_only)
        return CheckedClient(HTTP_AUTHORIZATION=f"Bearer {secret}")


def build_api_world() -> ApiWorld:
    cache.clear()  # throttling counters of earlier tests
    acme = Organization.objects.create(name="acme")
    other = Organization.objects.create(name="other")
    users = {}
    for role in ("viewer", "dba", "admin"):
        users[role] = get_user_model().objects.create_user(role, password="x")
        Membership.objects.create(organization=acme, user=users[role], role=role)
    users["outsider"] = get_user_model().objects.create_user("outsider", password="x")
    Membership.objects.create(organization=other, user=users["outsider"], role="admin")
    return ApiWorld(acme, other, users)


@pytest.fixture
def api_world(db) -> ApiWorld:
    return build_api_world()


def assert_error(response, status: int, code: str | None = None) -> dict:
    """The one error shape: status, code, message, errors."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"status", "code", "message", "errors"}, body
    assert body["status"] == status and body["message"]
    if code is not None:
        assert body["code"] == code, body
    return body
