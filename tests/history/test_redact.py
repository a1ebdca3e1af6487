"""redact: passwords out of query texts whatever quoting hides them, the rest verbatim, in linear time."""

import time

import pytest

from history.redact import redact

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
