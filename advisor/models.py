"""Persisted advice: one row per (server, rule, subject) with its lifecycle and history, the last
evaluation of each server, and the thresholds an organization overrides."""

from django.conf import settings
from django.db import models

from advisor.thresholds import OVERRIDES
from inventory.models import Organization, Server


class Severity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class Status(models.TextChoices):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Recommendation(models.Model):
    """The latest state of one piece of advice; its past is in RecommendationEvent."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="recommendations")
    rule = models.CharField(max_length=40)
    subject = models.TextField()  # "server", "statement:<id>", "family:<kind>:<normalized text>", ...
    subject_key = models.CharField(max_length=64)  # sha256 of subject: the dedup key stays short
    severity = models.CharField(max_length=10, choices=Severity.choices)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    title = models.TextField()
    explanation = models.TextField()
    change_text = models.TextField(blank=True, default="")
    change_apply = models.CharField(max_length=10, blank=True, default="")  # restart | reload | none | client
    effect = models.TextField(blank=True, default="")
    cost = models.TextField(blank=True, default="")
    evidence = models.JSONField(default=list)  # [{"label", "unit", "points": [[iso time, value|null], ...]}]
    references = models.JSONField(default=list)
    first_seen_at = models.DateTimeField()  # first raised ever
    opened_at = models.DateTimeField()  # raised (or raised again) last
    last_seen_at = models.DateTimeField()  # last evaluation whose evidence raised it
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(  # None with resolved_at: resolved automatically
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    times_opened = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["server", "rule", "subject_key"], name="recommendation_unique_key"),
        ]
        indexes = [models.Index(fields=["server", "status"], name="recommendation_server_status")]

    def __str__(self) -> str:
        return f"{self.rule} {self.subject} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status != Status.RESOLVED


class RecommendationEvent(models.Model):
    """One step of a recommendation's life: opened, reopened, severity changed, acknowledged, resolved."""

    class Kind(models.TextChoices):
        OPENED = "opened"
        REOPENED = "reopened"
        SEVERITY = "severity"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"  # by a user
        CLEARED = "cleared"  # resolved automatically: the condition stayed clear long enough

    recommendation = models.ForeignKey(Recommendation, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    detail = models.TextField(blank=True, default="")  # the explanation at that moment (its numbers)

    class Meta:
        indexes = [models.Index(fields=["recommendation", "at"], name="recommendation_event_at")]
        ordering = ["at", "id"]


class Evaluation(models.Model):
    """The last time the advisor looked at a server, and what limited what it could see."""

    server = models.OneToOneField(Server, on_delete=models.CASCADE, primary_key=True, related_name="advisor_run")
    at = models.DateTimeField()
    partial = models.BooleanField(default=False)  # the monitoring role cannot see every statement
    notes = models.JSONField(default=list)  # sentences: what the evidence lacks (no history yet, CPU count unknown)
    error = models.TextField(blank=True, default="")  # the evaluation failed: why (kept until the next one)


class OrganizationThresholds(models.Model):
    """An organization's overrides of advisor.thresholds.Thresholds (None: the default, with its source)."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="advisor_thresholds"
    )
    # One nullable field per advisor.thresholds.OVERRIDES (None: the default), added below from the declaration.


for _override in OVERRIDES:
    _kind = models.PositiveIntegerField if _override.kind == "count" else models.FloatField
    OrganizationThresholds.add_to_class(_override.field, _kind(null=True, blank=True))
