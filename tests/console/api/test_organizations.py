"""GET /api/v1/organizations/: the caller's own organizations, each with the caller's role."""

from __future__ import annotations

import pytest

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


def test_organizations_are_the_callers_own_with_their_role(api_world):
    r = api_world.client("dba").get(ORGS)
    assert r.json()["results"] == [{"id": api_world.acme.pk, "name": "acme", "role": "dba", "servers": 0}]
    r = api_world.client("outsider").get(ORGS)
    assert [o["name"] for o in r.json()["results"]] == ["other"]
