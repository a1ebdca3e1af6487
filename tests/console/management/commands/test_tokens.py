"""manage.py tokens: create, list and revoke a user's API tokens."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import ApiToken
from accounts.tokens import token_hash
from tests.api_world import assert_error

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


def test_tokens_command_creates_lists_and_revokes(api_world):
    out, err = StringIO(), StringIO()
    call_command("tokens", "create", "viewer", "--read-only", "--expires", "7", "--name", "ci", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    row = ApiToken.objects.get(secret_hash=token_hash(secret))
    assert row.read_only and row.name == "ci" and "shown once" in err.getvalue()
    listing = StringIO()
    call_command("tokens", "list", stdout=listing)
    assert row.prefix in listing.getvalue() and "read-only" in listing.getvalue() and secret not in listing.getvalue()
    call_command("tokens", "revoke", "viewer", row.prefix, stdout=StringIO())
    assert_error(Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get(ORGS), 401)
    with pytest.raises(CommandError, match="no user"):
        call_command("tokens", "create", "nobody")
    with pytest.raises(CommandError, match="no active token"):
        call_command("tokens", "revoke", "viewer", row.prefix)


def test_a_metrics_token_from_the_command_line(api_world):
    out, err = StringIO(), StringIO()
    call_command("tokens", "create", "viewer", "--metrics", "acme", "--name", "prometheus", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert "/metrics of acme" in err.getvalue()
    listing = StringIO()
    call_command("tokens", "list", "viewer", stdout=listing)
    assert "/metrics of acme" in listing.getvalue()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/metrics").status_code == 200
    assert_error(Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get(ORGS), 401)
    with pytest.raises(CommandError, match="no organization 'nowhere'"):
        call_command("tokens", "create", "viewer", "--metrics", "nowhere")
