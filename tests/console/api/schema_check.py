"""Every API response a test receives is checked against the OpenAPI schema the API serves (through
schemathesis' response validation): `CheckedClient` is a Django test client that does it on each call."""

from __future__ import annotations

import functools

import requests
import schemathesis
from django.test import Client
from drf_spectacular.generators import SchemaGenerator


@functools.cache
def api_schema():
    return schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))


def check_response(method: str, path: str, response) -> None:
    """Raise if `response` does not conform to the schema of the operation serving `path` (CSV is not checked)."""
    if not path.startswith("/api/v1/") or response.get("Content-Type", "").startswith("text/csv"):
        return
    operation = api_schema().find_operation_by_path(method.upper(), path.split("?")[0])
    assert operation is not None, f"{method} {path} is not in the schema"
    prepared = requests.Request(method.upper(), f"http://testserver{path}").prepare()
    st = schemathesis.Response(
        status_code=response.status_code,
        headers={k: [v] for k, v in response.items()},
        content=response.content,
        request=prepared,
        elapsed=0.0,
        verify=False,
    )
    try:
        operation.validate_response(st)
    except (Exception, BaseExceptionGroup) as exc:  # schemathesis raises a group of failures
        failures = getattr(exc, "exceptions", [exc])
        text = "; ".join(str(f).splitlines()[0] for f in failures)
        raise AssertionError(f"{method} {path} ({response.status_code}) violates the schema: {text}") from exc


class CheckedClient(Client):
    """A test client whose every /api/v1/ response is validated against the schema."""

    def generic(self, method, path, *args, **kwargs):
        response = super().generic(method, path, *args, **kwargs)
        query = kwargs.get("QUERY_STRING", "")
        check_response(method, path + (f"?{query}" if query else ""), response)
        return response
