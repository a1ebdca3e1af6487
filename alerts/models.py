"""An organization's alert channels and every delivery made through them.

A channel's secret (a Slack or generic webhook URL, a PagerDuty routing key) and a webhook's signing secret are
stored encrypted like monitoring passwords (inventory.crypto) and never shown again; a channel that keeps
failing says so (consecutive_failures, last_error) on its page and in the API."""

from django.conf import settings
from django.db import models

from inventory.models import Organization


class Channel(models.Model):
    class Kind(models.TextChoices):
        EMAIL = "email"
        SLACK = "slack"
        PAGERDUTY = "pagerduty"
        WEBHOOK = "webhook"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="alert_channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    addresses = models.JSONField(default=list, blank=True)  # email: the recipients
    target_encrypted = models.TextField(blank=True, default="")  # Slack/webhook URL, PagerDuty routing key
    signing_secret_encrypted = models.TextField(blank=True, default="")  # webhook
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    last_delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="alert_channel_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}) of {self.organization}"


class Delivery(models.Model):
    """One message to one channel: its attempts and how it ended."""

    class Event(models.TextChoices):
        TEST = "test"
        OPEN = "open"
        RESOLVE = "resolve"
        REMIND = "remind"

    class Status(models.TextChoices):
        PENDING = "pending"  # created, or waiting for its next attempt
        SENDING = "sending"  # claimed by a worker
        SENT = "sent"
        FAILED = "failed"  # refused for good, or out of attempts

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=8, choices=Event.choices)
    title = models.CharField(max_length=300)
    message = models.JSONField(default=dict)  # alerts.channels.Message's fields: every attempt sends the same
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # When its next attempt's message is due (created: now; a retry: after its backoff). A pending delivery
    # long past it lost its message (Redis flushed, a worker that died holding it): the tidy task sends it again.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["channel", "-created_at"], name="alert_delivery_recent")]

    def __str__(self) -> str:
        return f"{self.event} to {self.channel_id}: {self.status}"
