"""The API's common machinery (console/api/common.py): the JSON renderer (orjson) writes what DRF's renderer
writes and falls back to it where orjson cannot; paging refuses what it cannot serve; CSV by the Accept header or
?format=csv, with cells a spreadsheet reads as text."""

from __future__ import annotations

import csv
import json
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer as DRFJSONRenderer

from console.api.common import JSONRenderer
from inventory.models import Server
from tests.api_world import assert_error

ORGS = "/api/v1/organizations/"

TAKEN = datetime(2025, 1, 4, 13, 37, 0, 250_000, tzinfo=UTC)
PAYLOAD = {
    "utc": TAKEN,
    "utc_whole_second": TAKEN.replace(microsecond=0),
    "zoneinfo_utc": TAKEN.astimezone(ZoneInfo("UTC")),
    "paris": TAKEN.astimezone(ZoneInfo("Europe/Paris")),
    "naive": TAKEN.replace(tzinfo=None),
    "day": date(2025, 1, 4),
    "span": timedelta(minutes=1, microseconds=5),
    "decimal": Decimal("12.5"),
    "id": uuid.UUID(int=7),
    "lazy": gettext_lazy("statements"),
    "floats": [0.1, 1e16, -0.0, 123456789.123456789, 2.5e-3],
    "ints": [0, -1, 2**63 - 1, -(2**63)],
    "text": "SELECT 'é', '\u2028', '\u2029', '\"', '\\\\', '\x01' FROM t",
    "nested": [{"start": TAKEN, "calls": None, "planning_tracked": False}, ()],
}


def test_same_text_as_drfs_renderer():
    assert JSONRenderer().render(PAYLOAD) == DRFJSONRenderer().render(PAYLOAD)


def test_floats_read_back_bit_for_bit():
    """orjson writes some floats in another notation than Python's repr (0.00001 for 1e-05), never another value."""
    floats = [1e-05, 5e-324, 1.7976931348623157e308, 1 / 3, 2.2250738585072014e-308, 0.1 + 0.2, 60.000000000000014]
    assert json.loads(JSONRenderer().render(floats)) == floats


def test_line_and_paragraph_separators_are_escaped():
    out = JSONRenderer().render({"q": "a\u2028b\u2029c"})
    assert out == b'{"q":"a\\u2028b\\u2029c"}'
    assert json.loads(out) == {"q": "a\u2028b\u2029c"}


def test_indent_asked_for_is_drfs_indented_text():
    asked = JSONRenderer().render(PAYLOAD, "application/json; indent=2")
    assert asked == DRFJSONRenderer().render(PAYLOAD, "application/json; indent=2")
    assert asked.startswith(b'{\n  "utc"')
    browsable = JSONRenderer().render(PAYLOAD, "application/json", {"indent": 4})
    assert browsable.startswith(b'{\n    "utc"')


def test_an_integer_beyond_64_bits_goes_to_drfs_renderer():
    assert JSONRenderer().render({"n": 2**70}) == b'{"n":1180591620717411303424}'


def test_nothing_and_unencodable():
    assert JSONRenderer().render(None) == b""
    try:
        JSONRenderer().render({"x": object()})
    except TypeError as exc:
        assert "not JSON serializable" in str(exc)
    else:
        raise AssertionError("an object without a JSON form was rendered")


def test_not_a_number_is_null():
    assert JSONRenderer().render({"share": float("nan"), "rate": float("inf")}) == b'{"share":null,"rate":null}'


@pytest.mark.django_db
def test_paging_refuses_oversized_and_malformed_pages(api_world):
    c = api_world.client("viewer")
    body = assert_error(c.get(ORGS, {"page_size": 100000}), 400, "invalid")
    assert "page_size" in body["errors"] and "between 1 and 500" in body["errors"]["page_size"][0]
    assert "page" in assert_error(c.get(ORGS, {"page": "x"}), 400)["errors"]
    r = c.get(ORGS, {"page": 3})
    assert r.status_code == 200 and r.json()["results"] == [] and r.json()["count"] == 1


@pytest.mark.django_db
def test_csv_by_accept_header_or_format(api_world):
    c = api_world.client("viewer")
    for r in (c.get(ORGS, HTTP_ACCEPT="text/csv"), c.get(ORGS, {"format": "csv"})):
        assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
        assert r.content.decode().splitlines() == ["id,name,role,servers", f"{api_world.acme.pk},acme,viewer,0"]


@pytest.mark.django_db
def test_csv_cells_are_text_in_a_spreadsheet_and_empty_ones_stay_empty(api_world):
    """A name that a spreadsheet would run as a formula (also behind a TAB or CR, which it skips) gets a leading
    quote; an empty cell stays empty, not a lone quote."""
    c = api_world.client("viewer")
    for hostile in ('=HYPERLINK("http://evil.example")', "\t=1+1", "\r@SUM(A1)", "-2+3", "+1"):
        api_world.acme.name = hostile
        api_world.acme.save()
        [header, row] = list(csv.reader(StringIO(c.get(ORGS, {"format": "csv"}).content.decode())))
        assert header == ["id", "name", "role", "servers"]
        assert row == [str(api_world.acme.pk), "'" + hostile, "viewer", "0"], hostile
    Server.objects.create(organization=api_world.acme, name="db-empty", host="db1.example", user="m")
    response = c.get("/api/v1/servers/", {"format": "csv", "organization": api_world.acme.pk})
    assert response.status_code == 200, response.content
    [header, row] = list(csv.reader(StringIO(response.content.decode())))
    assert row[header.index("last_error_message")] == "" and "'" not in row
