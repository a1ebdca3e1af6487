"""Audit exports: request one (validated, queued, logged), build it (the worker's job, with progress on its
row), write one into a folder (manage.py export), and hand a built one to a DBA or admin of its
organization (logged). Every generation and every download lands in the organization's audit log. Where the
files lie and how they go: exports/files.py.

One module over 400 lines: an export's whole life (asked for, built, tidied, downloaded, written by the command),
each step logged in the organization's audit log by the same helpers."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from accounts.access import MANAGE_SERVERS, require_role
from accounts.models import UserPreference
from exports.audit import audit_content
from exports.files import (
    export_files_remove,
    export_files_sweep,
    export_folder,
    remove_under_root,
    store_file,
)
from exports.formats.bundle import FORMATS, bundle_files, bundle_name, sha256, zip_bytes
from exports.models import AuditExport, AuditLogEntry
from history.public import drop_history_connection, statement_timed_out
from inventory.models import Organization, Server
from readtier import Window, WindowError

logger = logging.getLogger(__name__)
Status = AuditExport.Status
Action = AuditLogEntry.Action
# A build is stopped after EXPORT_TIME_LIMIT_S, killed a minute later if it did not stop (exports/tasks.py).
# An export still "running" longer than that after a worker claimed it lost that worker, and may be claimed again
# (the tidy task sends it again). Counted from the claim, not the request: one that waited in a long queue is not
# taken from the worker building it.
HARD_LIMIT_AFTER_S = 60
STALE_RUNNING_AFTER = timedelta(seconds=settings.EXPORT_TIME_LIMIT_S + HARD_LIMIT_AFTER_S + 4 * 60)
# A queued export no worker has claimed this long after it was requested lost its broker message (Redis
# restarted or flushed): the tidy task sends it again, as often as it runs, until it is built or given up.
RESEND_QUEUED_AFTER = timedelta(minutes=10)
# ... and one still not built a day later is failed with the reason, so nobody waits on it for ever.
GIVE_UP_AFTER = timedelta(hours=24)


class ExportError(ValueError):
    """A request that cannot be served, with the field to fix (the API's 400, the command's error)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class ExportQuota(ExportError):
    """The organization's share of the exports is taken (EXPORTS_IN_PROGRESS_PER_ORGANIZATION at once,
    EXPORTS_PER_ORGANIZATION_PER_DAY a day): the API's 429, the page's error."""

    def __init__(self, message: str):
        super().__init__("__all__", message)


class ExportNotReady(Exception):
    """A download of an export that is not built (yet), or whose file is gone."""


@dataclass(frozen=True)
class ExportSpec:
    organization_id: int
    server_ids: list[int]
    window: Window
    formats: list[str]  # in FORMATS order


@dataclass(frozen=True)
class ExportFile:
    name: str
    data: bytes  # the bytes checked against the sha256: what is served is what was checked
    sha256: str


def export_window(*, start: datetime, end: datetime) -> Window:
    try:
        return Window(start, end)
    except WindowError as exc:
        raise ExportError("window_start", str(exc)) from None


def export_spec(
    *,
    organization_id: int,
    server_ids: list[int] | None,
    window: Window,
    formats: list[str],
    now: datetime | None = None,
) -> ExportSpec:
    """The request checked: the servers are the organization's (all of them when none is named), the window
    has ended and is inside the daily tier's retention, the formats are known."""
    now = now or timezone.now()
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ExportError("formats", f"{', '.join(unknown) or 'none'}: choose among {', '.join(FORMATS)}")
    own = dict(Server.objects.filter(organization_id=organization_id).values_list("pk", "name"))
    if not own:
        raise ExportError("servers", "the organization has no server to export")
    ids = sorted(set(server_ids)) if server_ids else sorted(own)
    # The same words whether a server does not exist or is another organization's: nothing is confirmed.
    if foreign := [i for i in ids if i not in own]:
        raise ExportError("servers", f"not servers of this organization: {', '.join(map(str, foreign))}")
    if window.end > now:
        raise ExportError("window_end", "the window must have ended (its figures would change): at most now")
    retention = timedelta(days=settings.HISTORY["DAILY_RETENTION_DAYS"])
    if window.start < now - retention:
        raise ExportError("window_start", f"before the history's retention ({retention.days} days)")
    return ExportSpec(organization_id, ids, window, [f for f in FORMATS if f in formats])


def _log(*, organization_id: int, action: str, user=None, export: AuditExport | None = None, detail: str = "") -> None:
    AuditLogEntry.objects.create(
        organization_id=organization_id, user=user, action=action, export=export, at=timezone.now(), detail=detail
    )


def _describe(spec: ExportSpec) -> str:
    """What was asked, as the audit log keeps it (names as they were: a server may be renamed or removed later)."""
    names = Server.objects.filter(pk__in=spec.server_ids).order_by("name").values_list("name", flat=True)
    return (
        f"{', '.join(names)}; {spec.window.start.isoformat()} to {spec.window.end.isoformat()}; "
        f"{', '.join(spec.formats)}"
    )


def audit_export_request(
    *,
    organization_id: int,
    user,
    server_ids: list[int] | None,
    window: Window,
    formats: list[str],
    enqueue: Callable[[int], object],
    now: datetime | None = None,
) -> AuditExport:
    """Record an export (DBA or admin of the organization: 404 for others, 403 for a viewer) and hand its id to
    `enqueue` once the row is committed: the caller queues the build (exports.tasks), which calls
    audit_export_build."""
    require_role(user, organization_id, MANAGE_SERVERS)
    spec = export_spec(organization_id=organization_id, server_ids=server_ids, window=window, formats=formats, now=now)
    with transaction.atomic():
        _within_quota(organization_id, now or timezone.now())
        export = AuditExport.objects.create(
            organization_id=organization_id,
            requested_by=user,
            server_ids=spec.server_ids,
            window_start=spec.window.start,
            window_end=spec.window.end,
            formats=spec.formats,
            step="queued",
        )
        _log(
            organization_id=organization_id,
            action=Action.EXPORT_REQUESTED,
            user=user,
            export=export,
            detail=_describe(spec),
        )
        transaction.on_commit(lambda: enqueue(export.pk))
    return export


def _within_quota(organization_id: int, now: datetime) -> None:
    """ExportQuota unless the organization may ask for one more export now: the tasks worker's few processes are
    shared by every organization, so none keeps them busy for the others. Under the organization's row lock, so
    two requests at once cannot both take the last place."""
    Organization.objects.select_for_update().filter(pk=organization_id).values_list("pk", flat=True).first()
    mine = AuditExport.objects.filter(organization_id=organization_id)
    at_once = settings.EXPORTS_IN_PROGRESS_PER_ORGANIZATION
    if mine.filter(status__in=(Status.QUEUED, Status.RUNNING)).count() >= at_once:
        raise ExportQuota(
            f"This organization has {at_once} export{'s' if at_once != 1 else ''} queued or being built "
            "(EXPORTS_IN_PROGRESS_PER_ORGANIZATION): ask again once one is done."
        )
    per_day = settings.EXPORTS_PER_ORGANIZATION_PER_DAY
    if mine.filter(created_at__gt=now - timedelta(days=1)).count() >= per_day:
        raise ExportQuota(
            f"This organization asked for {per_day} exports in the last 24 hours (EXPORTS_PER_ORGANIZATION_PER_DAY): "
            "ask again later."
        )


def _time_zone(user) -> str:
    pref = UserPreference.objects.filter(user=user).first() if user is not None else None
    return pref.time_zone if pref else "UTC"


def _bundle(spec: ExportSpec, *, requested_by: str | None, time_zone: str, progress) -> dict[str, bytes]:
    """Read (5-50%) and write (50-95%) the bundle's files."""
    content = audit_content(
        organization_id=spec.organization_id,
        server_ids=spec.server_ids,
        window=spec.window,
        requested_by=requested_by,
        time_zone=time_zone,
        progress=lambda done, total: progress(5 + 45 * done // total, f"read {done} of {total} servers"),
    )
    return bundle_files(content, spec.formats, step=lambda what, pct: progress(50 + 45 * pct // 100, what))


def audit_export_build(*, export_id: int) -> AuditExport:
    """Build a queued export: claimed with a conditional UPDATE (a second delivery of the task does nothing,
    unless the first one's worker died: see STALE_RUNNING_AFTER), its progress written as it goes, the zip
    stored under EXPORT_ROOT with its sha256, the outcome logged."""
    now = timezone.now()
    claim = secrets.token_hex(16)
    stale = Q(status=Status.RUNNING, started_at__lt=now - STALE_RUNNING_AFTER)
    claimed = AuditExport.objects.filter(Q(status=Status.QUEUED) | stale, pk=export_id).update(
        status=Status.RUNNING, progress=1, step="reading the history", started_at=now, claim=claim
    )
    export = AuditExport.objects.select_related("organization", "requested_by").get(pk=export_id)
    if not claimed:
        return export
    # Every write below holds only while this build holds the claim: one that outlived STALE_RUNNING_AFTER and
    # was claimed again (its worker hung, a thread pool ignores time limits) changes nothing any more.
    mine = AuditExport.objects.filter(pk=export_id, status=Status.RUNNING, claim=claim)

    def progress(percent: int, step: str) -> None:
        mine.update(progress=min(99, percent), step=step[:200])

    spec = ExportSpec(
        export.organization_id,
        list(export.server_ids),
        Window(export.window_start, export.window_end),
        list(export.formats),
    )
    try:
        with _statements_bounded(settings.EXPORT_TIME_LIMIT_S):
            requested_by = export.requested_by.get_username() if export.requested_by else None
            files = _bundle(
                spec, requested_by=requested_by, time_zone=_time_zone(export.requested_by), progress=progress
            )
        data = zip_bytes(files)
        name = bundle_name(organization=export.organization.name, start=spec.window.start, end=spec.window.end)
        # In a folder of this build's own: a build claimed again never writes the file of another.
        relative = str(export_folder(organization_id=export.organization_id, export_id=export.pk) / claim / name)
        store_file(Path(settings.EXPORT_ROOT) / relative, data)
    except Exception as exc:  # whatever failed, the row says so and the log keeps it
        if _out_of_time(exc):
            # Possibly in the middle of a query: that connection is of no use any more (the query is cancelled).
            drop_history_connection()
            limit = settings.EXPORT_TIME_LIMIT_S
            error = (
                f"The build ran past its time limit (EXPORT_TIME_LIMIT_S = {limit} s) and was stopped: export a "
                "shorter window or fewer servers, or raise the limit."
            )
            logger.error("audit export %s stopped after %s s (EXPORT_TIME_LIMIT_S)", export_id, limit)
        else:
            logger.exception("audit export %s failed", export_id)
            # Viewers read the row: the console's words and the error's class; its text (paths, the history
            # store's address) stays in the log, where the console's operators look.
            error = (
                f"The build failed ({type(exc).__name__}); the console's log has the details: request it again, or "
                "tell the console's operators."
            )
        if mine.update(status=Status.FAILED, step="failed", error=error, finished_at=timezone.now()):
            _log(organization_id=export.organization_id, action=Action.EXPORT_FAILED, export=export, detail=error)
    else:
        digest = sha256(data)
        done = mine.update(
            status=Status.DONE,
            progress=100,
            step="done",
            file_name=relative,
            sha256=digest,
            size_bytes=len(data),
            finished_at=timezone.now(),
        )
        if done:
            _log(
                organization_id=export.organization_id,
                action=Action.EXPORT_GENERATED,
                export=export,
                detail=f"{name} sha256 {digest} ({len(data)} bytes)",
            )
        else:
            logger.warning(
                "audit export %s: this build was claimed again by another one; its file is discarded", export_id
            )
            remove_under_root(PurePosixPath(relative).parent)
    export.refresh_from_db()
    return export


@contextlib.contextmanager
def _statements_bounded(seconds: int):
    """Each query of the block ends within `seconds` (statement_timeout): the time limit's signal cannot always
    reach a process waiting inside the database driver, the history store's own timeout always can. Longer than
    the worker's own (WORKER_STATEMENT_TIMEOUT_MS), which is put back after it: RESET would leave none."""
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting('statement_timeout')")
        (found,) = cur.fetchone()
        cur.execute("SELECT set_config('statement_timeout', %s, false)", [str(seconds * 1000)])
    try:
        yield
    finally:
        with contextlib.suppress(Exception), connection.cursor() as cur:
            cur.execute("SELECT set_config('statement_timeout', %s, false)", [found])


def _out_of_time(exc: BaseException) -> bool:
    """The build's time limit: the task's soft limit, or a query stopped by the statement_timeout it set."""
    if isinstance(exc, SoftTimeLimitExceeded):
        return True
    return statement_timed_out(exc)


@dataclass(frozen=True)
class TidyOutcome:
    expired: list[int]  # built ones whose file was deleted (retention)
    resend: list[int]  # queued or abandoned ones to hand to a worker again
    given_up: list[int]  # not built within GIVE_UP_AFTER: failed with the reason
    # what dead or superseded builds, and deleted exports or organizations, left: deleted (under EXPORT_ROOT)
    swept: list[str] = field(default_factory=list)


def audit_exports_tidy(*, now: datetime | None = None) -> TidyOutcome:
    """The periodic care of the exports (exports.tasks.tidy_audit_exports): delete the files of those
    built more than EXPORT_RETENTION_DAYS ago (the row, its checksum and the log stay; it reads "expired"),
    fail those no worker built within GIVE_UP_AFTER, name those to send to a worker again, and delete what dead or
    superseded builds, and deleted exports or organizations, left behind."""
    now = now or timezone.now()
    retention = timedelta(days=settings.EXPORT_RETENTION_DAYS)
    expired = []
    for export in AuditExport.objects.filter(status=Status.DONE, finished_at__lt=now - retention).order_by("pk"):
        # The export's folder, as when its row is deleted (not its organization's: a build may write there).
        export_files_remove(organization_id=export.organization_id, export_id=export.pk)
        step = f"expired: its file was deleted {retention.days} days after it was built"
        if AuditExport.objects.filter(pk=export.pk, status=Status.DONE).update(status=Status.EXPIRED, step=step):
            _log(
                organization_id=export.organization_id,
                action=Action.EXPORT_EXPIRED,
                export=export,
                detail=f"{PurePosixPath(export.file_name).name} deleted after {retention.days} days",
            )
            expired.append(export.pk)
    # Not one a worker is building right now, however long it waited for one.
    unfinished = Q(status=Status.QUEUED) | Q(status=Status.RUNNING, started_at__lt=now - STALE_RUNNING_AFTER)
    given_up = []
    hours = int(GIVE_UP_AFTER.total_seconds() // 3600)
    error = f"no worker built it within {hours} hours of the request (is a Celery worker running?): request it again"
    for export in AuditExport.objects.filter(unfinished, created_at__lt=now - GIVE_UP_AFTER).order_by("pk"):
        if AuditExport.objects.filter(unfinished, pk=export.pk).update(
            status=Status.FAILED, step="failed", error=error, finished_at=now
        ):
            _log(organization_id=export.organization_id, action=Action.EXPORT_FAILED, export=export, detail=error)
            given_up.append(export.pk)
    resend = AuditExport.objects.filter(
        Q(status=Status.QUEUED, created_at__lt=now - RESEND_QUEUED_AFTER)
        | Q(status=Status.RUNNING, started_at__lt=now - STALE_RUNNING_AFTER)
    ).order_by("pk")
    swept = export_files_sweep(now=now, younger=STALE_RUNNING_AFTER)
    return TidyOutcome(expired, list(resend.values_list("pk", flat=True)), given_up, swept)


def audit_export_download(*, export_id: int, user) -> ExportFile:
    """The built file of an export, for a DBA or admin of its organization (404 for a non-member, 403 for a
    viewer); checked against its sha256 and logged."""
    export = AuditExport.objects.filter(pk=export_id).first()
    if export is None:
        raise Http404("no such export")
    require_role(user, export.organization_id, MANAGE_SERVERS)
    if export.status == Status.EXPIRED:
        raise ExportNotReady(f"the export has expired ({export.step.removeprefix('expired: ')}): request it again")
    if export.status != Status.DONE or not export.file_name:
        raise ExportNotReady(f"the export is {export.status}: its file is not ready")
    path = Path(settings.EXPORT_ROOT) / export.file_name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ExportNotReady("the export's file is no longer stored: request it again") from None
    if sha256(data) != export.sha256:
        raise ExportNotReady("the stored file does not match its checksum: request it again")
    _log(
        organization_id=export.organization_id,
        action=Action.EXPORT_DOWNLOADED,
        user=user,
        export=export,
        detail=path.name,
    )
    return ExportFile(name=path.name, data=data, sha256=export.sha256)


@dataclass(frozen=True)
class WrittenFile:
    name: str  # relative to the folder
    sha256: str
    size_bytes: int


def audit_export_write(
    *,
    organization_id: int,
    server_ids: list[int] | None,
    window: Window,
    formats: list[str],
    out_dir: Path,
    time_zone: str = "UTC",
    operator: str = "",
) -> list[WrittenFile]:
    """The bundle's files into `out_dir` (and the zip itself, as the console would give it), for manage.py
    export; logged in the organization's audit log without a user."""
    spec = export_spec(organization_id=organization_id, server_ids=server_ids, window=window, formats=formats)
    organization = Organization.objects.get(pk=organization_id)
    files = _bundle(spec, requested_by=operator or None, time_zone=time_zone, progress=lambda percent, step: None)
    files[bundle_name(organization=organization.name, start=window.start, end=window.end)] = zip_bytes(files)
    written = []
    for name in sorted(files):
        store_file(out_dir / name, files[name])
        written.append(WrittenFile(name, sha256(files[name]), len(files[name])))
    by = f" by {operator}" if operator else ""
    _log(
        organization_id=organization_id,
        action=Action.EXPORT_GENERATED,
        detail=f"manage.py export{by} into {out_dir}: {_describe(spec)}",
    )
    return written
