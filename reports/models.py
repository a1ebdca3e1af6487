"""What the weekly reports keep: each organization's report schedule and recipients, every weekly send (one
per organization and week, claimed before it is sent) with its deliveries, and the unsubscribed addresses.
The audit exports are exports/'s."""

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models

from accounts.models import validate_time_zone
from inventory.models import Organization


class ReportSchedule(models.Model):
    """An organization's weekly report: when (in its time zone) and to whom besides the members who opted in."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="report_schedule"
    )
    enabled = models.BooleanField(default=True)
    weekday = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(6)])  # 0 = Monday
    hour = models.PositiveSmallIntegerField(default=7, validators=[MaxValueValidator(23)])
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    # Client stakeholders without an account.
    extra_recipients = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"weekly report of {self.organization}"


class ReportOptIn(models.Model):
    """A member who wants the organization's weekly report."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="report_opt_ins")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="report_opt_ins")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "user"], name="report_opt_in_unique")]


class Unsubscribed(models.Model):
    """An address that followed its unsubscribe link: the organization's report is not sent to it again."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="report_unsubscribed")
    address = models.EmailField()  # lower-cased
    at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "address"], name="report_unsubscribed_unique")]


class WeeklySend(models.Model):
    """One report of one organization for one ISO week. A weekly send is claimed by inserting this row
    (unique per organization and week) before anything is mailed, so a re-run never sends twice; a test
    send ("send me a test now", `reports send --to`) is recorded too, but is not unique."""

    class Kind(models.TextChoices):
        WEEKLY = "weekly"
        TEST = "test"

    class Status(models.TextChoices):
        SENDING = "sending"
        SENT = "sent"
        PARTIAL = "partial"  # some recipients failed after every retry
        FAILED = "failed"
        EMPTY = "empty"  # nobody to send to

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="weekly_sends")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.WEEKLY)
    week = models.CharField(max_length=8)  # ISO week, e.g. 2026-W47
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.SENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "week"], condition=models.Q(kind="weekly"), name="weekly_send_once_a_week"
            ),
        ]
        indexes = [models.Index(fields=["organization", "-claimed_at"], name="weekly_send_recent")]

    def __str__(self) -> str:
        return f"{self.organization} {self.week} ({self.kind}, {self.status})"


class ReportDelivery(models.Model):
    """One recipient of one send, with its attempts (SMTP failures are retried with backoff). Named apart from
    alerts.Delivery (one alert's message to one channel); its table keeps the name it had as reports.Delivery."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    send = models.ForeignKey(WeeklySend, on_delete=models.CASCADE, related_name="deliveries")
    address = models.EmailField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "reports_delivery"
        constraints = [models.UniqueConstraint(fields=["send", "address"], name="delivery_unique")]
        indexes = [models.Index(fields=["address", "status"], name="delivery_address_status")]
