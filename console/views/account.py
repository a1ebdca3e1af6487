"""Logging in (at /), out, and the user's preferences (time zone)."""

from __future__ import annotations

import zoneinfo

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect
from django.utils.decorators import method_decorator

from console.models import UserPreference, validate_time_zone
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
