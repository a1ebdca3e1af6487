"""One-dimensional PostgreSQL arrays in binary wire format <-> numpy, in one call each way.

A snapshot sends the previous state to the monitored server as array parameters and gets the
changed entries back as one row of arrays (collectors/statements/pgss.py): thousands of values move in one
message each way, packed and parsed by numpy without a Python object per value.
"""

import struct

import numpy as np
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format

# kind -> (element type oid, array type oid, big-endian element dtype)
KINDS: dict[str, tuple[int, int, str]] = {
    "bool": (16, 1000, "u1"),
    "int8": (20, 1016, ">i8"),
    "oid": (26, 1028, ">u4"),
    "float8": (701, 1022, ">f8"),
    "timestamptz": (1184, 1185, ">i8"),  # microseconds since 2000-01-01 UTC
}
_HEADER = struct.Struct(">iiI")  # ndim, has nulls, element type
_DIM = struct.Struct(">ii")  # length, lower bound
# Unix epoch microseconds -> PostgreSQL timestamp microseconds (since 2000-01-01).
PG_EPOCH_US = 946_684_800_000_000


class ArrayFormatError(Exception):
    """A binary array that is not the flat, NULL-free array of the type asked for."""


def _wire(kind: str) -> np.dtype:
    _, _, elem = KINDS[kind]
    return np.dtype([("len", ">i4"), ("value", elem)])


def pack(values: np.ndarray, kind: str) -> bytes:
    """Binary send format of a one-dimensional array without NULLs."""
    elem_oid, _, elem = KINDS[kind]
    values = np.asarray(values)
    if values.size == 0:
        return _HEADER.pack(0, 0, elem_oid)
    body = np.empty(values.size, dtype=_wire(kind))
    body["len"] = np.dtype(elem).itemsize
    body["value"] = values.ravel()
    return _HEADER.pack(1, 0, elem_oid) + _DIM.pack(values.size, 1) + body.tobytes()


def parse(data: bytes | None, kind: str) -> np.ndarray:
    """A one-dimensional binary array (None, as array_agg over no rows gives, is empty)."""
    elem_oid, _, elem = KINDS[kind]
    native = np.dtype(elem).newbyteorder("=")
    if data is None:
        return np.empty(0, native)
    if len(data) < _HEADER.size:
        raise ArrayFormatError(f"array of {len(data)} bytes")
    ndim, has_nulls, got_oid = _HEADER.unpack_from(data)
    if got_oid != elem_oid:
        raise ArrayFormatError(f"array of type oid {got_oid}, expected {elem_oid} ({kind})")
    if ndim == 0:
        return np.empty(0, native)
    if ndim != 1 or has_nulls:
        raise ArrayFormatError(f"expected a flat array without NULLs, got ndim={ndim} has_nulls={has_nulls}")
    n, _ = _DIM.unpack_from(data, _HEADER.size)
    wire = _wire(kind)
    offset = _HEADER.size + _DIM.size
    if len(data) != offset + n * wire.itemsize:
        raise ArrayFormatError(f"array of {n} {kind} elements in {len(data)} bytes")
    rows = np.frombuffer(data, dtype=wire, count=n, offset=offset)
    if (rows["len"] != np.dtype(elem).itemsize).any():
        raise ArrayFormatError(f"{kind} array with elements of unexpected width")
    return rows["value"].astype(native)


class Param:
    """A query parameter already in binary array format (see register)."""

    __slots__ = ("data",)
    kind = ""

    def __init__(self, values: np.ndarray):
        self.data = pack(values, self.kind)


_PARAMS: dict[str, type[Param]] = {kind: type(f"{kind.title()}Array", (Param,), {"kind": kind}) for kind in KINDS}


class _ParamDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Param) -> bytes:
        return obj.data


def param(values: np.ndarray, kind: str) -> Param:
    return _PARAMS[kind](values)


_DUMPERS = {
    cls: type(f"{cls.__name__}Dumper", (_ParamDumper,), {"oid": KINDS[kind][1]}) for kind, cls in _PARAMS.items()
}


def register(adapters: AdaptersMap) -> None:
    """Teach a cursor's (or connection's) adapters to send Param objects as they are."""
    for cls, dumper in _DUMPERS.items():
        adapters.register_dumper(cls, dumper)
