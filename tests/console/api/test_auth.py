"""Who the API answers: nobody anonymously; a token (Bearer) or the browser's session."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.api_world import assert_error

ORGS = "/api/v1/organizations/"

pytestmark = pytest.mark.django_db


def test_nothing_is_readable_anonymously(api_world):
    assert_error(Client().get(ORGS), 401, "not_authenticated")
    body = assert_error(Client(HTTP_AUTHORIZATION="Bearer pgc_nope_nope").get(ORGS), 401, "authentication_failed")
    assert "invalid, revoked or expired" in body["message"]
    assert_error(Client(HTTP_AUTHORIZATION="Bearer").get(ORGS), 401)


def test_session_authentication_for_the_browser(api_world):
    c = Client()
    c.force_login(api_world.users["viewer"])
    assert c.get(ORGS).status_code == 200
