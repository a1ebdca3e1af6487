"""One CSV file per canonical table (csv/<table>.csv, UTF-8, a header row): the cells the workbook holds,
written as text — numbers as Python writes them back exactly, true/false, empty for null."""

from __future__ import annotations

import csv
import io

from exports.audit_data import Table

# A cell starting with one of these would be a formula in a spreadsheet (query texts are untrusted): it gets a
# leading quote, in the API's CSV too. A TAB or CR first is skipped by spreadsheets before a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(text: str) -> str:
    """The text as a spreadsheet must show it: as text, never run as a formula."""
    return "'" + text if text.startswith(FORMULA_START) else text


def cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return formula_safe(value)
    return repr(value) if isinstance(value, float) else str(value)


def csv_bytes(table: Table) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.header)
    for row in table.rows:
        writer.writerow([cell_text(v) for v in row])
    return out.getvalue().encode("utf-8")


def csv_files(tables: dict[str, Table]) -> dict[str, bytes]:
    """{"csv/<table>.csv": bytes} for every table."""
    return {f"csv/{name}.csv": csv_bytes(table) for name, table in tables.items()}
