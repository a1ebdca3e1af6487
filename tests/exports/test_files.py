"""An audit export's files go with its rows (exports/files.py): an organization deleted through the ORM or
the admin's delete view takes its bundles and its folder off the disk, once the delete has committed; a rolled-back
delete keeps them; a file already gone is no error; a forged name never reaches outside EXPORT_ROOT; and the tidy
sweeps what a delete made before (or a process that died before removing them) left. Real commits: on_commit must
fire as it does in production."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from exports.files import remove_under_root
from exports.models import AuditExport
from exports.services import audit_export_build, audit_exports_tidy, export_spec
from inventory.models import Organization, Server
from readtier import Window

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


@pytest.fixture
def root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


def _organization(name: str) -> Organization:
    org = Organization.objects.create(name=name)
    Server.objects.create(organization=org, name=f"{name}-db", host="127.0.0.1", port=1, database="app", user="m")
    return org


def _row(org: Organization, **fields) -> AuditExport:
    now = timezone.now()
    return AuditExport.objects.create(organization=org, **{"window_start": now, "window_end": now, **fields})


def _built(org: Organization) -> AuditExport:
    """An export built by the service the worker runs, over the last hour (the server has no history: an empty
    bundle is a bundle all the same)."""
    window = Window(timezone.now() - timedelta(hours=1), timezone.now())
    spec = export_spec(organization_id=org.pk, server_ids=None, window=window, formats=["json"])
    export = _row(
        org, server_ids=spec.server_ids, window_start=window.start, window_end=window.end, formats=spec.formats
    )
    built = audit_export_build(export_id=export.pk)
    assert built.status == "done" and built.file_name, built.error
    return built


def test_deleting_an_organization_removes_its_bundles_and_its_folder(root):
    acme, other = _organization("files-acme"), _organization("files-other")
    first, second, theirs = _built(acme), _built(acme), _built(other)
    files = [root / e.file_name for e in (first, second, theirs)]
    assert all(f.is_file() for f in files)
    Organization.objects.get(pk=acme.pk).delete()  # the ORM: its exports go by cascade
    assert not AuditExport.objects.filter(pk__in=[first.pk, second.pk]).exists()
    assert not files[0].exists() and not files[1].exists() and not (root / str(acme.pk)).exists()
    assert files[2].is_file()  # another organization's stays


def test_the_admins_delete_view_removes_them_too(root, admin_client):
    acme = _organization("files-admin")
    path = root / _built(acme).file_name
    url = f"/admin/inventory/organization/{acme.pk}/delete/"
    assert admin_client.get(url).status_code == 200  # the confirmation, for a superuser
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302 and not Organization.objects.filter(pk=acme.pk).exists()
    assert not path.exists() and not (root / str(acme.pk)).exists()


def test_deleting_an_export_removes_its_folder_only(root):
    acme = _organization("files-one")
    gone, kept = _built(acme), _built(acme)
    AuditExport.objects.filter(pk=gone.pk).delete()
    assert not (root / str(acme.pk) / str(gone.pk)).exists()
    assert (root / kept.file_name).is_file()


def test_a_rolled_back_delete_keeps_the_files(root):
    acme = _organization("files-rollback")
    path = root / _built(acme).file_name
    with pytest.raises(Rollback), transaction.atomic():
        Organization.objects.get(pk=acme.pk).delete()
        assert path.is_file()  # not before the commit either
        raise Rollback
    assert Organization.objects.filter(pk=acme.pk).exists() and path.is_file()


def test_a_file_already_gone_is_no_error(root):
    acme = _organization("files-gone")
    export = _built(acme)
    (root / export.file_name).unlink()
    Organization.objects.get(pk=acme.pk).delete()
    assert not (root / str(acme.pk)).exists()
    assert remove_under_root(f"{acme.pk}/{export.pk}") is False  # again: nothing there, nothing raised


def test_nothing_outside_export_root_is_touched(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.zip"
    secret.write_bytes(b"PK not the console's")
    acme = _organization("files-forged")
    # Forged rows: names that lead out of EXPORT_ROOT, and ids whose folders are links to elsewhere.
    for name in ("../outside/secret.zip", str(secret)):
        _row(acme, status="done", file_name=name)
    linked = _row(acme)
    root.mkdir(parents=True, exist_ok=True)
    (root / str(acme.pk)).mkdir()
    (root / str(acme.pk) / str(linked.pk)).symlink_to(outside, target_is_directory=True)
    AuditExport.objects.filter(organization=acme).delete()
    assert secret.read_bytes() == b"PK not the console's"
    (root / str(acme.pk) / str(linked.pk)).unlink()
    (root / str(acme.pk)).rmdir()
    (root / str(acme.pk)).symlink_to(outside, target_is_directory=True)  # the organization's folder, a link
    Organization.objects.get(pk=acme.pk).delete()
    assert secret.is_file() and outside.is_dir()
    for name in ("..", "/", str(outside), "../outside", ".", ""):
        assert remove_under_root(name) is False, name
    assert secret.is_file() and root.is_dir()


def test_the_tidy_sweeps_what_deleted_rows_left(root):
    """Files of an organization or an export deleted before they went with their rows (or by a process that died
    between the commit and their removal): swept once older than a build could be writing."""
    acme = _organization("files-tidy")
    kept = _built(acme)
    lost_org = root / "999999" / "5" / "cafe" / "audit.zip"  # an organization that is gone
    lost_export = root / str(acme.pk) / "888888" / "audit.zip"  # an export that is gone (files before claims)
    for path in (lost_org, lost_export):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PK")
    assert audit_exports_tidy().swept == []  # young: a build may still be writing
    old = (timezone.now() - timedelta(minutes=31)).timestamp()
    for folder in (root / "999999", lost_export.parent):
        os.utime(folder, (old, old))
    assert sorted(audit_exports_tidy().swept) == sorted(["999999", f"{acme.pk}/888888"])
    assert not (root / "999999").exists() and not lost_export.parent.exists()
    assert (root / kept.file_name).is_file()
