"""An audit export's files on disk: ORG/EXPORT/CLAIM/NAME.zip under EXPORT_ROOT (ORG/EXPORT/NAME.zip before builds
had claims), how one is written, and how they go: the export's folder with its row (deleted, by cascade too, or
expired), the organization's with the organization, and what dead builds or lost deletions left, by the tidy task.
Nothing outside EXPORT_ROOT is ever removed: every path is resolved and checked first."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete

from exports.models import AuditExport
from inventory.models import Organization

logger = logging.getLogger(__name__)
PARTIAL = ".partial"
# mkstemp makes a file only its owner reads; a bundle gets the mode a plain write would give it (a web server
# running as another user of the same group serves it). Read once, at import, before any thread runs.
_UMASK = os.umask(0)
os.umask(_UMASK)


def export_folder(*, organization_id: int, export_id: int) -> PurePosixPath:
    """The folder of an export's builds, relative to EXPORT_ROOT: its file and nothing of another export's."""
    return PurePosixPath(str(organization_id), str(export_id))


def store_file(path: Path, data: bytes) -> None:
    """Written beside under a name of its own, then renamed: a download never sees half a file, and two writers
    never share one (a killed one leaves only its own .partial, which the tidy deletes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the rename must not outlive its content in a crash
        os.replace(partial_name, path)
    except BaseException:
        Path(partial_name).unlink(missing_ok=True)
        raise


def remove_under_root(relative: PurePosixPath | str) -> bool:
    """Remove a folder (or file) under EXPORT_ROOT with all it holds; False where it was not there or is refused.
    Refused: anything that does not resolve to itself strictly inside EXPORT_ROOT (`..`, an absolute path, a
    symbolic link on the way), so a forged or stale name never reaches another folder. Never raises for the disk:
    a deletion that already committed must not fail because of its files."""
    root = Path(settings.EXPORT_ROOT).resolve()
    path = root / relative
    resolved = path.resolve()
    if resolved != path or root not in resolved.parents:
        logger.warning("export files: %s is not a folder inside EXPORT_ROOT (%s): left alone", relative, root)
        return False
    try:
        if resolved.is_dir():
            shutil.rmtree(resolved)
        else:
            resolved.unlink()
    except FileNotFoundError:
        return False
    except OSError:
        logger.exception("export files: %s could not be removed", resolved)
        return False
    return True


def export_files_remove(*, organization_id: int, export_id: int) -> bool:
    """Remove an export's folder: its file, and whatever its superseded or killed builds left there."""
    return remove_under_root(export_folder(organization_id=organization_id, export_id=export_id))


def organization_files_remove(*, organization_id: int) -> bool:
    return remove_under_root(str(organization_id))


def _export_deleted(sender, instance: AuditExport, using: str, **kwargs) -> None:
    # The ids now: Django clears the instance's pk once the delete is done. After the commit: a rolled-back delete
    # keeps its row, and so its file.
    remove = partial(export_files_remove, organization_id=instance.organization_id, export_id=instance.pk)
    transaction.on_commit(remove, using=using, robust=True)


def _organization_deleted(sender, instance: Organization, using: str, **kwargs) -> None:
    transaction.on_commit(partial(organization_files_remove, organization_id=instance.pk), using=using, robust=True)


def remove_files_with_rows() -> None:
    """Any delete of an export's row (its organization's cascade, the admin, the ORM) removes its files, and an
    organization's removes its folder, once committed (reports.apps.ReportsConfig.ready())."""
    post_delete.connect(_export_deleted, sender=AuditExport, dispatch_uid="exports.files.export")
    post_delete.connect(_organization_deleted, sender=Organization, dispatch_uid="exports.files.organization")


def export_files_sweep(*, now: datetime, younger: timedelta) -> list[str]:
    """What no row owns any more, once older than `younger` (a build may still be writing a younger one), removed:
    the folder (ORG/EXPORT/CLAIM) of a build that is not its export's (claimed again, or its export deleted), the
    .partial file of a build killed while writing, and the folder of an export or organization that is gone (a
    process that died between the delete's commit and the removal of its files, or a delete made before they
    went with it). Paths relative to EXPORT_ROOT."""
    root = Path(settings.EXPORT_ROOT)
    cutoff = (now - younger).timestamp()
    swept = []

    def old(path: Path) -> bool:
        try:
            return path.stat().st_mtime < cutoff
        except FileNotFoundError:
            return False

    def sweep(path: Path) -> None:
        if old(path) and remove_under_root(path.relative_to(root).as_posix()):
            swept.append(str(path.relative_to(root)))

    folders = [f for f in root.glob("*/*/*") if f.is_dir() and f.parts[-2].isdigit()]
    claims = dict(AuditExport.objects.filter(pk__in={int(f.parts[-2]) for f in folders}).values_list("pk", "claim"))
    for folder in folders:
        if claims.get(int(folder.parts[-2])) != folder.name:
            sweep(folder)
    for partial_file in root.glob(f"*/*/**/*{PARTIAL}"):
        sweep(partial_file)
    organizations = [f for f in root.glob("*") if f.is_dir() and f.name.isdigit()]
    kept = set(Organization.objects.filter(pk__in=[int(f.name) for f in organizations]).values_list("pk", flat=True))
    for folder in organizations:
        if int(folder.name) not in kept:
            sweep(folder)
    exports = [f for f in root.glob("*/*") if f.is_dir() and f.parent.name.isdigit() and f.name.isdigit()]
    built = set(AuditExport.objects.filter(pk__in=[int(f.name) for f in exports]).values_list("pk", flat=True))
    for folder in exports:
        if int(folder.name) not in built:
            sweep(folder)
    return swept
