"""The optional second factor: a TOTP code from an authenticator app after the password (django-otp's devices
and their throttling).

A user who turned it on (Preferences, Two-factor authentication) is logged in by the password, but every page
(the Django admin's too) sends them to the code's page until a code is accepted, and the API answers 401 to
that session; API tokens are not sessions and stay as they are. Whether a session still needs its code is kept
in the session itself from the login on (SESSION_KEY), so a user without a second factor costs no query.
Wrong codes are throttled per device: after n failures the next try waits 2^(n-1) seconds (django-otp's
ThrottlingMixin), on top of the login throttling of the password (console.login_guard).

Turning it on ends the user's other sessions (one opened before would never be asked for a code: a stolen
session would outlive the owner's turning it on). While it is on, no new device can be set up: replacing the app
means turning it off first, which takes a code from the current one.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from urllib.parse import quote

import django_otp
import qrcode
import qrcode.image.svg
from django.contrib.auth.signals import user_logged_in
from django.contrib.sessions.models import Session
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django_otp.plugins.otp_totp.models import TOTPDevice

SESSION_KEY = "second_factor"  # True while this session's user has a second factor this session has not passed
PENDING_KEY = "second_factor_pending"  # the device being set up, until its first code is accepted
# What a session that still owes its code may open: the code's page and logging out (static files are served
# before the middleware, by WhiteNoise).
OPEN = frozenset({"two-factor-verify", "logout"})
DEVICE_NAME = "authenticator app"


@dataclass(frozen=True)
class Setup:
    """A device being set up: what the user's app needs, as a QR code and as text to type."""

    device: TOTPDevice
    secret: str  # base32, in groups of four
    url: str  # otpauth://
    qr_svg: str


def confirmed_device(user) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).order_by("pk").first()


@receiver(user_logged_in)
def _owe_a_code(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = confirmed_device(user) is not None


def owes_code(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not request.session.get(SESSION_KEY):
        return False
    return not user.is_verified()


class SecondFactorMiddleware:
    """After django_otp's OTPMiddleware: a session that owes its code reaches only the code's page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if owes_code(request) and _url_name(request) not in OPEN:
            if request.path.startswith("/api/"):
                return JsonResponse(
                    {
                        "status": 401,
                        "code": "second_factor_required",
                        "message": "this session has not given its authenticator code yet: log in on the console, "
                        "or use an API token",
                    },
                    status=401,
                )
            return redirect(f"{reverse('two-factor-verify')}?next={quote(request.get_full_path())}")
        return self.get_response(request)


def _url_name(request: HttpRequest) -> str | None:
    try:
        return resolve(request.path_info).url_name
    except Resolver404:
        return None


def wait_seconds(device: TOTPDevice) -> int:
    """How long before the device takes a code again (0: now)."""
    allowed, info = device.verify_is_allowed()
    if allowed or not info or "locked_until" not in info:
        return 0
    return max(1, math.ceil((info["locked_until"] - timezone.now()).total_seconds()))


def check_code(device: TOTPDevice, code: str) -> str | None:
    """None when the code is accepted (each code once), else why not, in the user's words."""
    if wait := wait_seconds(device):
        return f"Too many wrong codes: try again in {wait} second{'s' if wait != 1 else ''}."
    code = "".join(code.split())
    if not device.verify_token(code):
        return "That code is not the right one (or it was used already): codes change every 30 seconds."
    return None


def passed(request: HttpRequest, device: TOTPDevice) -> None:
    """This session has given its code: it may open every page its user may."""
    django_otp.login(request, device)
    request.session[SESSION_KEY] = False


ALREADY_ON = (
    "Two-factor authentication is on already: to use another app, turn it off with a code from the current one "
    "first, then set up the new one."
)


def setup_start(request: HttpRequest) -> Setup | None:
    """A new device for the user, not confirmed until its first code: any earlier unconfirmed one goes. None
    while a device is on (ALREADY_ON): a session may not replace it without its code."""
    if confirmed_device(request.user) is not None:
        return None
    TOTPDevice.objects.filter(user=request.user, confirmed=False).delete()
    device = TOTPDevice.objects.create(user=request.user, name=DEVICE_NAME, confirmed=False)
    request.session[PENDING_KEY] = device.pk
    return setup_of(device)


def setup_pending(request: HttpRequest) -> Setup | None:
    pk = request.session.get(PENDING_KEY)
    device = TOTPDevice.objects.filter(pk=pk, user=request.user, confirmed=False).first() if pk else None
    return setup_of(device) if device is not None else None


def setup_confirm(request: HttpRequest, setup: Setup, code: str) -> str | None:
    """Turn the pending device on with its first code; None when done, else why not."""
    if confirmed_device(request.user) is not None:
        return ALREADY_ON
    if problem := check_code(setup.device, code):
        return problem
    setup.device.confirmed = True
    setup.device.save(update_fields=["confirmed"])
    request.session.pop(PENDING_KEY, None)
    passed(request, setup.device)
    end_other_sessions(request.user, keep=request.session.session_key)
    return None


def end_other_sessions(user, *, keep: str | None) -> int:
    """Log the user out everywhere but the session `keep`: how many sessions ended. Sessions are not indexed by
    user, so every live one is read: turning the second factor on is rare."""
    ended = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.session_key != keep and session.get_decoded().get("_auth_user_id") == str(user.pk):
            ended.append(session.session_key)
    Session.objects.filter(session_key__in=ended).delete()
    return len(ended)


def turn_off(request: HttpRequest, code: str) -> str | None:
    """Remove the user's second factor, on a valid code; None when done, else why not."""
    device = confirmed_device(request.user)
    if device is None:
        return "Two-factor authentication is not on."
    if problem := check_code(device, code):
        return problem
    TOTPDevice.objects.filter(user=request.user).delete()
    request.session[SESSION_KEY] = False
    return None


def setup_of(device: TOTPDevice) -> Setup:
    secret = base64.b32encode(device.bin_key).decode()
    qr = qrcode.make(device.config_url, image_factory=qrcode.image.svg.SvgPathImage, box_size=8, border=2)
    return Setup(
        device=device,
        secret=" ".join(secret[i : i + 4] for i in range(0, len(secret), 4)),
        url=device.config_url,
        qr_svg=qr.to_string(encoding="unicode"),
    )


def back_to(request: HttpRequest, default: str = "fleet") -> HttpResponse:
    """To the page the user was going to (this site's only), else `default`."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return redirect(target)
    return redirect(default)
