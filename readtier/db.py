"""How selectors talk to the history store: one function, so every query is counted (tests assert
the number of queries per selector: no N+1) and binary array parameters work everywhere."""

import threading
from contextlib import contextmanager

import psycopg
from django.db import connection
from psycopg import sql

from history.public import register_arrays

_local = threading.local()


def fetchall(query: str | sql.Composable, params=None, *, binary: bool = False) -> list[tuple]:
    """All rows of one query (binary=True: results in binary format, e.g. for bytea, half the bytes of hex)."""
    _local.count = getattr(_local, "count", 0) + 1
    connection.ensure_connection()
    # A plain (server-side binding) cursor: Django's binds on the client, which cannot send binary arrays.
    with psycopg.Cursor(connection.connection) as cur:
        register_arrays(cur.adapters)
        # Never prepared: a generic plan of a partitioned table cannot prune partitions at plan time.
        cur.execute(query, params, binary=binary, prepare=False)
        return cur.fetchall()


def fetchone(query: str | sql.Composable, params=None) -> tuple:
    rows = fetchall(query, params)
    return rows[0]


class Counter:
    def __init__(self):
        self.start = getattr(_local, "count", 0)

    @property
    def queries(self) -> int:
        return getattr(_local, "count", 0) - self.start


@contextmanager
def counting():
    """with counting() as c: ...; c.queries is how many queries the selectors ran in the block."""
    yield Counter()
