"""The optional second factor through the HTTP client: turning it on takes a first code from the app, every
later login asks for a code before any page (the admin's and the API's session too), wrong codes are throttled,
a code is taken once, turning it off takes a code; API tokens and users without it are not concerned."""

from __future__ import annotations

import re
import time
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from accounts.tokens import token_create
from inventory.models import Membership, Organization

pytestmark = pytest.mark.django_db
PASSWORD = "pw-Two-factor-93"


def text(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def code_at(device: TOTPDevice, t: int) -> str:
    """The code of time step `t` (what the app shows during that step)."""
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, 0)
    totp.time = device.t0 + t * device.step + 1
    return f"{totp.token():06d}"


def next_code(device: TOTPDevice) -> str:
    """A code the device takes now: this step's, or the next one if this step's was taken (a code counts once;
    the device allows one step of drift)."""
    device.refresh_from_db()
    now = int((time.time() - device.t0) // device.step)
    return code_at(device, max(now, device.last_t + 1))


@pytest.fixture
def no_throttle(settings):
    """Wrong codes do not delay the next try (the throttle has a test of its own)."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


@pytest.fixture
def admin_user() -> User:
    user = User.objects.create_user("ada", password=PASSWORD)
    Membership.objects.create(user=user, organization=Organization.objects.create(name="acme"), role="admin")
    return user


def log_in(client: Client, username: str = "ada") -> object:
    return client.post(reverse("login"), {"username": username, "password": PASSWORD}, follow=True)


def turn_on(client: Client, user: User) -> TOTPDevice:
    page = client.post(reverse("two-factor"), {"action": "start"}, follow=True)
    secret = re.search(r'<code class="totp-secret">([A-Z2-7 ]+)</code>', page.content.decode()).group(1)
    device = TOTPDevice.objects.get(user=user)
    assert not device.confirmed and "<svg" in page.content.decode()
    assert secret.replace(" ", "") in device.config_url and "issuer=pgconsole" in device.config_url
    done = client.post(reverse("two-factor"), {"action": "confirm", "code": next_code(device)}, follow=True)
    assert "Two-factor authentication is on" in text(done)
    device.refresh_from_db()
    assert device.confirmed
    return device


def test_turning_it_on_takes_a_first_code_and_is_recommended_to_admins(client, admin_user, no_throttle):
    log_in(client)
    page = text(client.get(reverse("two-factor")))
    assert "off The password alone logs you in. Recommended for you" in page
    client.post(reverse("two-factor"), {"action": "start"})
    wrong = client.post(reverse("two-factor"), {"action": "confirm", "code": "000000"})
    assert wrong.status_code == 400 and "That code is not the right one" in text(wrong)
    assert not TOTPDevice.objects.get(user=admin_user).confirmed
    assert wrong["Cache-Control"] == "no-store"
    device = turn_on(client, admin_user)
    # The session that turned it on gave a code: it goes on.
    assert client.get(reverse("fleet")).status_code == 200
    assert TOTPDevice.objects.filter(user=admin_user).count() == 1 and device.name == "authenticator app"


def test_every_later_login_asks_for_the_code_before_any_page(client, admin_user, no_throttle):
    log_in(client)
    device = turn_on(client, admin_user)
    client.post(reverse("logout"))

    landed = log_in(client)
    assert landed.redirect_chain[-1][0] == f"{reverse('two-factor-verify')}?next=/fleet/"
    assert "your password was right" in text(landed)
    for path in ("/fleet/", "/preferences/", "/admin/", f"/servers/{1}/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith(reverse("two-factor-verify")), path
    api = client.get("/api/v1/servers/")
    assert api.status_code == 401 and api.json()["code"] == "second_factor_required"

    wrong = client.post(reverse("two-factor-verify"), {"code": "123 456", "next": "/preferences/"})
    assert wrong.status_code == 400 and "That code is not the right one" in text(wrong)
    passed = client.post(reverse("two-factor-verify"), {"code": next_code(device), "next": "/preferences/"})
    assert passed.status_code == 302 and passed["Location"] == "/preferences/"
    assert client.get("/fleet/").status_code == 200 and client.get("/api/v1/servers/").status_code == 200


def test_wrong_codes_are_throttled_and_a_code_is_taken_once(client, admin_user):
    log_in(client)
    device = turn_on(client, admin_user)
    client.post(reverse("logout"))
    log_in(client)
    used = code_at(device, device.last_t)  # the code turn_on gave: taken already
    again = client.post(reverse("two-factor-verify"), {"code": used})
    assert again.status_code == 400 and "(or it was used already)" in text(again)
    for _ in range(2):
        client.post(reverse("two-factor-verify"), {"code": "999999"})
    right = client.post(reverse("two-factor-verify"), {"code": next_code(device)})
    assert right.status_code == 400
    assert re.search(r"Too many wrong codes: try again in [1-8] seconds?\.", text(right))
    assert client.get("/fleet/").status_code == 302


def test_turning_it_off_takes_a_code(client, admin_user, no_throttle):
    log_in(client)
    device = turn_on(client, admin_user)
    refused = client.post(reverse("two-factor"), {"action": "off", "code": "000000"})
    assert refused.status_code == 400 and TOTPDevice.objects.filter(user=admin_user).exists()
    off = client.post(reverse("two-factor"), {"action": "off", "code": next_code(device)}, follow=True)
    assert "Two-factor authentication is off" in text(off)
    assert not TOTPDevice.objects.filter(user=admin_user).exists()
    client.post(reverse("logout"))
    assert log_in(client).redirect_chain[-1][0] == "/fleet/"


def test_api_tokens_and_users_without_it_are_not_concerned(client, admin_user):
    log_in(client)
    turn_on(client, admin_user)
    _, secret = token_create(user=admin_user, name="ci")
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/servers/").status_code == 200

    User.objects.create_user("val", password=PASSWORD)
    other = Client()
    assert log_in(other, "val").redirect_chain[-1][0] == "/fleet/"
    page = text(other.get(reverse("two-factor")))
    assert "The password alone logs you in." in page and "Recommended for you" not in page


def test_a_device_removed_by_an_administrator_lets_the_password_alone_in(client, admin_user):
    log_in(client)
    turn_on(client, admin_user)
    client.post(reverse("logout"))
    log_in(client)
    TOTPDevice.objects.filter(user=admin_user).delete()  # Django admin, TOTP devices: a lost phone
    response = client.get(reverse("two-factor-verify"), {"next": "/preferences/"})
    assert response.status_code == 302 and response["Location"] == "/preferences/"
    assert client.get("/fleet/").status_code == 200


def test_turning_it_on_logs_the_users_other_sessions_out(admin_user, no_throttle):
    """A session opened before (a stolen one, say) would never be asked for a code: it ends. Another user's
    session stays."""
    earlier, mine, other = Client(), Client(), Client()
    log_in(earlier)
    log_in(mine)
    User.objects.create_user("bob", password=PASSWORD)
    log_in(other, "bob")
    assert earlier.get(reverse("fleet")).status_code == 200
    device = turn_on(mine, admin_user)
    gone = earlier.get(reverse("fleet"))
    assert gone.status_code == 302 and gone["Location"].startswith(reverse("login"))
    assert mine.get(reverse("fleet")).status_code == 200 and other.get(reverse("fleet")).status_code == 200
    # Logging in again asks that session for the code.
    assert log_in(earlier).redirect_chain[-1][0].startswith(reverse("two-factor-verify"))
    assert TOTPDevice.objects.filter(user=admin_user).get() == device


def test_while_it_is_on_no_session_replaces_the_app_without_its_code(client, admin_user, no_throttle):
    log_in(client)
    device = turn_on(client, admin_user)
    refused = client.post(reverse("two-factor"), {"action": "start"}, follow=True)
    assert "turn it off with a code from the current one first" in text(refused)
    assert list(TOTPDevice.objects.filter(user=admin_user)) == [device]
    # Off with the current code, then a new app: the old device is gone, the new one on.
    off = client.post(reverse("two-factor"), {"action": "off", "code": next_code(device)}, follow=True)
    assert "Two-factor authentication is off" in text(off)
    new = turn_on(client, admin_user)
    assert list(TOTPDevice.objects.filter(user=admin_user)) == [new] and new.pk != device.pk
