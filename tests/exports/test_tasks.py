"""An audit export built by a real Celery worker (its own process, the tests' Redis database and the test
database): requested as the console and the API request it, polled until done, then downloaded by role."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import override_settings
from django.utils import timezone

from exports.models import AuditExport, AuditLogEntry
from exports.services import audit_export_download, audit_export_request
from exports.tasks import audit_export_build_task, tidy_audit_exports
from tests.exports.export_world import members
from tests.processes import console_env, processes, worker_argv


def _wait(export: AuditExport, log: Path, *, seen: list[int] | None = None) -> AuditExport:
    """Polled until built or failed (the progress values seen go into `seen`)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        export.refresh_from_db()
        if seen is not None:
            seen.append(export.progress)
        if export.status in ("done", "failed"):
            return export
        time.sleep(0.2)
    pytest.fail(f"export {export.pk} not built in 120 s; worker log:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def built(known_history, django_db_blocker, tmp_path_factory):
    """An export requested (and committed, so that the worker sees it) outside any test transaction, built by
    the worker; then one whose broker message was lost, sent again by the tidy task; (export, users, the
    progress values seen while polling, the worker's EXPORT_ROOT, (the lost export, the ids the task resent))."""
    tmp = tmp_path_factory.mktemp("export-worker")
    root = tmp / "exports"
    with override_settings(EXPORT_ROOT=root), django_db_blocker.unblock():
        users = members(known_history, suffix="-worker")
        with processes(tmp, console_env(EXPORT_ROOT=str(root))) as procs:
            log = procs.start("worker", worker_argv()).log
            export = audit_export_request(
                organization_id=known_history.organization.pk,
                user=users["dba"],
                server_ids=None,
                window=known_history.week.window,
                formats=["pdf", "xlsx", "csv", "json"],
                enqueue=audit_export_build_task.delay,
            )
            seen = []
            export = _wait(export, log, seen=seen)
            # One whose broker message was lost (the row alone, requested 11 minutes ago): beat's tidy task
            # sends it to the worker again.
            lost = AuditExport.objects.create(
                organization=known_history.organization,
                requested_by=users["dba"],
                server_ids=[known_history.server.pk],
                formats=["json"],
                window_start=known_history.week.window.start,
                window_end=known_history.week.window.end,
            )
            AuditExport.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(minutes=11))
            resent = tidy_audit_exports.apply().get()["resent"]
            lost = _wait(lost, log)
        yield export, users, seen, root, (lost, resent)
        AuditLogEntry.objects.filter(export_id__in=[export.pk, lost.pk]).delete()
        AuditExport.objects.filter(pk__in=[export.pk, lost.pk]).delete()
        get_user_model().objects.filter(pk__in=[u.pk for u in users.values()]).delete()


@pytest.mark.django_db
def test_the_worker_builds_it_with_progress(built, settings):
    export, users, seen, root, _ = built
    assert (export.status, export.progress, export.error) == ("done", 100, ""), export.error
    # Seen moving forward while it was built (the PDF alone takes seconds), never back.
    assert seen == sorted(seen) and seen[-1] == 100 and any(0 < p < 100 for p in seen), seen
    assert hashlib.sha256((root / export.file_name).read_bytes()).hexdigest() == export.sha256
    settings.EXPORT_ROOT = root
    assert audit_export_download(export_id=export.pk, user=users["dba"]).sha256 == export.sha256
    with pytest.raises(PermissionDenied):
        audit_export_download(export_id=export.pk, user=users["viewer"])
    with pytest.raises(Http404):
        audit_export_download(export_id=export.pk, user=users["outsider"])
    actions = list(AuditLogEntry.objects.filter(export=export).order_by("at", "id").values_list("action", flat=True))
    assert actions == ["export_requested", "export_generated", "export_downloaded"]


@pytest.mark.django_db
def test_an_export_whose_message_was_lost_is_sent_again(built):
    export, users, seen, root, (lost, resent) = built
    assert lost.pk in resent and export.pk not in resent
    assert (lost.status, lost.error) == ("done", "") and (root / lost.file_name).is_file()
