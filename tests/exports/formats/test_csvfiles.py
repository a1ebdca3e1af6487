"""exports.formats.csvfiles: one UTF-8 CSV per table whose cells are text a spreadsheet shows as written — a
leading quote on any text that would start a formula, numbers exactly as Python reads them back, true/false, and
empty for null."""

import csv
import io

import pytest

from exports.audit_data import Table
from exports.formats.csvfiles import FORMULA_START, cell_text, csv_bytes, csv_files, formula_safe


@pytest.mark.parametrize("first", FORMULA_START)
def test_every_formula_start_gets_a_leading_quote(first):
    text = first + 'HYPERLINK("http://evil.example","x")'
    assert formula_safe(text) == "'" + text


def test_the_dangerous_starts_are_the_known_six():
    assert set(FORMULA_START) == {"=", "+", "-", "@", "\t", "\r"}


@pytest.mark.parametrize("text", ["", "SELECT 1", " =1+1", "a=b", "'=already quoted", "\n=1", "é=1", "1-2"])
def test_other_text_is_left_as_it_is(text):
    assert formula_safe(text) == text


@pytest.mark.parametrize(
    "value, text",
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-5, "-5"),  # a number is never a formula: no quote
        (2**63 - 1, "9223372036854775807"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-05, "1e-05"),
        ("-5", "'-5"),
        ("=SUM(A1:A9)", "'=SUM(A1:A9)"),
    ],
)
def test_cell_text(value, text):
    assert cell_text(value) == text


@pytest.mark.parametrize("value", [0.1, 1 / 3, 5e-324, 1.7976931348623157e308, 123456789.123456789])
def test_a_float_reads_back_bit_for_bit(value):
    assert float(cell_text(value)) == value


def test_csv_bytes_read_back_with_the_csv_module():
    table = Table(
        "statements",
        ["queryid", "query", "calls", "mean_ms", "tracked", "note"],
        [
            ["-42", "SELECT \"a\", 'b,c'\nFROM t", 3, 1 / 3, True, None],
            ["7", "=cmd|' /C calc'!A0", 0, 0.0, False, "café ☕"],
        ],
    )
    data = csv_bytes(table)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert rows[0] == table.header
    assert rows[1] == ["'-42", "SELECT \"a\", 'b,c'\nFROM t", "3", repr(1 / 3), "true", ""]
    assert rows[2] == ["7", "'=cmd|' /C calc'!A0", "0", "0.0", "false", "café ☕"]
    assert float(rows[1][3]) == 1 / 3 and len(rows) == 3


def test_a_table_without_rows_is_its_header():
    assert csv_bytes(Table("empty", ["a", "b"], [])) == b"a,b\n"


def test_one_file_per_table_under_csv():
    tables = {"servers": Table("servers", ["name"], [["db1"]]), "alerts": Table("alerts", ["id"], [])}
    files = csv_files(tables)
    assert set(files) == {"csv/servers.csv", "csv/alerts.csv"}
    assert files["csv/servers.csv"] == csv_bytes(tables["servers"])
