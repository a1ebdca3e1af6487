"""Logging in (at /), out, the user's preferences (time zone) and personal API tokens."""

from __future__ import annotations

import zoneinfo

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import Http404
from django.shortcuts import redirect
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from console.api.tokens import MAX_EXPIRY_DAYS, TokenError, token_create, token_revoke
from console.models import ApiToken, UserPreference, validate_time_zone
from console.views.common import render_page


@method_decorator(login_not_required, name="dispatch")
class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class PreferencesForm(forms.Form):
    time_zone = forms.CharField(max_length=64, validators=[validate_time_zone],
                                help_text="Times are stored in UTC and shown in this time zone.")  # fmt: skip


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
    return render_page(request, "console/preferences.html", {"form": form, "zones": zones},
                       status=400 if form.errors else 200)  # fmt: skip


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. ci-checks or chatops.")
    read_only = forms.BooleanField(required=False, help_text="It may only read (no changes, acknowledgements).")
    expires_days = forms.IntegerField(required=False, min_value=1, max_value=MAX_EXPIRY_DAYS,
                                      help_text="Empty: it never expires.")  # fmt: skip


def tokens(request):
    """/preferences/tokens/: the user's API tokens; a new one's secret is shown in this response only."""
    form = TokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            row, secret = token_create(user=request.user, name=form.cleaned_data["name"],
                                       read_only=form.cleaned_data["read_only"],
                                       expires_days=form.cleaned_data["expires_days"])  # fmt: skip
        except TokenError as exc:
            form.add_error(None, str(exc))
        else:
            created = {"token": row, "secret": secret}
            form = TokenForm()
    rows = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    response = render_page(request, "console/tokens.html", {"form": form, "tokens": rows, "created": created},
                           status=400 if form.errors else 200)  # fmt: skip
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
