"""Tokens, authentication, the error shape, throttling, CSV and the schema, through the whole HTTP stack."""

from __future__ import annotations

import csv
from datetime import timedelta
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import TokenError, token_create, token_hash, token_revoke
from console.api.throttling import TokenRateThrottle
from inventory.models import Server
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db
ORGS = "/api/v1/organizations/"


def test_nothing_is_readable_anonymously(api_world):
    assert_error(Client().get(ORGS), 401, "not_authenticated")
    body = assert_error(Client(HTTP_AUTHORIZATION="Bearer pgc_nope_nope").get(ORGS), 401, "authentication_failed")
    assert "invalid, revoked or expired" in body["message"]
    assert_error(Client(HTTP_AUTHORIZATION="Bearer").get(ORGS), 401)


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


def test_organizations_are_the_callers_own_with_their_role(api_world):
    r = api_world.client("dba").get(ORGS)
    assert r.json()["results"] == [{"id": api_world.acme.pk, "name": "acme", "role": "dba", "servers": 0}]
    r = api_world.client("outsider").get(ORGS)
    assert [o["name"] for o in r.json()["results"]] == ["other"]


def test_session_authentication_for_the_browser(api_world):
    c = Client()
    c.force_login(api_world.users["viewer"])
    assert c.get(ORGS).status_code == 200


def test_paging_refuses_oversized_and_malformed_pages(api_world):
    c = api_world.client("viewer")
    body = assert_error(c.get(ORGS, {"page_size": 100000}), 400, "invalid")
    assert "page_size" in body["errors"] and "between 1 and 500" in body["errors"]["page_size"][0]
    assert "page" in assert_error(c.get(ORGS, {"page": "x"}), 400)["errors"]
    r = c.get(ORGS, {"page": 3})
    assert r.status_code == 200 and r.json()["results"] == [] and r.json()["count"] == 1


def test_csv_by_accept_header_or_format(api_world):
    c = api_world.client("viewer")
    for r in (c.get(ORGS, HTTP_ACCEPT="text/csv"), c.get(ORGS, {"format": "csv"})):
        assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
        assert r.content.decode().splitlines() == ["id,name,role,servers", f"{api_world.acme.pk},acme,viewer,0"]


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


def test_schema_and_docs_page(api_world):
    c = Client()
    c.force_login(api_world.users["viewer"])
    schema = yaml.safe_load(c.get("/api/schema/").content)
    assert schema["openapi"].startswith("3.") and "/api/v1/organizations/" in schema["paths"]
    assert schema["components"]["securitySchemes"]["tokenAuth"]["scheme"] == "bearer"
    docs = c.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert b"cdn" not in docs.content.lower()  # served by the app (the CSP allows only 'self')
    r = Client().get("/api/schema/", {"format": "json"})
    assert r.status_code == 401 and yaml.safe_load(r.content)["code"] == "not_authenticated"


def test_a_response_that_does_not_match_the_schema_is_caught(api_world):
    from django.http import JsonResponse

    from tests.api.schema_check import check_response

    check_response("GET", ORGS, JsonResponse({"count": 0, "page": 1, "page_size": 50, "pages": 1, "results": []}))
    with pytest.raises(AssertionError, match="violates the schema"):
        check_response("GET", ORGS, JsonResponse({"count": "many", "results": [{"id": "x"}]}))
    with pytest.raises(AssertionError, match="violates the schema"):
        check_response("GET", ORGS, JsonResponse({"status": 404}, status=404))  # not the error shape


def test_csv_cells_are_text_in_a_spreadsheet_and_empty_ones_stay_empty(api_world):
    """A name that a spreadsheet would run as a formula (also behind a TAB or CR, which it skips) gets a leading
    quote; an empty cell stays empty, not a lone quote."""
    c = api_world.client("viewer")
    for hostile in ('=HYPERLINK("http://evil.example")', "\t=1+1", "\r@SUM(A1)", "-2+3", "+1"):
        api_world.acme.name = hostile
        api_world.acme.save()
        [header, row] = list(csv.reader(StringIO(c.get(ORGS, {"format": "csv"}).content.decode())))
        assert header == ["id", "name", "role", "servers"]
        assert row == [str(api_world.acme.pk), "'" + hostile, "viewer", "0"], hostile
    Server.objects.create(organization=api_world.acme, name="db-empty", host="db1.example", user="m")
    response = c.get("/api/v1/servers/", {"format": "csv", "organization": api_world.acme.pk})
    assert response.status_code == 200, response.content
    [header, row] = list(csv.reader(StringIO(response.content.decode())))
    assert row[header.index("last_error_message")] == "" and "'" not in row
