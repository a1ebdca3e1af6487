"""A monitoring password never shows where an error is reported: a Target's repr, and the locals Django's
error reports (pages with DEBUG, the mails to ADMINS, trackers that use its filter) print of every frame."""

import sys

import pytest
from django.test import RequestFactory
from django.views.debug import ExceptionReporter

from collectors.errors import RefusedByPolicy
from collectors.services import _load_previous, _read_with_retry
from inventory.endpoint import Endpoint
from inventory.models import Organization, Server

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
        _read_with_retry(server, _load_previous(server.pk))
    except RefusedByPolicy:
        exc_info = sys.exc_info()
    else:
        pytest.fail("the connection was not refused")
    request = RequestFactory().get("/")
    report = ExceptionReporter(request, *exc_info)
    text, html = report.get_traceback_text(), report.get_traceback_html()
    assert "_read_with_retry" in text and "dial_conninfo" in text  # the frames are there, with their locals
    assert SECRET not in text and SECRET not in html
