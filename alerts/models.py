"""An organization's alert channels, its rules, the alerts they raise and every delivery made through them.

A channel's secret (a Slack or generic webhook URL, a PagerDuty routing key) and a webhook's signing secret are
stored encrypted like monitoring passwords (inventory.crypto) and never shown again; a channel that keeps
failing says so (consecutive_failures, last_error) on its page and in the API. A rule's thresholds are typed
fields, declared with their ranges in alerts/rule_fields.py and checked by Rule.clean; an Alert is one condition
from the moment it is first seen true to its resolution, with a timestamp per notification so that each is
claimed (sent) once."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from advisor.models import Severity
from alerts.rule_fields import DEFAULTS, FIELDS
from inventory.models import Organization, Server


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
        ESCALATE = "escalate"  # an open alert that became more severe

    class Status(models.TextChoices):
        PENDING = "pending"  # created, or waiting for its next attempt
        SENDING = "sending"  # claimed by a worker
        SENT = "sent"
        FAILED = "failed"  # refused for good, or out of attempts

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    # The alert it tells of (None: a test). Kept when the alert goes with its rule: what was sent stays on record.
    alert = models.ForeignKey("Alert", null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries")
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


class Rule(models.Model):
    """What raises an alert for an organization's servers (those with `tag`, or all), and who hears of it
    (`channels`, or every enabled channel of the organization). Each threshold applies to its kind only
    (alerts/rule_fields.py); the rules an organization starts with are in alerts/defaults.py."""

    class Kind(models.TextChoices):
        SERVER_DOWN = "server_down"
        ADVISOR = "advisor"
        DEALLOC = "dealloc"
        REGRESSION = "regression"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    tag = models.CharField(max_length=100, blank=True, default="")  # blank: every server of the organization
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")  # none: every enabled channel
    # What each setting means, the kind that reads it, its range and why its default is what it is are declared
    # once, in alerts/rule_fields.py.
    hold_minutes = models.PositiveIntegerField(default=DEFAULTS["hold_minutes"])
    remind_minutes = models.PositiveIntegerField(default=DEFAULTS["remind_minutes"])
    down_minutes = models.PositiveIntegerField(default=DEFAULTS["down_minutes"])
    min_severity = models.CharField(max_length=10, choices=Severity.choices, default=DEFAULTS["min_severity"])
    dealloc_per_s = models.FloatField(default=DEFAULTS["dealloc_per_s"])
    dealloc_minutes = models.PositiveIntegerField(default=DEFAULTS["dealloc_minutes"])
    regression_factor = models.FloatField(default=DEFAULTS["regression_factor"])
    regression_min_share = models.FloatField(default=DEFAULTS["regression_min_share"])
    regression_days = models.PositiveIntegerField(default=DEFAULTS["regression_days"])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="alert_rule_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}) of {self.organization}"

    def clean(self) -> None:
        """Every setting in its declared range (alerts/rule_fields.py), each refusal under its field, with what
        would be accepted."""
        errors = {f.name: f.refusal for f in FIELDS if not f.accepts(getattr(self, f.name))}
        if self.kind not in self.Kind.values:
            errors["kind"] = f"one of {', '.join(self.Kind.values)}"
        if errors:
            raise ValidationError(errors)


class Alert(models.Model):
    """One condition of one rule on one server, from first seen true to resolved. pending: true for less than
    the rule's hold; open: notified (or being); resolved: no longer true (a pending one resolves silently).
    Each notification is claimed by a conditional UPDATE of its timestamp, so a second evaluation of the same
    instant, or a racing one, never sends it again."""

    class State(models.TextChoices):
        PENDING = "pending"
        OPEN = "open"
        RESOLVED = "resolved"

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="alerts")
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="alerts")
    key = models.CharField(max_length=200)  # the condition's identity in its rule: "server:12", "statement:345"
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    since = models.DateTimeField()  # when the condition began, as far as the evidence says
    first_true_at = models.DateTimeField()  # the first evaluation that found it true
    last_true_at = models.DateTimeField()
    opened_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    notified_open_at = models.DateTimeField(null=True, blank=True)
    notified_resolve_at = models.DateTimeField(null=True, blank=True)
    # The severity its last notification (the opening, an escalation) said: a higher one now is notified again.
    notified_severity = models.CharField(max_length=10, blank=True, default="")
    last_reminded_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    severity = models.CharField(max_length=10, choices=Severity.choices)
    title = models.CharField(max_length=300)  # what happened, without the server's name
    summary = models.TextField()  # how bad, in words with its figures
    figures = models.JSONField(default=dict)  # the numbers that raised it
    change_text = models.TextField(blank=True, default="")  # the advisor's exact change, where it has one
    config_changes = models.JSONField(default=list)  # a regression's: [{"at", "setting", "before", "after"}]
    path = models.CharField(max_length=200)  # where the console shows it (CONSOLE_URL + path)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "key"], condition=~Q(state="resolved"), name="alert_one_unresolved_per_condition"
            )
        ]
        indexes = [models.Index(fields=["server", "state"], name="alert_server_state")]

    def __str__(self) -> str:
        return f"{self.rule.name} {self.key} ({self.state})"

    @property
    def dedup_key(self) -> str:
        """PagerDuty's dedup key and the webhook's alert.id: one per condition of a rule, the same from open to
        resolve (a condition that comes back later opens a new incident after PagerDuty resolved the old)."""
        return f"pgconsole-{self.rule_id}-{self.key}"
