"""redact: passwords out of query texts whatever quoting hides them, the rest verbatim, in linear time; a text whose
redaction takes longer than its budget cut after what was redacted."""

import functools
import math
import re
import time

import pytest

from collectors import redact as redact_module
from collectors.redact import redact

SECRET = "s3cr3t"


@pytest.mark.parametrize(
    "text, expected",
    [
        # What it covered before, kept.
        ("CREATE ROLE victim LOGIN PASSWORD 's3cr3t'", "CREATE ROLE victim LOGIN PASSWORD '<redacted>'"),
        ("ALTER ROLE r PASSWORD 'it''s3cr3t'", "ALTER ROLE r PASSWORD '<redacted>'"),
        (
            "CREATE USER MAPPING FOR u SERVER s OPTIONS (user 'bob', password 's3cr3t')",
            "CREATE USER MAPPING FOR u SERVER s OPTIONS (user 'bob', password '<redacted>')",
        ),
        (
            "SELECT dblink_connect('host=db password=s3cr3t dbname=app')",
            "SELECT dblink_connect('host=db password=<redacted> dbname=app')",
        ),
        (
            "SELECT dblink('postgresql://bob:s3cr3t@db:5432/app', 'SELECT 1')",
            "SELECT dblink('postgresql://bob:<redacted>@db:5432/app', 'SELECT 1')",
        ),
        # ENCRYPTED PASSWORD, and the literal after it (VALID UNTIL) left alone.
        (
            "CREATE ROLE r ENCRYPTED PASSWORD 's3cr3t' VALID UNTIL '2030-01-01'",
            "CREATE ROLE r ENCRYPTED PASSWORD '<redacted>' VALID UNTIL '2030-01-01'",
        ),
        ("create role r encrypted password's3cr3t'", "create role r encrypted password'<redacted>'"),
        ("ALTER ROLE r PASSWORD /* why */ 's3cr3t'", "ALTER ROLE r PASSWORD /* why */ '<redacted>'"),
        # Dollar quoting, with or without a tag; a quote or a shorter tag inside does not end it.
        ("ALTER ROLE r PASSWORD $$s3cr3t$$ LOGIN", "ALTER ROLE r PASSWORD '<redacted>' LOGIN"),
        ("ALTER ROLE r PASSWORD $pw$s3'cr$$3t$pw$ LOGIN", "ALTER ROLE r PASSWORD '<redacted>' LOGIN"),
        ("ALTER ROLE r PASSWORD $é$s3cr3t$é$", "ALTER ROLE r PASSWORD '<redacted>'"),
        # Escape strings: \' and '' inside do not end them.
        ("ALTER ROLE r PASSWORD E's3\\'cr''3t' LOGIN", "ALTER ROLE r PASSWORD '<redacted>' LOGIN"),
        ("ALTER ROLE r PASSWORD e's3cr3t\\\\' LOGIN", "ALTER ROLE r PASSWORD '<redacted>' LOGIN"),
        ("ALTER ROLE r PASSWORD U&'s3cr\\0033t'", "ALTER ROLE r PASSWORD '<redacted>'"),
        # Custom settings and assignments holding a password.
        ("SET app.password = 's3cr3t'", "SET app.password = '<redacted>'"),
        ("ALTER ROLE r SET app.db_password TO 's3cr3t'", "ALTER ROLE r SET app.db_password TO '<redacted>'"),
        ("COPY t FROM PROGRAM 'PGPASSWORD=s3cr3t psql -c x'", "COPY t FROM PROGRAM 'PGPASSWORD=<redacted> psql -c x'"),
        # Passwords on command lines quoted (their quotes stay), after a quoted argument, or given as --user=.
        (
            "COPY t FROM PROGRAM 'sshpass -p ''s3cr3t'' ssh h true'",
            "COPY t FROM PROGRAM 'sshpass -p ''<redacted>'' ssh h true'",
        ),
        ('/* sshpass -p "s3cr3t" scp x h: */ SELECT 1', '/* sshpass -p "<redacted>" scp x h: */ SELECT 1'),
        ("COPY t TO PROGRAM 'mysql -u r -p\"s3cr3t\" app'", "COPY t TO PROGRAM 'mysql -u r -p\"<redacted>\" app'"),
        (
            "COPY t TO PROGRAM 'mysqldump -u r -p''s3cr3t'' app'",
            "COPY t TO PROGRAM 'mysqldump -u r -p''<redacted>'' app'",
        ),
        (
            "COPY t TO PROGRAM 'mysql -e ''SELECT 1'' -ps3cr3t app'",
            "COPY t TO PROGRAM 'mysql -e ''SELECT 1'' -p<redacted> app'",
        ),
        (  # a mysql inside an argument starts the command again
            "COPY t TO PROGRAM '/usr/bin/mysql --defaults-file=/etc/mysql/my.cnf -ps3cr3t app'",
            "COPY t TO PROGRAM '/usr/bin/mysql --defaults-file=/etc/mysql/my.cnf -p<redacted> app'",
        ),
        (
            "COPY t TO PROGRAM 'curl --user=bob:s3cr3t https://h'",
            "COPY t TO PROGRAM 'curl --user=bob:<redacted> https://h'",
        ),
        (
            "COPY t TO PROGRAM 'curl --user \"bob:s3 cr3t\" https://h'",
            "COPY t TO PROGRAM 'curl --user \"bob:<redacted>\" https://h'",
        ),
        (
            "COPY t TO PROGRAM 'curl -u ''bob:s3 cr3t'' https://h'",
            "COPY t TO PROGRAM 'curl -u ''bob:<redacted>'' https://h'",
        ),
        (
            "COPY t TO PROGRAM 'curl -u''bob:s3cr3t'' https://h'",
            "COPY t TO PROGRAM 'curl -u''bob:<redacted>'' https://h'",
        ),
        # Comments nest, as PostgreSQL reads them: a quote in an inner one opens no string.
        (
            "ALTER ROLE r /* a /* it's */ b */ PASSWORD 's3cr3t'",
            "ALTER ROLE r /* a /* it's */ b */ PASSWORD '<redacted>'",
        ),
        (
            "ALTER ROLE r /* a /* b */ it's */ PASSWORD 's3cr3t'",
            "ALTER ROLE r /* a /* b */ it's */ PASSWORD '<redacted>'",
        ),
    ],
)
def test_redacts(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # A quote inside a comment, an identifier or an escape string must not shift what is a string.
        "SELECT 'it''s', 1; ALTER ROLE r PASSWORD 's3cr3t'",
        "SELECT E'it\\'s', 1; ALTER ROLE r PASSWORD 's3cr3t'",
        "-- it's\nALTER ROLE r PASSWORD 's3cr3t'",
        "/* it's */ ALTER ROLE r PASSWORD 's3cr3t'",
        "SELECT \"it's\" FROM t; ALTER ROLE r PASSWORD 's3cr3t'",
        "SELECT $$it's$$; ALTER ROLE r PASSWORD 's3cr3t'",
        "SELECT a$b$c FROM t; ALTER ROLE r PASSWORD 's3cr3t'",  # $b$ inside an identifier is no tag
        # SQL inside a literal inside a literal.
        "SELECT dblink_exec('ALTER ROLE r PASSWORD ''s3cr3t''')",
        "DO $$BEGIN EXECUTE 'ALTER ROLE r PASSWORD ''s3cr3t'''; END$$",
        "DO $do$BEGIN EXECUTE E'ALTER ROLE r PASSWORD \\'s3cr3t\\''; END$do$",
        "DO $$BEGIN PERFORM dblink_exec('host=h password=s3cr3t', 'SELECT 1'); END$$",
        "SELECT dblink_connect('host=h password=''s3 cr3t'' dbname=app')",
        # Unterminated: the rest of the text is the secret.
        "ALTER ROLE r PASSWORD 's3cr3t",
        "ALTER ROLE r PASSWORD E's3cr3t\\'",
        "ALTER ROLE r PASSWORD $$s3cr3t",
        "ALTER ROLE r PASSWORD $x$s3cr3t$$",
        "/* never closed ALTER ROLE r PASSWORD 's3cr3t'",
        "-- ALTER ROLE r PASSWORD 's3cr3t'",
        # Nested comments, in a literal too, and one never closed.
        "/* a /* b */ it's */ ALTER ROLE r PASSWORD 's3cr3t'",
        "SELECT dblink_exec('ALTER ROLE r /* a /* b */ it''s */ PASSWORD ''s3cr3t''')",
        "/* a /* never closed */ it's ALTER ROLE r PASSWORD 's3cr3t'",
        # Quoted passwords on command lines in every quoting of the SQL around them, and quotes left open.
        "COPY t FROM PROGRAM E'sshpass -p \\'s3cr3t\\' ssh h'",
        "DO $$BEGIN EXECUTE 'COPY t FROM PROGRAM ''sshpass -p ''''s3cr3t'''' ssh h'''; END$$",
        "COPY t FROM PROGRAM $p$mysql -u r -p's3 cr3t' app$p$",
        'COPY t FROM PROGRAM \'curl -u "bob:s3\\"cr3t" https://h\'',
        "COPY t FROM PROGRAM 'sshpass -p ''s3cr3t",
        "COPY t FROM PROGRAM 'sshpass -p \"s3 cr3t",
        "/* mysql -u r -p's3cr3t */ SELECT 1",
    ],
)
def test_hostile_quoting_never_shows_the_secret(text):
    out = redact(text)
    assert SECRET not in out and "cr3t" not in out, out
    assert "<redacted>" in out


@pytest.mark.parametrize(
    "text",
    [
        "SELECT $1, $2 FROM t WHERE a = $3",
        "CREATE ROLE r PASSWORD $1",  # normalized by PostgreSQL 16+: nothing to redact
        "SELECT 'it''s', E'a\\'b\\n', $$x$$, $t$y$t$, \"q\"\"r\" /* c */ -- d",
        "SELECT '<script>alert(1)</script>' AS x",
        "SELECT password FROM users WHERE id = $1",
        "SELECT 'password' AS label, 'https://example.com/a' AS url",
        "ALTER ROLE r PASSWORD NULL",
        "",
        "SELECT password /* a /* it's */ b */ FROM t",
        "COPY t TO PROGRAM 'mysql -u r -p app'",  # -p alone: mysql asks for the password
        "COPY t TO PROGRAM 'curl -u bob https://h'",
        "COPY t TO PROGRAM 'sshpass -p ''<redacted>'' ssh h'",  # redacted already (by an older version): as it is
    ],
)
def test_leaves_everything_else_verbatim(text):
    assert redact(text) == text


def test_redacts_every_occurrence():
    text = "; ".join(f"ALTER ROLE r{i} PASSWORD 's3cr3t{i}'" for i in range(50))
    out = redact(text)
    assert SECRET not in out and out.count("'<redacted>'") == 50


def _spread(unit: str):
    return lambda n: unit * (n // len(unit))


# Inputs built to make a backtracking regex go quadratic; each holds "password" (or "://") so the
# whole scanner runs, not just the early exit.
HOSTILE = {
    "unterminated quotes": lambda n: "ALTER ROLE r PASSWORD " + "'" * n,
    "repeated PASSWORD '": _spread("PASSWORD '"),
    "repeated PASSWORD E'\\": _spread("PASSWORD E'\\"),
    "repeated PASSWORD $$": _spread("PASSWORD $$"),
    "E' runs": lambda n: "password " + "E'" * (n // 2),
    "backslashes in E''": lambda n: "password E'" + "\\" * n,
    "dollar signs": lambda n: "password " + "$" * n,
    "near-miss tags": lambda n: "password $abcdef$" + "$abcde" * (n // 6),
    "comment openers": lambda n: "password " + "/*" * (n // 2),
    "dashes": lambda n: "password " + "-" * n,
    "quoted identifiers": lambda n: 'password "' + '""' * (n // 2),
    "conninfo values": lambda n: "'" + "password=" * (n // 9) + "'",
    "conninfo quotes": lambda n: "$$" + "password='\\" * (n // 11) + "$$",
    "URI scheme runs": lambda n: "'password " + "a." * (n // 2) + "'",
    "URI users": lambda n: "'" + "a://u:" * (n // 6) + "'",
    "nested quotes": lambda n: "'password " + "''" * (n // 2) + "'",
}


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("name", HOSTILE)
def test_time_grows_linearly(name):
    make = HOSTILE[name]
    small, large = _seconds(make(10_000)), _seconds(make(40_000))
    # 4x the input: about 4x the time when linear, 16x when quadratic.
    assert large < 8 * small + 0.02, f"{name}: {small * 1000:.1f} ms -> {large * 1000:.1f} ms"


def test_a_very_long_text_is_redacted_in_bounded_time():
    noise = "SELECT 'it''s', E'a\\'b', $t$ $ $t$, \"x\"\"y\" /* '' */ -- '\n"
    text = noise * (1_000_000 // len(noise)) + "ALTER ROLE r PASSWORD 's3cr3t'"
    started = time.perf_counter()
    out = redact(text)
    assert time.perf_counter() - started < 10
    assert out.endswith("PASSWORD '<redacted>'") and SECRET not in out
    assert out[: -len("'<redacted>'")] == text[: -len("'s3cr3t'")]


# A redaction past its budget: the note that ends what it kept.
CUT_NOTE = re.compile(r"/\* pgconsole: the rest of this text was cut: redacting it took longer than (\d+) ms \*/\Z")
STATEMENTS = "".join(f"ALTER ROLE r{i} PASSWORD 's3cr3t{i}'; SELECT 'it''s' /* {i} */;\n" for i in range(4_000))


@functools.cache
def _whole(strict: bool) -> str:
    return redact(STATEMENTS, strict=strict, budget_s=math.inf)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("budget_s", [0.001, 0.005, 0.02])
def test_a_text_past_its_budget_keeps_only_what_was_redacted(budget_s, strict):
    """Cut where the reading stood when its time was up: what is kept is the redacted text's beginning, as the whole
    redaction shows it, then the note. Never a secret, nor a character that was not redacted."""
    out = redact(STATEMENTS, strict=strict, budget_s=budget_s)
    note = CUT_NOTE.search(out)
    assert note and note.group(1) == f"{budget_s * 1000:.0f}", out[-200:]
    kept = out[: note.start()].removesuffix("\n")
    assert kept and _whole(strict).startswith(kept) and len(kept) < len(_whole(strict))
    assert SECRET not in out


@pytest.mark.parametrize("strict", [False, True])
def test_no_budget_at_all_keeps_nothing_but_the_note(strict):
    out = redact("ALTER ROLE r PASSWORD 's3cr3t'", strict=strict, budget_s=0)
    assert out == "/* pgconsole: the rest of this text was cut: redacting it took longer than 0 ms */"


def test_a_literal_whose_redaction_runs_out_of_time_is_dropped_whole():
    """A DO body is one token: cut while its content is read, none of it is kept, not even what of it was redacted."""
    body = "EXECUTE 'ALTER ROLE r PASSWORD ''s3cr3t'''; " * 20_000
    out = redact(f"DO $$BEGIN {body}END$$", budget_s=0.005)
    assert out == "DO \n/* pgconsole: the rest of this text was cut: redacting it took longer than 5 ms */"


def test_the_budget_is_the_setting_for_each_64_kib_of_text(settings, monkeypatch):
    settings.COLLECTOR = {**settings.COLLECTOR, "REDACT_BUDGET_MS": 0}
    assert CUT_NOTE.fullmatch(redact("ALTER ROLE r PASSWORD 's3cr3t'"))
    assert redact("SELECT 1") == "SELECT 1"  # nothing that may hold a secret, nothing timed

    settings.COLLECTOR = {**settings.COLLECTOR, "REDACT_BUDGET_MS": 200}
    budgets = []
    clock = redact_module._Clock
    monkeypatch.setattr(redact_module, "_Clock", lambda budget_s: budgets.append(budget_s) or clock(budget_s))
    for size in (10, 65_536, 4 * 65_536):
        redact("password " + "x" * (size - 9))
    assert budgets == [0.2, 0.2, 0.8]  # at least once, then in proportion: a redaction in linear time fits any size


def test_finding_h4s_text_is_redacted_whole_within_the_default_budget():
    """DO ... set_config('<32 KB>', 'b'||'b'||...): 29.6 s of CPU when the first argument was searched again at each
    'b', a tenth of a second now, a tenth of the default budget."""
    chain = "||".join(["'b'"] * 6_500)
    text = f"DO $$ BEGIN IF false THEN PERFORM set_config('{'a' * 32_768}', {chain}); END IF; END $$"
    assert redact(text) == text
