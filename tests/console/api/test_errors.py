"""console.api.errors: every API error has one shape, {"status", "code", "message", "errors"} with the field errors
by field, whether DRF or Django raised it; headers a client acts on (Retry-After, WWW-Authenticate) are kept, and
an error asked for as CSV is still JSON. A non-API exception is left to Django (a 500)."""

from types import SimpleNamespace

import pytest
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions

from console.api.common import CSVRenderer, JSONRenderer
from console.api.errors import exception_handler
from tests.api_world import assert_error


def _error(exc, context=None) -> tuple[dict, dict]:
    r = exception_handler(exc, context or {})
    return r.data, {k: v for k, v in r.items() if k != "Content-Type"}


def test_field_errors_by_field_and_the_first_as_the_message():
    body, _ = _error(exceptions.ValidationError({"name": ["This field is required."], "port": ["Too big.", "Odd."]}))
    assert body == {
        "status": 400,
        "code": "invalid",
        "message": "name: This field is required.",
        "errors": {"name": ["This field is required."], "port": ["Too big.", "Odd."]},
    }


def test_nested_field_errors_are_plain_messages_that_say_where():
    detail = {"formats": {0: ['"docx" is not a valid choice.']}, "settings": {"max": ["Too small."]}}
    body, _ = _error(exceptions.ValidationError(detail))
    assert body["errors"] == {"formats": ['item 1: "docx" is not a valid choice.'], "settings": ["max: Too small."]}
    assert body["message"] == 'formats: item 1: "docx" is not a valid choice.'
    # A nested serializer's list: the valid items say nothing, the others by their place (from 1).
    body, _ = _error(exceptions.ValidationError({"servers": [{}, {"port": ["Too large."]}]}))
    assert body["errors"] == {"servers": ["item 2, port: Too large."]}
    assert body["message"] == "servers: item 2, port: Too large."


@pytest.mark.parametrize("detail", ["window_end is in the future", ["window_end is in the future", "second"]])
def test_errors_without_a_field_are_non_field_errors(detail):
    body, _ = _error(exceptions.ValidationError(detail))
    assert body["message"] == "window_end is in the future" and body["code"] == "invalid"
    assert body["errors"]["non_field_errors"][0] == "window_end is in the future"


def test_an_empty_validation_error_still_says_something():
    assert _error(exceptions.ValidationError({}))[0]["message"] == "invalid request"


@pytest.mark.parametrize(
    "exc, status, code, message",
    [
        (exceptions.NotFound(), 404, "not_found", "Not found."),
        (Http404(), 404, "not_found", "not found"),
        (Http404("no such server"), 404, "not_found", "no such server"),
        (DjangoPermissionDenied(), 403, "permission_denied", "permission denied"),
        (DjangoPermissionDenied("viewers cannot"), 403, "permission_denied", "viewers cannot"),
        (
            exceptions.PermissionDenied("read-only token", code="read_only_token"),
            403,
            "read_only_token",
            "read-only token",
        ),
    ],
)
def test_refusals_have_the_shape_and_no_field_errors(exc, status, code, message):
    body, _ = _error(exc)
    assert body == {"status": status, "code": code, "message": message, "errors": {}}


def test_throttled_keeps_retry_after():
    body, headers = _error(exceptions.Throttled(wait=30))
    assert (body["status"], body["code"], body["errors"]) == (429, "throttled", {})
    assert "30 seconds" in body["message"] and headers["Retry-After"] == "30"


def test_not_authenticated_keeps_the_challenge():
    exc = exceptions.NotAuthenticated()
    exc.auth_header = 'Bearer realm="api"'
    body, headers = _error(exc)
    assert (body["status"], body["code"]) == (401, "not_authenticated")
    assert headers["WWW-Authenticate"] == 'Bearer realm="api"'


def test_an_exception_that_is_not_an_api_error_is_left_to_django():
    assert exception_handler(ValueError("boom"), {}) is None


def test_an_error_asked_for_as_csv_is_rendered_as_json():
    request = SimpleNamespace(accepted_renderer=CSVRenderer(), accepted_media_type="text/csv")
    exception_handler(exceptions.NotFound(), {"request": request})
    assert isinstance(request.accepted_renderer, JSONRenderer)
    assert request.accepted_media_type == JSONRenderer.media_type


@pytest.mark.django_db
def test_through_an_endpoint_a_missing_server_is_a_404_in_json_even_as_csv(api_world):
    c = api_world.client("viewer")
    for r in (c.get("/api/v1/servers/999999/"), c.get("/api/v1/servers/999999/", {"format": "csv"})):
        assert r["Content-Type"].startswith("application/json")
        assert assert_error(r, 404, "not_found")["errors"] == {}
