"""readings.sql_names.quote_ident against PostgreSQL's own quote_ident(), on the history store's server: every
key word it knows, and names of every shape a role or a database can have."""

import pytest
from django.db import connection

from readings.sql_names import quote_ident

pytestmark = pytest.mark.django_db

NAMES = ["monitor", "pg_monitor", "_x", "x$1", "Sales", "MiXed", 'a"b', "1abc", "é", "with space", "a-b", "user"]


def test_every_name_and_key_word_is_quoted_as_postgresql_quotes_it():
    with connection.cursor() as cur:
        cur.execute("SELECT word FROM pg_get_keywords()")
        names = NAMES + [word for (word,) in cur.fetchall()]
        cur.execute("SELECT n, quote_ident(n) FROM unnest(%s::text[]) AS n", [names])
        theirs = dict(cur.fetchall())
    assert len(theirs) > 400
    assert {n: quote_ident(n) for n in names} == theirs
