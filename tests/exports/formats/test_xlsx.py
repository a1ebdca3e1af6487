"""exports.formats.xlsx: audit.xlsx holds one sheet per table with a bold, frozen header and the values as the JSON
has them (numbers as numbers, booleans as booleans, empty for null); text that looks like a formula stays text, and
a control character the format cannot hold shows as U+FFFD."""

import io

from openpyxl import load_workbook

from exports.audit_data import Table
from exports.formats.xlsx import WIDE, xlsx_bytes


def _book(tables: dict[str, Table]):
    return load_workbook(io.BytesIO(xlsx_bytes(tables)))


def test_one_sheet_per_table_in_order_with_the_header_bold_and_frozen():
    wb = _book({"servers": Table("servers", ["name"], [["db1"]]), "alerts": Table("alerts", ["id"], [])})
    assert wb.sheetnames == ["servers", "alerts"]
    for ws in wb.worksheets:
        assert ws.freeze_panes == "A2" and all(c.font.bold for c in ws[1])
    assert ws.max_row == 1 and ws["A1"].value == "id"  # a table without rows is its header


def test_values_keep_their_types():
    row = ["-42", 3, 1 / 3, True, False, None, "café ☕"]
    ws = _book({"t": Table("t", ["queryid", "calls", "mean_ms", "a", "b", "c", "text"], [row])})["t"]
    values = [c.value for c in ws[2]]
    assert values == row
    assert [type(v) for v in values] == [str, int, float, bool, bool, type(None), str]
    assert ws["C2"].value == 1 / 3  # bit for bit


def test_formula_like_text_stays_text():
    hostile = ["=1+1", '=HYPERLINK("http://evil.example","x")', "+1", "-1", "@SUM(A1)"]
    ws = _book({"q": Table("q", ["query"], [[h] for h in hostile])})["q"]
    cells = [ws.cell(row=i, column=1) for i in range(2, len(hostile) + 2)]
    assert [c.value for c in cells] == hostile
    assert {c.data_type for c in cells} == {"s"}


def test_control_characters_show_as_the_replacement_character():
    ws = _book({"q": Table("q", ["query"], [["SELECT '\x00\x01' -- \x1b[31m", "tab\tand\nnewline"]])})["q"]
    assert ws["A2"].value == "SELECT '\ufffd\ufffd' -- \ufffd[31m"
    assert ws["B2"].value == "tab\tand\nnewline"  # allowed in a cell: kept


def test_a_sheet_name_is_cut_to_the_formats_31_characters():
    name = "recommendations_with_their_evidence"
    assert _book({name: Table(name, ["a"], [])}).sheetnames == [name[:31]]


def test_column_widths_by_header():
    header = ["query", "id", "a_rather_long_column_name_indeed", "planning_ms"]
    ws = _book({"t": Table("t", header, [])})["t"]
    widths = [ws.column_dimensions[col].width for col in "ABCD"]
    assert widths == [WIDE["query"], 10, 24, len("planning_ms") + 2]
