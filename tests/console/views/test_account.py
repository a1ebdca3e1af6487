"""Logging in at /, out, every page behind the login, the time zone preference, error pages and
security headers."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from accounts.models import UserPreference
from console.middleware import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="s3cret-pass")


def test_login_is_at_the_root_and_leads_to_the_fleet(client, alice):
    page = client.get("/")
    assert page.status_code == 200
    assert b'name="password"' in page.content
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert page.headers["X-Frame-Options"] == "DENY"
    bad = client.post("/", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 200 and b"did not match" in bad.content
    ok = client.post("/", {"username": "alice", "password": "s3cret-pass"})
    assert ok.status_code == 302 and ok.headers["Location"] == reverse("fleet")
    # Logged in, the root goes straight to the fleet.
    assert client.get("/").headers["Location"] == reverse("fleet")


def test_every_page_needs_a_login(client):
    urls = [reverse(n) for n in ("fleet", "preferences", "manage-servers", "organizations", "server-add")]
    urls += [reverse(n, args=[1]) for n in ("server", "server-statements", "planning", "statement", "organization")]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.headers["Location"].startswith("/?next="), url


def test_logout_is_a_post(client, alice):
    client.force_login(alice)
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("preferences")).status_code == 302


def test_time_zone_preference(client, alice):
    client.force_login(alice)
    page = client.get(reverse("preferences"))
    assert b'data-time-zone="UTC"' in page.content
    bad = client.post(reverse("preferences"), {"time_zone": "Mars/Olympus"})
    assert bad.status_code == 400 and b"not a time zone" in bad.content
    assert client.post(reverse("preferences"), {"time_zone": "Europe/Paris"}).status_code == 302
    assert UserPreference.objects.get(user=alice).time_zone == "Europe/Paris"
    assert b'data-time-zone="Europe/Paris"' in client.get(reverse("preferences")).content


def test_not_found_is_in_the_consoles_look(client, alice, settings):
    settings.DEBUG = False
    client.force_login(alice)
    page = client.get("/no/such/page/")
    assert page.status_code == 404
    assert b"nothing your organizations can see" in page.content
    assert b"console/console.css" in page.content
