"""Brakes on password guessing and on sessions left open, through the HTTP client: failures counted per address
and per user name (django-axes), the lockout answer, the admin's login, idle sessions, password rules, the
client's address behind proxies, and `check --deploy` on plain HTTP."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, RequestFactory
from django.utils import timezone

from console.deploy_checks import plain_http
from console.login_guard import client_ip

pytestmark = pytest.mark.django_db
PASSWORD = "a-long-enough-pass"
LIMIT = settings.AXES_FAILURE_LIMIT


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password=PASSWORD)


def _login(username: str, password: str, *, ip: str = "198.51.100.7", path: str = "/"):
    client = Client(REMOTE_ADDR=ip)
    return client, client.post(path, {"username": username, "password": password})


def _fail(times: int, *, usernames=("alice",), ips=("198.51.100.7",)) -> None:
    """`times` wrong passwords; the LIMIT-th failure is answered with the lockout already."""
    for i in range(times):
        _, response = _login(usernames[i % len(usernames)], f"guess-{i}", ip=ips[i % len(ips)])
        if i < LIMIT - 1:
            assert response.status_code == 200 and b"did not match" in response.content, i
        else:
            assert _locked(response, 15), i


def _locked(response, minutes: int) -> bool:
    text = response.content.decode()
    return (
        response.status_code == 429
        and f"try again in {minutes} minutes" in text
        and response.headers["Retry-After"] == str(minutes * 60)
    )


def test_guessing_one_user_name_is_stopped_whatever_the_address(alice):
    assert LIMIT == 10 and settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    _fail(LIMIT, ips=[f"198.51.100.{i}" for i in range(1, 11)])  # ten addresses, one name
    client, response = _login("alice", PASSWORD, ip="203.0.113.50")  # the right password, from a new address
    assert _locked(response, 15), response.content.decode()[:2000]
    assert "_auth_user_id" not in client.session
    # The form is shown again with the name kept and the reason, not the "did not match" line.
    assert 'value="alice"' in response.content.decode() and b"did not match" not in response.content
    # Another user from another address is not affected.
    User.objects.create_user("bob", password=PASSWORD)
    _, ok = _login("bob", PASSWORD, ip="203.0.113.51")
    assert ok.status_code == 302


def test_guessing_from_one_address_is_stopped_whatever_the_user_name(alice):
    _fail(LIMIT, usernames=[f"user{i}" for i in range(LIMIT)])  # ten names, one address
    _, response = _login("alice", PASSWORD)  # a real user from that address
    assert _locked(response, 15)
    _, ok = _login("alice", PASSWORD, ip="203.0.113.9")  # the same user elsewhere
    assert ok.status_code == 302


def test_below_the_limit_nothing_changes_and_the_password_is_not_stored(alice):
    _fail(LIMIT - 1)
    _, ok = _login("alice", PASSWORD)
    assert ok.status_code == 302
    for attempt in AccessAttempt.objects.all():
        assert "guess-" not in attempt.post_data and PASSWORD not in attempt.post_data


def test_the_admin_login_counts_and_locks_too(alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    for i in range(LIMIT):
        _, response = _login("alice", f"guess-{i}", path="/admin/login/")
        assert response.status_code == (200 if i < LIMIT - 1 else 429), i
    _, response = _login("alice", PASSWORD, path="/admin/login/")
    assert _locked(response, 15)


def test_the_wait_said_is_what_is_left_and_the_lock_ends(alice):
    _fail(LIMIT)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=11, seconds=30))
    _, response = _login("alice", PASSWORD)
    assert _locked(response, 4)  # 3 min 30 s left, rounded up
    # Attempts while locked out do not move the end of the lock.
    assert AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - timedelta(minutes=1)).count() == 0
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=1))
    _, ok = _login("alice", PASSWORD)
    assert ok.status_code == 302


def test_the_client_address_behind_trusted_proxies(settings):
    factory = RequestFactory()
    request = factory.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.20")
    settings.TRUSTED_PROXIES = 0
    assert client_ip(request) == "10.0.0.2"  # no proxy trusted: what a client writes is ignored
    settings.TRUSTED_PROXIES = 1
    assert client_ip(request) == "198.51.100.20"  # the proxy's entry, not the one the client wrote before it
    settings.TRUSTED_PROXIES = 3  # fewer entries than proxies: the header cannot be trusted
    assert client_ip(request) == "10.0.0.2"


def test_an_idle_session_ends_and_a_used_one_lives_on(alice, settings):
    settings.SESSION_COOKIE_AGE = 60
    client = Client()
    client.force_login(alice)
    assert client.get("/preferences/").status_code == 200
    session = client.session
    # In use: a request more than a quarter of the age after the last renewal moves the expiry on.
    session["renewed_at"] -= 20
    session.save()
    client.get("/preferences/")
    assert client.session.get_expiry_date() > timezone.now() + timedelta(seconds=55)
    # Idle past the age: the stored session has expired and the page asks for a login again.
    from django.contrib.sessions.models import Session

    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get("/preferences/")
    assert response.status_code == 302 and response.headers["Location"].startswith("/?next=")


def test_the_default_idle_expiry_is_hours_not_weeks():
    assert settings.SESSION_COOKIE_AGE == 8 * 3600


def test_weak_passwords_are_refused_by_the_admin(alice, client):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client.force_login(alice)
    for weak, reason in [
        ("12345678", "This password is too common."),
        ("839201746512", "This password is entirely numeric."),
        ("short-pw1", "This password is too short. It must contain at least 12 characters."),
        ("carol-the-user", "The password is too similar to the username."),
    ]:
        response = client.post(
            "/admin/auth/user/add/",
            {"username": "carol-the-user", "usage": "true", "password1": weak, "password2": weak},
        )
        assert response.status_code == 200 and reason in response.content.decode(), weak
    assert not User.objects.filter(username="carol-the-user").exists()


def test_check_deploy_refuses_plain_http_unless_acknowledged(settings):
    settings.DEBUG, settings.HTTPS, settings.ALLOW_PLAIN_HTTP = False, False, False
    with pytest.raises(SystemCheckError, match=r"console.E001.*HTTPS is off"):
        call_command("check", "--deploy", "--fail-level", "ERROR")
    settings.ALLOW_PLAIN_HTTP = True
    call_command("check", "--deploy", "--fail-level", "ERROR")  # passes: a warning only
    assert [p.id for p in plain_http()] == ["console.W001"]
    settings.ALLOW_PLAIN_HTTP, settings.HTTPS = False, True
    assert plain_http() == []
    settings.DEBUG, settings.HTTPS = True, False
    assert plain_http() == []
