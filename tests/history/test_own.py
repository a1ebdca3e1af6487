"""history/own.py: the console's mark is its installation's (a token derived from SECRET_KEY, never the key, the
same in every process of one installation), on a line of its own; and a statement is the console's own only when
its text ends with a mark and it ran as the monitoring role, in Python and in SQL alike. The console's real
collections, and statements forged by other roles on a real server: tests/collectors/test_own_statements.py."""

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from psycopg import sql

from history.models import ServerState
from history.own import LEGACY_MARK, is_own, marked_text, marks, own_mark, own_sql, token
from inventory.models import Organization, Server

ROOT = Path(__file__).resolve().parents[2]
MONITOR, OTHER = 16_384, 16_390  # the monitoring role's oid, and another role's


def test_the_mark_holds_a_token_of_the_installation_never_its_key():
    mark = own_mark()
    assert re.fullmatch(r"/\* pgconsole [0-9a-f]{16} \*/", mark), mark
    found = token(settings.SECRET_KEY)
    assert mark == f"/* pgconsole {found} */"
    assert found not in settings.SECRET_KEY and settings.SECRET_KEY not in mark
    assert token(settings.SECRET_KEY) == found  # stable
    assert token(settings.SECRET_KEY + "x") != found  # another installation's


def test_the_token_is_the_same_in_a_fresh_process_of_the_installation():
    """A restart, another worker, another host: each derives it from the same SECRET_KEY."""
    code = "import django; django.setup(); from history.own import own_mark; print(own_mark())"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "tests.settings")}
    env["SECRET_KEY"] = settings.SECRET_KEY
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == own_mark()


def test_the_mark_goes_on_a_line_of_its_own_after_the_statement():
    assert marked_text("SELECT 1 -- the trailing comment a line ends") == (
        f"SELECT 1 -- the trailing comment a line ends\n{own_mark()}"
    )


def test_the_marks_recognised_are_this_keys_the_fallback_keys_and_the_plain_one(settings):
    settings.SECRET_KEY_FALLBACKS = ["an-older-key-of-this-installation" * 2]
    older = f"/* pgconsole {token(settings.SECRET_KEY_FALLBACKS[0])} */"
    assert marks() == (own_mark(), older, LEGACY_MARK)


# (text, userid, role_oid) -> the console's own?
CASES = [
    (f"SELECT 1\n{own_mark()}", MONITOR, MONITOR, True),
    (f"SELECT 1\n{LEGACY_MARK}", MONITOR, MONITOR, True),  # stored by a console before the token
    (f"SELECT 1\n{own_mark()}", OTHER, MONITOR, False),  # another role, the token copied
    (f"SELECT 1\n{LEGACY_MARK}", OTHER, MONITOR, False),  # another role, the plain mark
    ("SELECT 1\n/* pgconsole 0123456789abcdef */", MONITOR, MONITOR, False),  # another installation's
    ("SELECT 1", MONITOR, MONITOR, False),  # an application sharing the role
    (f"{own_mark()} SELECT 1", MONITOR, MONITOR, False),  # not at the end
    (None, MONITOR, MONITOR, False),  # no text
    (f"SELECT 1\n{own_mark()}", MONITOR, None, False),  # the monitoring role not known
]


@pytest.mark.django_db
def test_python_and_sql_agree_on_which_are_the_consoles_own():
    org = Organization.objects.create(name="own-marks")
    known = Server.objects.create(organization=org, name="known-role", host="db1.example", database="app")
    unknown = Server.objects.create(organization=org, name="unknown-role", host="db2.example", database="app")
    ServerState.objects.create(server=known, taken_at=datetime.now(UTC), role_oid=MONITOR)
    ServerState.objects.create(server=unknown, taken_at=datetime.now(UTC), role_oid=None)
    for text, userid, role_oid, expected in CASES:
        assert is_own(text, userid=userid, role_oid=role_oid) is expected, (text, userid, role_oid)
        server = known if role_oid is not None else unknown
        query = sql.SQL("SELECT {} FROM (VALUES (%s::text, %s::int8)) AS st(query, userid)").format(own_sql(server.pk))
        with connection.cursor() as cur:
            cur.execute(query.as_string(connection.connection), [text, userid])
            assert cur.fetchone()[0] is expected, (text, userid, role_oid)
