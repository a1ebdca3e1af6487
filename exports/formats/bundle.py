"""The bundle: the chosen formats written from one content, the JSON Schema, and SHA256SUMS over them, as
files (the command writes them into a folder) or as one zip (the console's and the API's download)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime

from django.utils.text import slugify

from exports.audit import AuditContent
from exports.audit_data import audit_json, audit_tables

FORMATS = ("pdf", "xlsx", "csv", "json")
SCHEMA_NAME = "audit-export.schema.json"
SUMS_NAME = "SHA256SUMS"
# A fixed time for every member: the same files give the same zip (zip times have no zone).
ZIP_TIME = (2000, 1, 1, 0, 0, 0)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle_files(
    content: AuditContent, formats: list[str], step: Callable[[str, int], None] | None = None
) -> dict[str, bytes]:
    """{member name: bytes} for the formats asked, plus the schema and SHA256SUMS. `step(what, percent)`
    reports progress from 0 to 100 over the formats (the PDF, with its charts, is the long one)."""
    from exports.formats import csvfiles, jsonfile, pdf, xlsx  # WeasyPrint and openpyxl: the worker only

    def report(what: str, percent: int) -> None:
        if step is not None:
            step(what, percent)

    files: dict[str, bytes] = {}
    doc = audit_json(content)
    tables = audit_tables(doc) if {"xlsx", "csv"} & set(formats) else {}
    if "pdf" in formats:
        report("writing the PDF", 0)
        files["audit.pdf"] = pdf.pdf_bytes(content)
    if "xlsx" in formats:
        report("writing the workbook", 60)
        files["audit.xlsx"] = xlsx.xlsx_bytes(tables)
    if "csv" in formats:
        report("writing the CSV files", 80)
        files.update(csvfiles.csv_files(tables))
    if "json" in formats:
        report("writing the JSON", 90)
        files["audit.json"] = jsonfile.json_bytes(doc)
    files[SCHEMA_NAME] = jsonfile.schema_bytes()
    files[SUMS_NAME] = "".join(f"{sha256(data)}  {name}\n" for name, data in sorted(files.items())).encode()
    report("packing", 100)
    return files


def zip_bytes(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, files[name])
    return out.getvalue()


def bundle_name(*, organization: str, start: datetime, end: datetime) -> str:
    """audit-<organization>-<from>-<to>.zip, times in UTC (20261109T0000Z)."""

    def stamp(at: datetime) -> str:
        return at.astimezone(UTC).strftime("%Y%m%dT%H%MZ")

    return f"audit-{slugify(organization) or 'organization'}-{stamp(start)}-{stamp(end)}.zip"
