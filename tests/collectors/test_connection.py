"""A monitoring password never shows where an error is reported: a Target's repr, and the locals Django's
error reports (pages with DEBUG, the mails to ADMINS, trackers that use its filter) print of every frame."""

import sys
import time

import pytest
from django.test import RequestFactory
from django.views.debug import ExceptionReporter

from collectors.errors import RefusedByPolicy
from collectors.services import _load_previous, _read_with_retry
from inventory.endpoint import Endpoint
from inventory.models import Organization, Server
from tests.world import register

pytestmark = pytest.mark.django_db
SECRET = "pw-never-in-a-report-7f3a"


def test_the_password_is_not_in_a_targets_repr():
    from collectors.connection import Target

    target = Target(
        server_id=1,
        endpoint=Endpoint(host="db1", port=5432, database="app", user="m", sslmode="require"),
        password=SECRET,
    )
    assert SECRET not in repr(target) and "password" not in repr(target)


def test_an_error_report_from_the_collection_path_holds_no_password():
    """The password decrypted for a collection is in the frames of monitoring_target, the Target and libpq's
    parameters when the connection fails (here refused by the network policy): the report shows none of it."""
    org = Organization.objects.create(name="acme")
    server = Server(organization=org, name="meta", host="169.254.169.254", port=5432, database="app", user="m")
    server.set_password(SECRET)
    server.save()  # saved without full_clean: a server the policy refuses only at connect time
    try:
        _read_with_retry(server, _load_previous(server))
    except RefusedByPolicy:
        exc_info = sys.exc_info()
    else:
        pytest.fail("the connection was not refused")
    request = RequestFactory().get("/")
    report = ExceptionReporter(request, *exc_info)
    text, html = report.get_traceback_text(), report.get_traceback_html()
    assert "_read_with_retry" in text and "dial_conninfo" in text  # the frames are there, with their locals
    assert SECRET not in text and SECRET not in html


@pytest.mark.django_db(transaction=True)
def test_a_connection_of_its_own_reaches_another_database_at_the_pinned_address_within_the_deadline(pg_clusters):
    """connected(): what the schema reading and the plans open beside the snapshot's connection: the other database
    of the same server, at the address pinned (never a lookup of its own), bounded by the caller's deadline, and
    closed after the block."""
    from collectors import connection as monitored

    server = register(pg_clusters[16])
    target = monitored.monitoring_target(server).pinned("127.0.0.1")
    deadline = time.monotonic() + 5
    with monitored.connected(target.in_database("postgres"), deadline, 5.0) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == "postgres"
        assert conn.info.hostaddr == "127.0.0.1" and (conn.deadline, conn.budget_s) == (deadline, 5.0)
    assert conn.closed
    assert target.in_database("postgres").endpoint.database == "postgres" and target.endpoint.database == "app"
