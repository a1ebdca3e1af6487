"""What the console keeps about its users beyond Django's auth: their preferences and their API tokens.

The tables keep the names they had when these models lived in the console app (db_table): moving the models
changed no table (accounts/migrations/0001_initial.py)."""

import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


def validate_time_zone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(f"{value!r} is not a time zone of the IANA database (e.g. Europe/Paris, UTC)")


class UserPreference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # Times are stored in UTC and shown in this zone.
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    class Meta:
        db_table = "console_userpreference"

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone}"


class ApiToken(models.Model):
    """A personal API token. Only a hash of its secret is stored: the secret is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, unique=True)  # shown in lists, identifies the token
    secret_hash = models.CharField(max_length=64)  # sha256 hex of the whole token
    read_only = models.BooleanField(default=False)
    # A metrics token: /metrics of this organization's servers only, never the API (accounts/tokens.py).
    organization = models.ForeignKey(
        "inventory.Organization", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "console_apitoken"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.name})"
