"""A consultant's audit exports and the log of who generated and downloaded them.

The tables keep the names they had when these models lived in the reports app (db_table): moving them changed
no table (exports/migrations/0001_initial.py)."""

from django.conf import settings
from django.db import models

from inventory.models import Organization


class AuditExport(models.Model):
    """A consultant's audit bundle of some servers over a pinned window, built by a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        EXPIRED = "expired"  # built, then its file deleted after settings.EXPORT_RETENTION_DAYS

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_exports")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    server_ids = models.JSONField(default=list)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    formats = models.JSONField(default=list)  # pdf, xlsx, csv, json
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)  # percent
    step = models.CharField(max_length=200, blank=True, default="")  # what it is doing now
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)  # claimed by a worker (the last one, if claimed again)
    # The build that holds the export (a token each claim draws): a build claimed again after it outlived
    # STALE_RUNNING_AFTER writes nothing more to the row, and its own folder is never the export's file.
    claim = models.CharField(max_length=32, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)
    file_name = models.CharField(max_length=255, blank=True, default="")  # under settings.EXPORT_ROOT
    sha256 = models.CharField(max_length=64, blank=True, default="")
    size_bytes = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "reports_auditexport"
        indexes = [models.Index(fields=["organization", "-created_at"], name="audit_export_recent")]


class AuditLogEntry(models.Model):
    """Who generated or downloaded what, and when (kept with the organization)."""

    class Action(models.TextChoices):
        EXPORT_REQUESTED = "export_requested"
        EXPORT_GENERATED = "export_generated"
        EXPORT_FAILED = "export_failed"
        EXPORT_DOWNLOADED = "export_downloaded"
        EXPORT_EXPIRED = "export_expired"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_log")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    export = models.ForeignKey(AuditExport, null=True, blank=True, on_delete=models.SET_NULL, related_name="log")
    at = models.DateTimeField()
    detail = models.TextField(blank=True, default="")

    class Meta:
        db_table = "reports_auditlogentry"
        indexes = [models.Index(fields=["organization", "-at"], name="audit_log_recent")]
        ordering = ["-at", "-id"]
