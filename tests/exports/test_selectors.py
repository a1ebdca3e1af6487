"""exports.selectors: the audit exports of the caller's organizations only, newest first (limited), one export
found only through its organization, each row naming the servers still registered and its file without the
folder; busy while queued or running; the audit log newest first, a system entry with no user."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from exports.models import AuditExport, AuditLogEntry
from exports.selectors import ExportRow, audit_export, audit_exports, audit_log
from inventory.connection import parse_dsn
from inventory.models import Organization, Server
from inventory.services import server_create

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 16, tzinfo=UTC)


@pytest.fixture
def acme():
    return Organization.objects.create(name="sel-exp-acme")


def export(org, server_ids=(), *, created_at=T0, **fields) -> AuditExport:
    row = AuditExport.objects.create(
        organization=org, server_ids=list(server_ids), window_start=T0, window_end=T0 + timedelta(days=7), **fields
    )
    AuditExport.objects.filter(pk=row.pk).update(created_at=created_at)  # auto_now_add: set afterwards
    return row


def test_an_organizations_exports_come_newest_first_and_no_one_elses(acme):
    other = Organization.objects.create(name="sel-exp-other")
    old, theirs = export(acme, created_at=T0), export(other, created_at=T0 + timedelta(hours=1))
    new = export(acme, created_at=T0 + timedelta(hours=2))
    same_time = export(acme, created_at=T0)  # created with `old`: the greater id first
    assert [r.id for r in audit_exports(organization_ids=[acme.pk])] == [new.pk, same_time.pk, old.pk]
    assert [r.id for r in audit_exports(organization_ids=[acme.pk], limit=1)] == [new.pk]
    assert [r.id for r in audit_exports(organization_ids=[acme.pk, other.pk], limit=None)][:2] == [new.pk, theirs.pk]
    assert audit_exports(organization_ids=[]) == []
    assert audit_export(export_id=theirs.pk, organization_ids=[acme.pk]) is None
    assert audit_export(export_id=theirs.pk + 1000, organization_ids=[acme.pk, other.pk]) is None
    assert audit_export(export_id=theirs.pk, organization_ids=[other.pk]).organization == "sel-exp-other"


def test_a_row_names_the_registered_servers_and_the_file_without_its_folder(acme):
    dsn = "postgresql://m:pw@127.0.0.1:1/app"
    db2, db1 = (
        server_create(name=n, connection=parse_dsn(dsn), organization_name=acme.name) for n in ("sel-db2", "sel-db1")
    )
    user = get_user_model().objects.create_user("sel-consultant")
    done = export(
        acme,
        [db2.pk, db1.pk, db1.pk + 1000],
        requested_by=user,
        status="done",
        progress=100,
        formats=["pdf", "csv"],
        file_name=f"{acme.pk}/{db1.pk}/audit-sel-exp-acme-2026-W47.zip",
        sha256="ab" * 32,
        size_bytes=12345,
    )
    Server.objects.filter(pk=db2.pk).delete()  # unregistered since: its id stays, its name goes
    row = audit_export(export_id=done.pk, organization_ids=[acme.pk])
    assert (row.server_ids, row.servers) == ([db2.pk, db1.pk, db1.pk + 1000], ["sel-db1"])
    assert (row.file_name, row.requested_by, row.formats, row.size_bytes) == (
        "audit-sel-exp-acme-2026-W47.zip",
        "sel-consultant",
        ["pdf", "csv"],
        12345,
    )
    queued = audit_export(export_id=export(acme).pk, organization_ids=[acme.pk])
    assert (queued.file_name, queued.requested_by, queued.servers, queued.size_bytes) == ("", None, [], None)


@pytest.mark.parametrize(
    "status, busy", [("queued", True), ("running", True), ("done", False), ("failed", False), ("expired", False)]
)
def test_an_export_is_busy_while_queued_or_running(acme, status, busy):
    row = audit_exports(organization_ids=[export(acme, status=status).organization_id])[0]
    assert isinstance(row, ExportRow) and row.busy is busy


def test_the_audit_log_is_the_organizations_own_newest_first(acme):
    user = get_user_model().objects.create_user("sel-auditor")
    built = export(acme)
    log = [
        ("export_requested", user, T0),
        ("export_generated", None, T0 + timedelta(hours=1)),  # the worker: no user
        ("export_downloaded", user, T0 + timedelta(hours=1)),  # at the same time, written after it
    ]
    for action, who, at in log:
        AuditLogEntry.objects.create(organization=acme, user=who, action=action, export=built, at=at, detail=action)
    other = Organization.objects.create(name="sel-exp-elsewhere")
    AuditLogEntry.objects.create(organization=other, action="export_requested", at=T0 + timedelta(days=1))
    rows = audit_log(organization_id=acme.pk)
    assert [(r.action, r.user, r.at, r.export_id, r.detail) for r in rows] == [
        ("export_downloaded", "sel-auditor", T0 + timedelta(hours=1), built.pk, "export_downloaded"),
        ("export_generated", None, T0 + timedelta(hours=1), built.pk, "export_generated"),
        ("export_requested", "sel-auditor", T0, built.pk, "export_requested"),
    ]
    assert [r.action for r in audit_log(organization_id=acme.pk, limit=1)] == ["export_downloaded"]
    AuditExport.objects.filter(pk=built.pk).delete()  # the log outlives the export it names
    assert {r.export_id for r in audit_log(organization_id=acme.pk)} == {None}
