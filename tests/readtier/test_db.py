"""selectors.db: the one way selectors query the history store. Every query is counted (per thread, for the
no-N+1 tests), parameters are bound by the server so that binary arrays go as they are, results may come in
binary, and no query is ever prepared (a generic plan would not prune partitions). Shown on the test database."""

import struct
import threading

import numpy as np
import psycopg
import pytest
from django.db import connection
from psycopg import sql

from history import binary_array
from readtier.db import counting, fetchall, fetchone

pytestmark = pytest.mark.django_db


def test_rows_come_back_as_tuples_of_a_plain_or_composed_query():
    assert fetchall("SELECT g, g * %s FROM generate_series(1, %s) g", [3, 4]) == [(g, g * 3) for g in range(1, 5)]
    assert fetchall("SELECT 1 WHERE false") == []
    composed = sql.SQL("SELECT {}, count(*) FROM {}").format(sql.Literal("x"), sql.Identifier("pg_catalog", "pg_am"))
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_catalog.pg_am")
        assert fetchone(composed) == ("x", cur.fetchone()[0])


def test_binary_array_parameters_reach_the_server_as_arrays():
    values = np.array([5, -7, 2**40, 0], np.int64)
    query = "SELECT cardinality(%s), (SELECT sum(v) FROM unnest(%s) v), %s"
    arr = binary_array.param(values, "int8")
    assert fetchone(query, [arr, arr, binary_array.param(values > 0, "bool")]) == (
        len(values),
        int(values.sum()),
        (values > 0).tolist(),
    )


def test_binary_results_are_the_same_values_sent_in_binary():
    query = "SELECT decode(repeat('00ff7f', 1000), 'hex'), 12345678901::int8, 'ünïcode'::text"
    [binary], [text] = fetchall(query, binary=True), fetchall(query)
    assert binary == text and binary[0] == bytes.fromhex("00ff7f" * 1000)
    # A type psycopg has no loader for shows the format itself: its text, or its binary send format.
    assert fetchall("SELECT '(1.5,-2)'::point") == [("(1.5,-2)",)]
    assert fetchall("SELECT '(1.5,-2)'::point", binary=True) == [(struct.pack(">dd", 1.5, -2),)]


def test_a_query_is_never_prepared_even_where_the_connection_prepares_every_query():
    def prepared() -> int:
        return fetchone("SELECT count(*) FROM pg_prepared_statements")[0]

    query = "SELECT relname FROM pg_class WHERE oid = %s"
    connection.ensure_connection()
    conn = connection.connection
    threshold, conn.prepare_threshold = conn.prepare_threshold, 0  # as OPTIONS {"prepare_threshold": 0} would
    try:
        for _ in range(3):
            assert fetchall(query, [1259]) == [("pg_class",)]
        assert prepared() == 0
        with psycopg.Cursor(conn) as cur:  # the control: a plain cursor on the same connection prepares it
            cur.execute(query, [1259])
        assert prepared() == 1
    finally:
        conn.prepare_threshold = threshold
        conn.execute("DEALLOCATE ALL")


def test_counting_counts_the_selectors_queries_of_its_block_and_thread_only():
    with counting() as outer:
        fetchall("SELECT 1")
        with counting() as inner:
            fetchone("SELECT 2")
            fetchall("SELECT 3")
            with connection.cursor() as cur:
                cur.execute("SELECT 4")  # Django's own cursor: not a selector query

            def elsewhere():
                try:
                    fetchall("SELECT 5")
                finally:
                    connection.close()

            thread = threading.Thread(target=elsewhere)
            thread.start()
            thread.join()
        assert inner.queries == 2
    assert outer.queries == 3
