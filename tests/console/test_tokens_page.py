"""API tokens in the console: created with the secret shown once, listed without it, revoked at once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import ApiToken
from accounts.tokens import token_hash
from inventory.models import Membership, Organization

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    user = get_user_model().objects.create_user("alice", password="x")
    c = Client()
    c.force_login(user)
    return user, c


def test_create_shows_the_secret_once_then_revoke_stops_it(alice):
    user, c = alice
    r = c.post("/preferences/tokens/", {"name": "ci-checks", "read_only": "on", "expires_days": "30"})
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    secret = re.search(r'id="token-secret">(pgc_[^<]+)<', r.content.decode()).group(1)
    row = ApiToken.objects.get(user=user)
    assert row.secret_hash == token_hash(secret) and row.read_only and row.expires_at is not None
    page = c.get("/preferences/tokens/").content.decode()
    assert secret not in page and f"pgc_{row.prefix}_…" in page and "read-only" in page
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/organizations/").status_code == 200
    r = c.post(f"/preferences/tokens/{row.prefix}/revoke/")
    assert r.status_code == 302
    assert api.get("/api/v1/organizations/").status_code == 401
    assert "revoked" in c.get("/preferences/tokens/").content.decode()


def test_bad_input_and_other_users_tokens(alice):
    user, c = alice
    r = c.post("/preferences/tokens/", {"name": "", "expires_days": "0"})
    assert r.status_code == 400 and not ApiToken.objects.exists()
    bob = get_user_model().objects.create_user("bob", password="x")
    other = Client()
    other.force_login(bob)
    other.post("/preferences/tokens/", {"name": "bob's"})
    theirs = ApiToken.objects.get(user=bob)
    assert c.post(f"/preferences/tokens/{theirs.prefix}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    assert c.get(f"/preferences/tokens/{theirs.prefix}/revoke/").status_code == 405
    assert "bob's" not in c.get("/preferences/tokens/").content.decode()


def test_a_metrics_token_of_one_of_the_users_organizations_reads_metrics_only(alice):
    user, c = alice
    ours, theirs = Organization.objects.create(name="tok-ours"), Organization.objects.create(name="tok-theirs")
    Membership.objects.create(user=user, organization=ours, role=Membership.Role.DBA)
    page = c.get("/preferences/tokens/").content.decode()
    assert "tok-ours: its servers on /metrics" in page and "tok-theirs" not in page  # only the user's own
    # Another organization's id, posted by hand: refused by the form's choices, nothing created.
    assert c.post("/preferences/tokens/", {"name": "sneaky", "metrics_organization": theirs.pk}).status_code == 400
    r = c.post("/preferences/tokens/", {"name": "prometheus", "metrics_organization": ours.pk})
    secret = re.search(r'id="token-secret">(pgc_[^<]+)<', r.content.decode()).group(1)
    row = ApiToken.objects.get(user=user)
    assert row.organization == ours and row.read_only  # read-only, whatever the box said
    assert "/metrics of tok-ours" in c.get("/preferences/tokens/").content.decode()
    bearer = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    refused = bearer.get("/api/v1/organizations/")
    assert refused.status_code == 401 and "metrics token" in refused.content.decode()
    assert bearer.get("/metrics").status_code == 200
