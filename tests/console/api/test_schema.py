"""The API's OpenAPI schema: served with its docs page, and a response that does not match it caught."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


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

    from tests.console.api.schema_check import check_response

    check_response("GET", ORGS, JsonResponse({"count": 0, "page": 1, "page_size": 50, "pages": 1, "results": []}))
    with pytest.raises(AssertionError, match="violates the schema"):
        check_response("GET", ORGS, JsonResponse({"count": "many", "results": [{"id": "x"}]}))
    with pytest.raises(AssertionError, match="violates the schema"):
        check_response("GET", ORGS, JsonResponse({"status": 404}, status=404))  # not the error shape
