"""collectors.sql_names: quote_ident against PostgreSQL's own quote_ident(), on the history store's server (every key
word it knows, and names of every shape a role, a database or a table can have); in_comment against names chosen
to end or open the comment they are shown in, and against PostgreSQL's own lexer."""

import re

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.sql_names import in_comment, quote_ident

NAMES = ["monitor", "pg_monitor", "_x", "x$1", "Sales", "MiXed", 'a"b', "1abc", "é", "with space", "a-b", "user"]
# What a monitored server's users may name a table: each character the comment it is shown in must not obey. What
# would get out of the comment is harmless here (the history store's server reads these): a column more.
HOSTILE = [
    "ev\n, 2 AS two --",
    "ev\r, 2 AS two --",
    "ev\r\n\\! touch pwned #",
    "a*/, 2 AS two /*",
    "/*/",
    "*/*",
    "ends in a slash/",
    'it\'s "quoted"; -- and; more',
    "back\\slash\\n",
    "tab\there, escape\x1b[2K, bell\x07",
    "line\u2028paragraph\u2029next line\x85",
    "right-to-left\u202eoverride, zero\u200bwidth",
    "été 日本 Ωμέγα",
    "",
]


@pytest.mark.django_db
def test_every_name_and_key_word_is_quoted_as_postgresql_quotes_it():
    hostile = [name for name in HOSTILE if name]  # a name is never empty: PostgreSQL refuses a zero-length one
    with connection.cursor() as cur:
        cur.execute("SELECT word FROM pg_get_keywords()")
        names = NAMES + hostile + [word for (word,) in cur.fetchall()]
        cur.execute("SELECT n, quote_ident(n) FROM unnest(%s::text[]) AS n", [names])
        theirs = dict(cur.fetchall())
    assert len(theirs) > 400
    assert {n: quote_ident(n) for n in names} == theirs


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("ev\nCREATE ROLE injected SUPERUSER;--", r"ev\nCREATE ROLE injected SUPERUSER;--"),
        ('"ev\rx"', r'"ev\rx"'),
        ("a*/b/*c", r"a*\/b/\*c"),
        ("/*/", "/\\*\\/\\"),
        ("*/*", r"*\/\*"),
        ("a/", "a/\\"),
        ("a/b*c", "a/b*c"),
        (r"back\slash\n", r"back\\slash\\n"),
        ("\t\x1b\x00", r"\t\x1b\x00"),
        ("\u2028\u2029\x85\u202e\xa0", r"\u2028\u2029\x85\u202e\xa0"),
        ("été 日本; -- 'it' \"is\"", "été 日本; -- 'it' \"is\""),
        ("", ""),
    ],
)
def test_a_comment_shows_what_the_name_holds_with_nothing_that_ends_or_opens_it(name, shown):
    assert in_comment(name) == shown


# How a reader reads in_comment's escapes back (Python's, and a backslash that keeps a star and a slash apart).
_ESCAPE = re.compile(r"\\([\\*/]|\Z|[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_NAMED = {"n": "\n", "r": "\r", "t": "\t", "": ""}


def _read_back(shown: str) -> str:
    def one(escape: re.Match) -> str:
        e = escape.group(1)
        if e in ("\\", "*", "/"):
            return e
        return _NAMED[e] if e in _NAMED else chr(int(e[1:], 16))

    return _ESCAPE.sub(one, shown)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_no_text_ends_or_opens_a_comment_and_every_text_reads_back_as_it_was(text):
    shown = in_comment(text)
    assert shown.isprintable() and "*/" not in shown and "/*" not in shown and not shown.endswith("/"), shown
    assert _read_back(shown) == text


def test_the_hostile_names_read_back_as_they_were():
    assert [_read_back(in_comment(name)) for name in HOSTILE] == HOSTILE


@pytest.mark.django_db
@pytest.mark.parametrize("name", HOSTILE)
def test_postgresql_reads_the_name_as_part_of_its_comment(name):
    """Each query returns its one column: nothing of the name got out of the comment (a line feed would have added
    `, 2 AS two`; a star-slash, everything after it)."""
    shown = in_comment(name)
    with connection.cursor() as cur:
        for query in (
            f"SELECT 1 AS one -- {shown}\n",
            f"SELECT 1 AS one --{shown}",
            f"SELECT /*{shown}*/ 1 AS one",
            f"SELECT /* /* {shown} */ */ 1 AS one",
        ):
            cur.execute(query)
            assert cur.fetchall() == [(1,)], query
