"""binary_copy: PostgreSQL's binary COPY <-> numpy structured arrays of int8/float8 columns. parse must read what
PostgreSQL writes (and refuse a stream of another layout, NULLs included), and build must write what PostgreSQL
reads, zeros of the columns asked for as NULL: shown against the test database itself."""

import numpy as np
import pytest
from django.db import connection

from history.binary_copy import HEADER, SIGNATURE, TRAILER, CopyFormatError, build, native_dtype, parse

pytestmark = pytest.mark.django_db

COLUMNS = (("id", "i8"), ("total", "i8"), ("mean", "f8"))


def copy_out(query: str) -> bytes:
    connection.ensure_connection()
    with connection.connection.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
        return b"".join(bytes(chunk) for chunk in copy)


def test_parse_reads_what_postgresql_writes():
    data = copy_out("SELECT i::int8, (i * i - 50)::int8, i / 4.0::float8 FROM generate_series(1, 300) i")
    i = np.arange(1, 301)
    rows = parse(data, COLUMNS)
    assert rows.dtype == native_dtype(COLUMNS)
    assert rows["id"].tolist() == i.tolist()
    assert rows["total"].tolist() == (i * i - 50).tolist()
    assert rows["mean"].tolist() == (i / 4.0).tolist()
    assert parse(copy_out("SELECT 1::int8, 1::int8, 1::float8 WHERE false"), COLUMNS).size == 0


def test_build_writes_what_postgresql_reads_with_zeros_as_null_where_asked():
    rng = np.random.default_rng(7)
    rows = np.zeros(500, native_dtype(COLUMNS))
    rows["id"] = np.arange(500)
    rows["total"] = rng.integers(-(2**62), 2**62, 500) * (rng.random(500) < 0.5)  # about half zero
    rows["mean"] = rng.random(500) * (rng.random(500) < 0.5)
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE copied (id int8, total int8, mean float8)")
        with cur.connection.cursor() as raw, raw.copy("COPY copied FROM STDIN (FORMAT binary)") as copy:
            copy.write(build(rows, COLUMNS, zero_as_null=["total", "mean"]))
        cur.execute("SELECT id, total, mean FROM copied ORDER BY id")
        back = cur.fetchall()
    # Zeros of total and mean as NULL, id's zero kept.
    expected = [(int(r["id"]), int(r["total"]) or None, float(r["mean"]) or None) for r in rows]
    assert back == expected
    assert expected[0][0] == 0 and None in {t for _, t, _ in expected} and None in {m for _, _, m in expected}


@pytest.mark.parametrize("zero_as_null", [(), ("total",)])
def test_build_and_parse_round_trip_rows_without_zeros_exactly(zero_as_null):
    rows = np.zeros(4, native_dtype(COLUMNS))
    rows["id"], rows["total"], rows["mean"] = [1, 2, 3, 4], [-(2**63), -1, 7, 2**63 - 1], [np.inf, -0.5, 1e-300, 3]
    data = build(rows, COLUMNS, zero_as_null=zero_as_null)
    assert parse(data, COLUMNS).tolist() == rows.tolist()
    assert data == build(rows, COLUMNS)  # no zero: the rows with offsets are the fixed-width rows
    assert build(rows[:0], COLUMNS, zero_as_null=zero_as_null) == HEADER + TRAILER


def test_a_header_extension_is_skipped():
    rows = np.array([(5, 6, 0.5)], native_dtype(COLUMNS))
    body = build(rows, COLUMNS)[len(HEADER) :]
    extended = SIGNATURE + b"\x00\x00\x00\x00" + (3).to_bytes(4, "big") + b"abc" + body
    assert parse(extended, COLUMNS).tolist() == rows.tolist()


def test_a_stream_of_another_layout_is_refused_with_what_is_wrong():
    with pytest.raises(CopyFormatError, match="not a binary COPY stream"):
        parse(b"id,total,mean\n1,2,3.0\n", COLUMNS)
    # A NULL (4 bytes, not 12) and a text 8 bytes wider than a float8: the row's length fits, its fields do not.
    nulls = copy_out("SELECT 1::int8, NULL::int8, repeat('x', 16)")
    assert len(nulls) == len(HEADER) + 38 + len(TRAILER)
    with pytest.raises(CopyFormatError, match="column total has NULLs or an unexpected width"):
        parse(nulls, COLUMNS)
    two = copy_out("SELECT 1::int8, 2::int8")
    with pytest.raises(CopyFormatError, match=f"unexpected COPY length {len(two)} for rows of 38 bytes"):
        parse(two, COLUMNS)
    data = bytearray(build(np.array([(1, 2, 3.0)], native_dtype(COLUMNS)), COLUMNS))
    data[len(HEADER) : len(HEADER) + 2] = (2).to_bytes(2, "big")  # a row claiming two fields in the width of three
    with pytest.raises(CopyFormatError, match="unexpected field count in COPY stream"):
        parse(bytes(data), COLUMNS)
    with pytest.raises(CopyFormatError, match="unexpected COPY length"):
        parse(bytes(data[:-1]), COLUMNS)  # the trailer cut
