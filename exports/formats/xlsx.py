"""audit.xlsx: one sheet per canonical table, header row bold and frozen, values as the JSON has them
(numbers as numbers, true/false as booleans, times as ISO 8601 text in UTC)."""

from __future__ import annotations

import io

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from exports.audit_data import Table

WIDE = {
    "query": 80,
    "explanation": 80,
    "message": 60,
    "title": 50,
    "subject": 40,
    "change_text": 50,
    "value": 30,
    "references": 50,
    "effect": 40,
    "cost": 40,
}


def _value(value):
    if isinstance(value, str):
        # Control characters cannot be stored in the file format: each shows as U+FFFD.
        return ILLEGAL_CHARACTERS_RE.sub("\ufffd", value)
    return value


def xlsx_bytes(tables: dict[str, Table]) -> bytes:
    wb = Workbook()
    wb.remove(wb.active)
    bold = Font(bold=True)
    for name, table in tables.items():
        ws = wb.create_sheet(title=name[:31])
        ws.append(table.header)
        for cell in ws[1]:
            cell.font = bold
        for row in table.rows:
            ws.append([_value(v) for v in row])
        for row in ws.iter_rows(min_row=2):
            for cell in row:
                if isinstance(cell.value, str) and cell.data_type == "f":
                    cell.data_type = "s"  # "=..." from a query text stays text, never a formula
        for i, header in enumerate(table.header, start=1):
            ws.column_dimensions[get_column_letter(i)].width = WIDE.get(header, max(10, min(24, len(header) + 2)))
        ws.freeze_panes = "A2"
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()
