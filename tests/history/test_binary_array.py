"""binary_array: a flat, NULL-free PostgreSQL array in binary wire format <-> a numpy array, one call each way,
refusing any other array with what it is. psycopg's own binary array adapters are the independent reference:
pack writes the bytes psycopg writes, parse reads what psycopg writes, and psycopg reads back what pack writes."""

import re
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from psycopg.adapt import AdaptersMap, PyFormat, Transformer
from psycopg.pq import Format
from psycopg.types.numeric import Float8, Int4, Int8, Oid

from history import binary_array
from history.binary_array import KINDS, ArrayFormatError, pack, param, parse, register

SAMPLES = {
    "bool": (np.array([True, False, True]), bool),
    "int8": (np.array([-(2**63), -1, 0, 1, 2**63 - 1], np.int64), Int8),
    "oid": (np.array([0, 1, 10, 2**32 - 1], np.uint32), Oid),
    "float8": (np.array([-1.5, 0.0, np.inf, 1e-300]), Float8),
}


def psycopg_dump(values: list):
    tx = Transformer(AdaptersMap(psycopg.adapters))
    dumper = tx.get_dumper(values, PyFormat.BINARY)
    return dumper.oid, bytes(dumper.dump(values))


@pytest.mark.parametrize("kind", SAMPLES)
def test_pack_writes_the_bytes_psycopg_writes_and_parse_reads_them_back(kind):
    values, wrap = SAMPLES[kind]
    oid, data = psycopg_dump([wrap(v) for v in values.tolist()])
    assert oid == KINDS[kind][1]
    assert pack(values, kind) == data
    back = parse(data, kind)
    assert back.dtype.isnative and back.tolist() == values.tolist()


def test_timestamps_are_microseconds_since_2000_as_postgresql_counts_them():
    us = np.array([0, 1, -(10**15), 10**15], np.int64)
    loader = Transformer().get_loader(KINDS["timestamptz"][1], Format.BINARY)
    pg_epoch = datetime(2000, 1, 1, tzinfo=UTC)
    assert loader.load(pack(us, "timestamptz")) == [pg_epoch + timedelta(microseconds=int(u)) for u in us]
    assert binary_array.PG_EPOCH_US == int(pg_epoch.timestamp()) * 1_000_000


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_array_and_a_null_one_read_as_empty(kind):
    data = pack(np.array([], np.dtype(KINDS[kind][2])), kind)
    assert Transformer().get_loader(KINDS[kind][1], Format.BINARY).load(data) == []
    assert parse(data, kind).size == 0
    assert parse(None, kind).size == 0 and parse(None, kind).dtype.isnative


@pytest.mark.parametrize(
    "values, kind, words",
    [
        ([Int4(1)], "int8", "array of type oid 23, expected 20 (int8)"),
        ([[Int8(1)], [Int8(2)]], "int8", "expected a flat array without NULLs, got ndim=2 has_nulls=0"),
        ([Int8(1), None], "int8", "expected a flat array without NULLs, got ndim=1 has_nulls=1"),
    ],
)
def test_another_array_than_the_flat_null_free_one_asked_for_is_refused(values, kind, words):
    _, data = psycopg_dump(values)
    with pytest.raises(ArrayFormatError, match=re.escape(words)):
        parse(data, kind)


def test_a_truncated_or_misdeclared_array_is_refused_with_its_size():
    data = pack(np.array([1, 2, 3], np.int64), "int8")
    with pytest.raises(ArrayFormatError, match="array of 5 bytes"):
        parse(data[:5], "int8")
    with pytest.raises(ArrayFormatError, match=f"array of 3 int8 elements in {len(data) - 1} bytes"):
        parse(data[:-1], "int8")
    # One element claims 4 bytes of its 8: the layout no longer holds.
    narrow = bytearray(data)
    narrow[20:24] = (4).to_bytes(4, "big")
    with pytest.raises(ArrayFormatError, match="int8 array with elements of unexpected width"):
        parse(bytes(narrow), "int8")


def test_params_are_sent_as_their_array_type_only_by_adapters_that_registered_them():
    values = np.array([5, 7], np.int64)
    adapters = AdaptersMap(psycopg.adapters)
    register(adapters)
    for kind in KINDS:
        dumper = Transformer(adapters).get_dumper(param(values, kind), PyFormat.BINARY)
        assert dumper.oid == KINDS[kind][1]
        assert bytes(dumper.dump(param(values, kind))) == pack(values, kind)
    with pytest.raises(psycopg.ProgrammingError):
        Transformer(AdaptersMap(psycopg.adapters)).get_dumper(param(values, "int8"), PyFormat.BINARY)
