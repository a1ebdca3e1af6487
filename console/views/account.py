"""Logging in (at /) with the second factor's step, out, the user's preferences (time zone, two-factor
authentication) and personal API tokens."""

from __future__ import annotations

import zoneinfo

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import Http404
from django.shortcuts import redirect
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from accounts.access import managed_organizations, visible_organizations
from accounts.models import ApiToken, UserPreference, validate_time_zone
from accounts.tokens import MAX_EXPIRY_DAYS, TokenError, token_create, token_revoke
from console import two_factor
from console.views.common import render_page
from inventory.models import Membership, Organization


@method_decorator(login_not_required, name="dispatch")
class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class PreferencesForm(forms.Form):
    time_zone = forms.CharField(
        max_length=64, validators=[validate_time_zone], help_text="Times are stored in UTC and shown in this time zone."
    )


def preferences(request):
    pref, _ = UserPreference.objects.get_or_create(user=request.user)
    form = PreferencesForm(request.POST or None, initial={"time_zone": pref.time_zone})
    if request.method == "POST" and form.is_valid():
        pref.time_zone = form.cleaned_data["time_zone"]
        pref.save(update_fields=["time_zone"])
        request.session["time_zone"] = pref.time_zone
        messages.success(request, f"Times are now shown in {pref.time_zone}.")
        return redirect("preferences")
    zones = sorted(zoneinfo.available_timezones())
    return render_page(
        request, "console/preferences.html", {"form": form, "zones": zones}, status=400 if form.errors else 200
    )


class CodeForm(forms.Form):
    code = forms.CharField(max_length=12, label="Code", strip=True)


@login_not_required  # a session that owes its code is logged in, and LoginRequiredMiddleware would pass it anyway
def two_factor_verify(request):
    """/login/code/: the second step of a login, for a user with an authenticator app."""
    if not request.user.is_authenticated:
        return redirect("login")
    if not two_factor.owes_code(request):
        return two_factor.back_to(request)
    device = two_factor.confirmed_device(request.user)
    if device is None:  # removed meanwhile (by a console administrator): nothing to ask
        request.session[two_factor.SESSION_KEY] = False
        return two_factor.back_to(request)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        problem = two_factor.check_code(device, form.cleaned_data["code"])
        if problem is None:
            two_factor.passed(request, device)
            return two_factor.back_to(request)
        form.add_error("code", problem)
    context = {
        "form": form,
        "next": request.POST.get("next") or request.GET.get("next", ""),
        "issuer": settings.OTP_TOTP_ISSUER,
    }
    return render_page(request, "registration/two_factor.html", context, status=400 if form.errors else 200)


def two_factor_settings(request):
    """/preferences/two-factor/: turn the authenticator app on (its QR code, then a first code) or off (a code)."""
    form = CodeForm(request.POST or None)
    setup = two_factor.setup_pending(request)
    action = request.POST.get("action")
    if request.method == "POST" and action == "start":
        if two_factor.setup_start(request) is None:
            messages.error(request, two_factor.ALREADY_ON)
        return redirect("two-factor")
    if request.method == "POST" and form.is_valid():
        code = form.cleaned_data["code"]
        if action == "confirm" and setup is not None:
            problem = two_factor.setup_confirm(request, setup, code)
            done = (
                "Two-factor authentication is on: every login now asks for a code from your app, and your other "
                "sessions were logged out."
            )
        elif action == "off":
            problem = two_factor.turn_off(request, code)
            done = "Two-factor authentication is off: the password alone logs you in."
        else:
            problem, done = "Nothing to do: start again.", ""
        if problem is None:
            messages.success(request, done)
            return redirect("two-factor")
        form.add_error("code", problem)
    device = two_factor.confirmed_device(request.user)
    # Who is asked to turn it on: console staff, and organization admins.
    recommended = request.user.is_staff or managed_organizations(request.user, (Membership.Role.ADMIN,)).exists()
    context = {"form": form, "device": device, "setup": None if device else setup, "recommended": recommended}
    response = render_page(request, "console/two_factor.html", context, status=400 if form.errors else 200)
    response["Cache-Control"] = "no-store"  # the page may hold the app's secret
    return response


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. ci-checks or chatops.")
    read_only = forms.BooleanField(required=False, help_text="It may only read (no changes, acknowledgements).")
    expires_days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_EXPIRY_DAYS, help_text="Empty: it never expires."
    )
    # Empty: a personal API token. An organization: a metrics token, /metrics of its servers only, read-only.
    metrics_organization = forms.ModelChoiceField(queryset=Organization.objects.none(), required=False)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None:
            self.fields["metrics_organization"].queryset = visible_organizations(user).order_by("name")


def tokens(request):
    """/preferences/tokens/: the user's API tokens; a new one's secret is shown in this response only."""
    form = TokenForm(request.POST or None, user=request.user)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            row, secret = token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                read_only=form.cleaned_data["read_only"],
                expires_days=form.cleaned_data["expires_days"],
                organization=form.cleaned_data["metrics_organization"],
            )
        except TokenError as exc:
            form.add_error(None, str(exc))
        else:
            created = {"token": row, "secret": secret}
            form = TokenForm(user=request.user)
    rows = ApiToken.objects.filter(user=request.user).select_related("organization").order_by("-created_at")
    organizations = form.fields["metrics_organization"].queryset
    response = render_page(
        request,
        "console/tokens.html",
        {"form": form, "tokens": rows, "created": created, "organizations": organizations},
        status=400 if form.errors else 200,
    )
    response["Cache-Control"] = "no-store"  # the page may hold a secret
    return response


@require_POST
def token_revoke_view(request, prefix: str):
    try:
        row = token_revoke(user=request.user, prefix=prefix)
    except TokenError:
        raise Http404("no such active token") from None
    messages.success(request, f"Token {row.prefix} ({row.name}) is revoked: it stopped working now.")
    return redirect("tokens")
