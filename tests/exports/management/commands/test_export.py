"""manage.py export: the same bundle into a folder, each file printed with its checksum, SHA256SUMS right,
and a clear error for an unknown organization or server, a bad time and a bad format."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.core.management import CommandError, call_command

from exports.audit import audit_content
from exports.audit_data import audit_json
from exports.models import AuditLogEntry
from tests.exports.export_world import unzip

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = io.StringIO()
    call_command("export", *args, stdout=out)
    return out.getvalue()


def test_the_command_writes_the_bundle(known_history, tmp_path):
    w = known_history.week.window
    out = tmp_path / "bundle"
    printed = _run(
        "--org",
        "rep-acme",
        "--server",
        "rep-main",
        "--from",
        w.start.isoformat().replace("+00:00", "Z"),
        "--to",
        w.end.isoformat(),
        "--out",
        str(out),
        "--time-zone",
        "Europe/Paris",
    )
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    zip_name = f"audit-rep-acme-{w.start:%Y%m%dT%H%MZ}-{w.end:%Y%m%dT%H%MZ}.zip"
    assert {
        "audit.pdf",
        "audit.xlsx",
        "audit.json",
        "audit-export.schema.json",
        "SHA256SUMS",
        "csv/servers.csv",
        zip_name,
    } <= names
    for line in (out / "SHA256SUMS").read_text().splitlines():  # as `sha256sum -c SHA256SUMS` checks it
        digest, name = line.split("  ")
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
        assert f"{digest}  {out / name}" in printed
    # The zip holds the same files; the JSON has the figures of the content any other path builds.
    assert unzip((out / zip_name).read_bytes()) == {n: (out / n).read_bytes() for n in names if n != zip_name}
    doc = json.loads((out / "audit.json").read_text())
    same = audit_json(
        audit_content(organization_id=known_history.organization.pk, server_ids=[known_history.server.pk], window=w)
    )
    assert doc["servers"] == same["servers"] and doc["time_zone"] == "Europe/Paris"
    entry = AuditLogEntry.objects.get(organization=known_history.organization, action="export_generated")
    assert entry.user is None and "manage.py export" in entry.detail and str(out) in entry.detail


def test_only_the_formats_asked(known_history, tmp_path):
    w = known_history.week.window
    _run(
        "--org",
        str(known_history.organization.pk),
        "--from",
        w.start.isoformat(),
        "--to",
        w.end.isoformat(),
        "--out",
        str(tmp_path),
        "--format",
        "json,csv",
    )
    names = {p.name for p in tmp_path.iterdir()}
    assert "audit.json" in names and "csv" in names and "audit.pdf" not in names and "audit.xlsx" not in names


@pytest.mark.parametrize(
    "args, message",
    [
        (["--org", "nope"], "no organization 'nope'"),
        (["--org", "rep-acme", "--server", "rep-elsewhere"], "not servers of rep-acme: rep-elsewhere"),
        (["--org", "rep-acme", "--from", "yesterday"], "--from 'yesterday' is not an ISO 8601 time"),
        (["--org", "rep-acme", "--to", "2026-11-16T00:00"], "has no UTC offset"),
        (["--org", "rep-acme", "--format", "pdf,docx"], "formats: docx: choose among pdf, xlsx, csv, json"),
        (["--org", "rep-acme", "--time-zone", "Mars/Olympus"], "is not a time zone"),
    ],
)
def test_clear_errors(known_history, tmp_path, args, message):
    w = known_history.week.window
    base = {"--from": w.start.isoformat(), "--to": w.end.isoformat(), "--out": str(tmp_path)}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = [x for k, v in {**base, **given}.items() for x in (k, v)]
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(*argv)
    assert not any(tmp_path.iterdir())
