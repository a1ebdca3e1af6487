"""API tokens (accounts/tokens.py), through the whole HTTP stack: the secret shown once and stored hashed,
revocation and expiry at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import TokenError, token_create, token_hash, token_revoke
from inventory.models import Organization
from tests.api_world import assert_error

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


def test_token_secret_is_shown_once_and_stored_hashed(api_world):
    row, secret = token_create(user=api_world.users["viewer"], name="ci", read_only=True, expires_days=30)
    assert secret.startswith(f"pgc_{row.prefix}_") and len(secret) > 40
    stored = ApiToken.objects.get(pk=row.pk)
    assert stored.secret_hash == token_hash(secret) and secret not in str(vars(stored).values())
    assert timedelta(days=29) < stored.expires_at - timezone.now() <= timedelta(days=30)
    r = Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get(ORGS)
    assert r.status_code == 200 and [o["name"] for o in r.json()["results"]] == ["acme"]
    stored.refresh_from_db()
    assert stored.last_used_at is not None
    with pytest.raises(TokenError):
        token_create(user=api_world.users["viewer"], name=" ")
    with pytest.raises(TokenError):
        token_create(user=api_world.users["viewer"], name="x", expires_days=0)


def test_revocation_and_expiry_take_effect_at_once(api_world):
    row, secret = token_create(user=api_world.users["dba"], name="chatops")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get(ORGS).status_code == 200
    token_revoke(user=api_world.users["dba"], prefix=row.prefix)
    assert_error(client.get(ORGS), 401, "authentication_failed")
    row2, secret2 = token_create(user=api_world.users["dba"], name="short", expires_days=1)
    client2 = Client(HTTP_AUTHORIZATION=f"Bearer {secret2}")
    assert client2.get(ORGS).status_code == 200
    ApiToken.objects.filter(pk=row2.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_error(client2.get(ORGS), 401, "authentication_failed")
    # A deactivated user's tokens stop working too.
    _, secret3 = token_create(user=api_world.users["admin"], name="x")
    api_world.users["admin"].is_active = False
    api_world.users["admin"].save()
    assert_error(Client(HTTP_AUTHORIZATION=f"Bearer {secret3}").get(ORGS), 401)


def test_a_metrics_token_is_of_one_of_the_users_organizations_and_read_only(api_world):
    viewer = api_world.users["viewer"]
    row, _ = token_create(user=viewer, name="prometheus", organization=api_world.acme)
    assert row.organization == api_world.acme and row.read_only
    other = Organization.objects.create(name="tokens-elsewhere")
    with pytest.raises(TokenError, match="not a member of tokens-elsewhere"):
        token_create(user=viewer, name="prometheus", organization=other)
    assert not ApiToken.objects.filter(organization=other).exists()
