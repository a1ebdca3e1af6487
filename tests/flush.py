"""The flush that ends a transactional test (pytest-django's `transactional_db`, Django's TransactionTestCase):
the tables that hold rows are emptied, the others left as they are, in one statement on the server.

Django's flush truncates every table of the project in one TRUNCATE: 38 tables, the history's partitions and
their indexes, each given a new file. It took 75 to 120 ms on the history store, about 400 times a `make check`,
however little the test wrote (most write to a handful of tables). Truncating only the tables with a row leaves
the same empty database: an empty table has nothing to truncate. CASCADE takes along the empty tables that
reference one truncated (PostgreSQL refuses a TRUNCATE of a referenced table otherwise), as Django's own flush of
every table needs none. A flush that resets sequences (pytest-django's `reset_sequences`) stays Django's own."""

from __future__ import annotations

from django.db.backends.postgresql.operations import DatabaseOperations

_every_table = DatabaseOperations.sql_flush

#: One statement: every named table tested for a row, those with one truncated together.
ONLY_WITH_ROWS = """DO $flush$
DECLARE
    name text;
    found boolean;
    holding text[] := '{{}}';
BEGIN
    FOREACH name IN ARRAY ARRAY[{names}]::text[] LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM %I)', name) INTO found;
        IF found THEN
            holding := holding || name;
        END IF;
    END LOOP;
    IF cardinality(holding) > 0 THEN
        EXECUTE 'TRUNCATE ' || (SELECT string_agg(quote_ident(t), ', ') FROM unnest(holding) t) || ' CASCADE';
    END IF;
END
$flush$"""


def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if not tables or reset_sequences:
        return _every_table(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    names = ", ".join("'" + table.replace("'", "''") + "'" for table in tables)
    return [ONLY_WITH_ROWS.format(names=names)]


def install() -> None:
    DatabaseOperations.sql_flush = sql_flush
