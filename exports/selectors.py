"""The audit exports and the audit log as the console page and the API list them (dataclasses, one query
each): an organization's exports newest first with their progress and file, and who did what when."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from exports.models import AuditExport, AuditLogEntry
from inventory.models import Server


@dataclass(frozen=True)
class ExportRow:
    id: int
    organization_id: int
    organization: str
    requested_by: str | None
    server_ids: list[int]
    servers: list[str]  # names of those still registered
    window_start: datetime
    window_end: datetime
    formats: list[str]
    status: str  # queued | running | done | failed | expired
    progress: int  # percent
    step: str
    error: str
    created_at: datetime
    started_at: datetime | None  # when a worker claimed it
    finished_at: datetime | None
    file_name: str  # the bundle's name ("" until done)
    sha256: str
    size_bytes: int | None

    @property
    def busy(self) -> bool:
        return self.status in (AuditExport.Status.QUEUED, AuditExport.Status.RUNNING)


def _rows(exports: list[AuditExport]) -> list[ExportRow]:
    ids = {i for e in exports for i in e.server_ids}
    names = dict(Server.objects.filter(pk__in=ids).values_list("pk", "name"))
    return [
        ExportRow(
            id=e.pk,
            organization_id=e.organization_id,
            organization=e.organization.name,
            requested_by=e.requested_by.get_username() if e.requested_by else None,
            server_ids=list(e.server_ids),
            servers=sorted(names[i] for i in e.server_ids if i in names),
            window_start=e.window_start,
            window_end=e.window_end,
            formats=list(e.formats),
            status=e.status,
            progress=e.progress,
            step=e.step,
            error=e.error,
            created_at=e.created_at,
            started_at=e.started_at,
            finished_at=e.finished_at,
            file_name=PurePosixPath(e.file_name).name if e.file_name else "",
            sha256=e.sha256,
            size_bytes=e.size_bytes,
        )
        for e in exports
    ]


def audit_exports(*, organization_ids: Iterable[int], limit: int | None = 50) -> list[ExportRow]:
    """The exports of these organizations, newest first."""
    qs = AuditExport.objects.filter(organization_id__in=list(organization_ids)).select_related(
        "organization", "requested_by"
    )
    qs = qs.order_by("-created_at", "-id")
    return _rows(list(qs if limit is None else qs[:limit]))


def audit_export(*, export_id: int, organization_ids: Iterable[int]) -> ExportRow | None:
    """One export if it belongs to one of these organizations (None: the caller answers 404)."""
    found = AuditExport.objects.filter(pk=export_id, organization_id__in=list(organization_ids))
    rows = _rows(list(found.select_related("organization", "requested_by")))
    return rows[0] if rows else None


@dataclass(frozen=True)
class LogRow:
    at: datetime
    user: str | None  # None: the system (the worker, or manage.py export)
    action: str
    export_id: int | None
    detail: str


def audit_log(*, organization_id: int, limit: int = 100) -> list[LogRow]:
    """The organization's audit log, newest first."""
    entries = AuditLogEntry.objects.filter(organization_id=organization_id).select_related("user")[:limit]
    return [LogRow(e.at, e.user.get_username() if e.user else None, e.action, e.export_id, e.detail) for e in entries]
