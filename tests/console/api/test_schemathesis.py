"""Schemathesis against the API through its WSGI application (the one gunicorn serves, every middleware): every
operation of the served schema, with generated parameters and bodies and a valid token — no 5xx, and every
response (status, content type, headers, body) conforms to the schema.

In the test's own transaction: each request is handled in the test's thread, on its database session, as
Django's test client does (no new session per request, no flush of the database after each operation: the
live server's 3,000 sessions and 42 flushes took 140 s of a pytest worker). The HTTP server in front of the
application is tested where production runs it: gunicorn, in the compose healthcheck's and the production
tests' worlds."""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from accounts.tokens import token_create
from advisor import advice as found
from advisor.services import recommendations_apply
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization
from inventory.services import server_create
from tests.console.api.schema_check import api_schema

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
#: The served schema, its requests sent to the WSGI application (every check's too, those that send again).
schema = schemathesis.openapi.from_dict(api_schema().raw_schema)
schema.app = get_wsgi_application()
MAX_EXAMPLES = 12  # per operation: about 30 operations stay well inside a minute


@pytest.fixture(scope="module")
def on_the_tests_session():
    """The application's requests on the test's database session: the signal that ends a request closes an
    obsolete session, and a session in a transaction counts as one (Django's test client unhooks it too)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def api_headers(on_the_tests_session):
    """An admin of an organization with a server and a recommendation, and a read-write token."""
    org = Organization.objects.create(name="fuzz")
    user = get_user_model().objects.create_user("fuzzer", password="x")
    Membership.objects.create(organization=org, user=user, role="admin")
    server = server_create(
        name="fuzz-db", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="fuzz"
    )
    recommendations_apply(
        server=server,
        now=timezone.now(),
        clear_after=timedelta(hours=2),
        found_now=[
            found.Advice(
                rule="pgss_max", severity="critical", server="fuzz-db", subject="server", title="t", explanation="e"
            )
        ],
    )
    _, secret = token_create(user=user, name="fuzz")
    return {"Authorization": f"Bearer {secret}"}


SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much]


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
def test_api_conforms_and_never_fails(case, api_headers):
    # Every default check (no 5xx; status codes, content types, headers and bodies as documented) but two:
    # positive_data_acceptance, as OpenAPI cannot say that `since` excludes `from`/`to` or that `from` comes
    # before `to` (a schema-valid request may rightly get a 400, whose body is checked like any other); and
    # negative_data_rejection, as an empty query parameter (`?to=`) means "not given", as in the console.
    case.call_and_validate(headers=api_headers, excluded_checks=[positive_data_acceptance, negative_data_rejection])
