"""console.middleware: a request runs in its user's time zone (UTC for a visitor, for a user who never chose one,
and for a name that is not a zone), read once from UserPreference into the session and reset after the response;
every response carries the Content-Security-Policy unless the view set its own."""

from importlib import import_module

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils import timezone

from accounts.models import UserPreference
from console.middleware import CONTENT_SECURITY_POLICY, ContentSecurityPolicyMiddleware, UserTimezoneMiddleware


def _request(user, **session):
    request = RequestFactory().get("/fleet/")
    request.user = user
    request.session = import_module(settings.SESSION_ENGINE).SessionStore()
    request.session.update(session)
    return request


def _zone_seen(request) -> str:
    seen = []
    UserTimezoneMiddleware(lambda r: seen.append(timezone.get_current_timezone_name()) or HttpResponse())(request)
    return seen[0]


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user("tz-user", password="x")


def test_a_visitor_sees_utc():
    assert _zone_seen(_request(AnonymousUser())) == "UTC"


def test_a_user_without_a_preference_sees_utc_and_it_is_kept_in_the_session(user):
    request = _request(user)
    assert _zone_seen(request) == "UTC" and request.session["time_zone"] == "UTC"


def test_the_preference_is_read_once_then_the_session_holds_it(user):
    UserPreference.objects.create(user=user, time_zone="Asia/Tokyo")
    request = _request(user)
    assert _zone_seen(request) == "Asia/Tokyo" and request.session["time_zone"] == "Asia/Tokyo"
    UserPreference.objects.filter(user=user).update(time_zone="America/Lima")
    assert _zone_seen(request) == "Asia/Tokyo"  # the preferences page writes the session when it changes


@pytest.mark.parametrize("name", ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", "Europe/Paris "])
def test_a_name_that_is_not_a_zone_is_utc(user, name):
    assert _zone_seen(_request(user, time_zone=name)) == "UTC"


def test_the_zone_is_reset_after_the_response_even_when_the_view_fails(user):
    def fails(request):
        assert timezone.get_current_timezone_name() == "Pacific/Auckland"
        raise RuntimeError("view failed")

    with pytest.raises(RuntimeError, match="view failed"):
        UserTimezoneMiddleware(fails)(_request(user, time_zone="Pacific/Auckland"))
    assert timezone.get_current_timezone_name() == settings.TIME_ZONE


def test_every_response_has_the_content_security_policy():
    response = ContentSecurityPolicyMiddleware(lambda r: HttpResponse())(RequestFactory().get("/"))
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["script-src"] == "'self'" and directives["object-src"] == "'none'"
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY


def test_a_views_own_policy_is_kept():
    def own(request):
        response = HttpResponse()
        response["Content-Security-Policy"] = "default-src 'none'"
        return response

    response = ContentSecurityPolicyMiddleware(own)(RequestFactory().get("/"))
    assert response["Content-Security-Policy"] == "default-src 'none'"
