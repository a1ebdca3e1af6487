"""Requesting, building and downloading an audit export: what is refused and why, the build run as the task
runs it (progress to 100, the zip stored with its sha256), who may download it, and the audit log."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404
from django.utils import timezone

from exports.models import AuditExport, AuditLogEntry
from exports.services import (
    ExportError,
    ExportNotReady,
    ExportQuota,
    audit_export_build,
    audit_export_download,
    audit_export_request,
    audit_exports_tidy,
    export_window,
)
from exports.tasks import audit_export_build_task
from readtier import Window
from tests.exports.export_world import members, unzip

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(known_history, settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    return known_history, members(known_history)


def _request(history, user, **kwargs):
    args = {
        "organization_id": history.organization.pk,
        "user": user,
        "server_ids": None,
        "window": history.week.window,
        "formats": ["pdf", "xlsx", "csv", "json"],
        "enqueue": audit_export_build_task.delay,
        **kwargs,
    }
    return audit_export_request(**args)


def test_what_a_request_refuses(world):
    history, users = world
    w = history.week.window
    with pytest.raises(Http404):
        _request(history, users["outsider"])
    with pytest.raises(PermissionDenied):
        _request(history, users["viewer"])
    cases = {
        "servers": {"server_ids": [history.other.pk]},  # another organization's: as if it did not exist
        "formats": {"formats": ["pdf", "docx"]},
        "window_end": {"window": Window(w.start, timezone.now() + timedelta(hours=1))},
        "window_start": {"window": Window(timezone.now() - timedelta(days=800), w.end)},
    }
    for field, kwargs in cases.items():
        with pytest.raises(ExportError) as err:
            _request(history, users["dba"], **kwargs)
        assert err.value.field == field and str(err.value)
    # Another organization's server and one that does not exist read the same.
    messages = []
    for sid in (history.other.pk, 10**12):
        with pytest.raises(ExportError) as err:
            _request(history, users["dba"], server_ids=[sid])
        messages.append(str(err.value).replace(str(sid), "N"))
    assert messages[0] == messages[1] == "not servers of this organization: N"
    with pytest.raises(ExportError, match="is not before its end") as err:
        export_window(start=w.end, end=w.start)
    assert err.value.field == "window_start"
    assert not AuditExport.objects.exists()


def test_the_task_builds_it_and_a_dba_downloads_it(world, settings, django_capture_on_commit_callbacks):
    history, users = world
    with django_capture_on_commit_callbacks() as queued:
        export = _request(history, users["dba"], server_ids=[history.server.pk])
    assert len(queued) == 1  # the task is sent once the row is committed
    assert (export.status, export.progress, export.server_ids) == ("queued", 0, [history.server.pk])
    audit_export_build_task.apply(args=(export.pk,)).get()  # the task itself, in this process
    export.refresh_from_db()
    assert (export.status, export.progress, export.step, export.error) == ("done", 100, "done", "")
    # In the folder of the build that made it (its claim).
    assert export.file_name.startswith(f"{history.organization.pk}/{export.pk}/{export.claim}/audit-rep-acme-")
    found = audit_export_download(export_id=export.pk, user=users["dba"])
    path = settings.EXPORT_ROOT / export.file_name
    data = path.read_bytes()
    assert found.data == data
    assert hashlib.sha256(data).hexdigest() == export.sha256 == found.sha256 and len(data) == export.size_bytes
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain write makes it, not mkstemp's 0600
    w = history.week.window
    assert found.name == f"audit-rep-acme-{w.start:%Y%m%dT%H%MZ}-{w.end:%Y%m%dT%H%MZ}.zip"
    members_ = unzip(data)
    assert {
        "audit.pdf",
        "audit.xlsx",
        "audit.json",
        "audit-export.schema.json",
        "SHA256SUMS",
        "csv/top_total.csv",
    } <= set(members_)
    # Built once: a second delivery of the task finds it claimed and leaves it alone.
    assert audit_export_build(export_id=export.pk).sha256 == export.sha256
    log = list(AuditLogEntry.objects.filter(export=export).order_by("at", "id").values_list("action", "user"))
    assert log == [
        ("export_requested", users["dba"].pk),
        ("export_generated", None),
        ("export_downloaded", users["dba"].pk),
    ]
    audit_export_download(export_id=export.pk, user=users["admin"])
    with pytest.raises(PermissionDenied):
        audit_export_download(export_id=export.pk, user=users["viewer"])
    with pytest.raises(Http404):
        audit_export_download(export_id=export.pk, user=users["outsider"])
    assert AuditLogEntry.objects.filter(export=export, action="export_downloaded").count() == 2
    # A file changed on disk is not handed out.
    path.write_bytes(data + b"x")
    with pytest.raises(ExportNotReady, match="checksum"):
        audit_export_download(export_id=export.pk, user=users["dba"])


def test_a_failed_build_says_why(world, monkeypatch):
    history, users = world
    export = _request(history, users["admin"], formats=["json"])
    with pytest.raises(ExportNotReady, match="queued"):
        audit_export_download(export_id=export.pk, user=users["admin"])

    def broken(*args, **kwargs):
        raise RuntimeError("the history store went away")

    monkeypatch.setattr("exports.services.bundle_files", broken)
    audit_export_build(export_id=export.pk)
    export.refresh_from_db()
    assert export.status == "failed" and export.error == (
        "The build failed (RuntimeError); the console's log has the details: request it again, or tell the "
        "console's operators."
    )  # the error's own text (paths, addresses) stays in the log
    assert AuditLogEntry.objects.filter(export=export, action="export_failed").exists()
    with pytest.raises(ExportNotReady, match="failed"):
        audit_export_download(export_id=export.pk, user=users["admin"])


def test_a_build_stops_its_statements_at_its_own_limit_and_puts_the_workers_back(world, settings, monkeypatch):
    """A build may take longer than a worker's statements (WORKER_STATEMENT_TIMEOUT_MS, console.celery): it sets
    EXPORT_TIME_LIMIT_S for its block, then the worker's limit again (RESET would leave the session none)."""
    from exports import services

    history, users = world
    settings.EXPORT_TIME_LIMIT_S = 1234
    export = _request(history, users["admin"], formats=["json"])

    def show() -> str:
        with connection.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            return cur.fetchone()[0]

    during: list[str] = []
    real = services.bundle_files

    def observed(*args, **kwargs):
        during.append(show())
        return real(*args, **kwargs)

    monkeypatch.setattr("exports.services.bundle_files", observed)
    with connection.cursor() as cur:  # the worker's own (rolled back with the test)
        cur.execute("SELECT set_config('statement_timeout', '300000', false)")
    audit_export_build(export_id=export.pk)
    export.refresh_from_db()
    assert export.status == "done" and during == ["1234s"] and show() == "5min"


def test_a_running_export_whose_worker_died_is_built_again(world):
    history, users = world
    export = _request(history, users["dba"], formats=["json"])
    # Requested an hour ago, claimed a minute ago (it waited in a long queue): another worker is on it.
    AuditExport.objects.filter(pk=export.pk).update(
        status="running",
        progress=40,
        created_at=timezone.now() - timedelta(hours=1),
        started_at=timezone.now() - timedelta(minutes=1),
    )
    assert audit_export_build(export_id=export.pk).progress == 40  # left alone
    assert audit_exports_tidy().resend == []
    AuditExport.objects.filter(pk=export.pk).update(started_at=timezone.now() - timedelta(minutes=31))
    assert audit_exports_tidy().resend == [export.pk]
    built = audit_export_build(export_id=export.pk)  # claimed long past the task's time limit: built again
    assert built.status == "done" and built.started_at > timezone.now() - timedelta(minutes=1)


def test_old_bundles_expire_and_their_files_go(world, settings):
    history, users = world
    old, recent = (_request(history, users["dba"], formats=["json"]) for _ in range(2))
    for export in (old, recent):
        audit_export_build(export_id=export.pk)
        export.refresh_from_db()
    now = timezone.now()
    settings.EXPORT_RETENTION_DAYS = 30
    AuditExport.objects.filter(pk=old.pk).update(finished_at=now - timedelta(days=30, minutes=1))
    AuditExport.objects.filter(pk=recent.pk).update(finished_at=now - timedelta(days=29, hours=23))
    old_file = settings.EXPORT_ROOT / old.file_name
    assert old_file.is_file()
    outcome = audit_exports_tidy(now=now)
    assert (outcome.expired, outcome.resend, outcome.given_up) == ([old.pk], [], [])
    assert not old_file.exists() and not old_file.parent.parent.exists()  # its build's and its export's folders too
    assert old_file.parent.parent.parent.is_dir()  # not the organization's
    assert settings.EXPORT_ROOT.is_dir() and (settings.EXPORT_ROOT / recent.file_name).is_file()
    old.refresh_from_db()
    assert (old.status, old.step) == ("expired", "expired: its file was deleted 30 days after it was built")
    assert old.sha256 and old.size_bytes  # what it was stays on record
    with pytest.raises(ExportNotReady, match=r"^the export has expired \(its file was deleted 30 days"):
        audit_export_download(export_id=old.pk, user=users["dba"])
    assert audit_export_download(export_id=recent.pk, user=users["dba"]).sha256 == recent.sha256
    log = AuditLogEntry.objects.filter(export=old, action="export_expired").values_list("detail", flat=True)
    assert list(log) == [f"{old_file.name} deleted after 30 days"]
    assert audit_exports_tidy(now=now).expired == []  # once


def test_exports_no_worker_took_are_sent_again_then_given_up(world, settings):
    history, users = world
    settings.EXPORTS_IN_PROGRESS_PER_ORGANIZATION = 10  # six queued at once: the tidy's cases, not the quota's
    now = timezone.now()
    ages = {
        "fresh": timedelta(minutes=5),
        "lost": timedelta(minutes=11),
        "running": timedelta(minutes=20),
        "abandoned": timedelta(minutes=31),
        "day-old": timedelta(hours=24, minutes=1),
        "day-old-building": timedelta(hours=24, minutes=1),
    }
    exports = {}
    for name, age in ages.items():
        exports[name] = _request(history, users["dba"], formats=["json"])
        # The running ones were claimed at once: their age is also their claim's.
        fields = {"status": "running", "started_at": now - age} if name in ("running", "abandoned") else {}
        AuditExport.objects.filter(pk=exports[name].pk).update(created_at=now - age, **fields)
    # One that waited a day for a worker and has just been claimed: being built, not given up.
    AuditExport.objects.filter(pk=exports["day-old-building"].pk).update(
        status="running", started_at=now - timedelta(minutes=2)
    )
    outcome = audit_exports_tidy(now=now)
    assert outcome.resend == [exports["lost"].pk, exports["abandoned"].pk]
    assert outcome.given_up == [exports["day-old"].pk]
    assert AuditExport.objects.get(pk=exports["day-old-building"].pk).status == "running"
    given_up = AuditExport.objects.get(pk=exports["day-old"].pk)
    assert given_up.status == "failed" and "no worker built it within 24 hours" in given_up.error
    assert AuditLogEntry.objects.filter(export=given_up, action="export_failed").exists()
    # What the task does with them: the lost one is built (a second delivery would find it claimed).
    audit_export_build(export_id=exports["lost"].pk)
    assert AuditExport.objects.get(pk=exports["lost"].pk).status == "done"
    assert audit_exports_tidy(now=now).resend == [exports["abandoned"].pk]


def test_a_build_claimed_again_while_it_ran_changes_nothing(world, settings, monkeypatch):
    """A build that outlived STALE_RUNNING_AFTER (a hung worker) is claimed again: the second build owns the
    export; the first, when it finishes, writes nothing to the row and deletes its own folder."""
    import exports.services as services

    history, users = world
    export = _request(history, users["dba"], formats=["json"])
    real_bundle = services._bundle
    claims = []

    def first_hangs(spec, **kwargs):
        files = real_bundle(spec, **kwargs)
        if not claims:  # the first build, half-way: it is taken for dead and built again meanwhile
            claims.append(AuditExport.objects.get(pk=export.pk).claim)
            AuditExport.objects.filter(pk=export.pk).update(started_at=timezone.now() - timedelta(minutes=31))
            second = audit_export_build(export_id=export.pk)
            claims.append(second.claim)
            assert second.status == "done"
        return files

    monkeypatch.setattr(services, "_bundle", first_hangs)
    first = audit_export_build(export_id=export.pk)
    assert claims[0] != claims[1] and first.claim == claims[1]
    assert first.status == "done" and first.file_name.split("/")[2] == claims[1]
    folder = settings.EXPORT_ROOT / str(history.organization.pk) / str(export.pk)
    assert sorted(p.name for p in folder.iterdir()) == [claims[1]]  # the first build's folder is gone
    data = (settings.EXPORT_ROOT / first.file_name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == first.sha256 and len(data) == first.size_bytes
    actions = AuditLogEntry.objects.filter(export=export).values_list("action", flat=True)
    assert list(actions).count("export_generated") == 1


def test_the_tidy_deletes_what_dead_builds_left_once_they_are_old(world, settings):
    history, users = world
    export = _request(history, users["dba"], formats=["json"])
    built = audit_export_build(export_id=export.pk)
    root = settings.EXPORT_ROOT
    folder = root / str(history.organization.pk) / str(export.pk)
    dead = folder / "deadbeef" / ".audit.zip.x1y2.partial"  # a build killed while writing, claimed again since
    dead.parent.mkdir(parents=True)
    dead.write_bytes(b"PK half")
    # One killed while writing before the export's own build: its .partial beside the export's file.
    partial = (root / built.file_name).with_name(".audit.zip.a1b2.partial")
    partial.write_bytes(b"PK half")
    orphan = root / str(history.organization.pk) / "999999" / "cafe"  # an export that was deleted
    orphan.mkdir(parents=True)
    (orphan / "audit.zip").write_bytes(b"PK")
    assert audit_exports_tidy().swept == []  # young: a build may still be writing
    old = (timezone.now() - timedelta(minutes=31)).timestamp()
    for path in (dead.parent, orphan, partial):
        os.utime(path, (old, old))
    swept = audit_exports_tidy().swept
    assert sorted(swept) == sorted(str(p.relative_to(root)) for p in (dead.parent, orphan, partial))
    assert not dead.parent.exists() and not orphan.exists() and not partial.exists()
    assert (root / built.file_name).is_file()  # the export's own file stays, however old


def test_an_organization_has_its_share_of_the_exports(world, settings):
    """The defaults in force: two queued or being built at once, then refused with the reason until one is done;
    twenty a day. Another organization's share is its own."""
    history, users = world
    assert (settings.EXPORTS_IN_PROGRESS_PER_ORGANIZATION, settings.EXPORTS_PER_ORGANIZATION_PER_DAY) == (2, 20)
    first, _ = _request(history, users["dba"], formats=["json"]), _request(history, users["dba"], formats=["json"])
    with pytest.raises(ExportQuota, match="has 2 exports queued or being built"):
        _request(history, users["dba"], formats=["json"])
    AuditExport.objects.filter(pk=first.pk).update(status="done")
    third = _request(history, users["dba"], formats=["json"])
    AuditExport.objects.filter(organization=history.organization).update(status="done")
    settings.EXPORTS_PER_ORGANIZATION_PER_DAY = 4
    _request(history, users["dba"], formats=["json"])
    with pytest.raises(ExportQuota, match="asked for 4 exports in the last 24 hours"):
        _request(history, users["dba"], formats=["json"])
    assert AuditExport.objects.filter(organization=history.organization).count() == 4 and third.pk
