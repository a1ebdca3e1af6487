"""Statements that carry a secret, each one PostgreSQL accepts and pg_stat_statements keeps with its text (on
PostgreSQL 15, which keeps every literal of a utility statement; comments are kept by every version): passwords
in every quoting style, keys passed to pgcrypto, set_config and format(), custom settings holding keys, COPY
... PROGRAM with credentials, foreign-data-wrapper options, tokens in comments and in well-known shapes.

CORPUS: (statement, the secret it holds). Every secret is distinct and holds SECRET_MARK, so that a test can
look for any of them in a page at once. SETUP makes the objects the statements name (database DATABASE)."""

from __future__ import annotations

SECRET_MARK = "Qz7"
DATABASE = "redaction"


def _secret(i: int) -> str:
    return f"{SECRET_MARK}s3cr3t{i:02d}xW"


_QUOTED = [  # how a literal can be written: (opening, closing, how a quote inside is written)
    ("'", "'"),
    ("E'", "'"),
    ("$$", "$$"),
    ("$k$", "$k$"),
]

_NAMED = [  # a secret after a word that names it; {v} is the literal
    "ALTER ROLE redaction_role PASSWORD {v}",
    "ALTER ROLE redaction_role ENCRYPTED PASSWORD {v} VALID UNTIL 'infinity'",
    "ALTER USER MAPPING FOR redaction_role SERVER redaction_any OPTIONS (SET password {v})",
    "ALTER SERVER redaction_any OPTIONS (SET passwd {v})",
    "ALTER SERVER redaction_any OPTIONS (SET aws_secret_access_key {v})",
    "ALTER SERVER redaction_any OPTIONS (SET client_secret {v})",
    "ALTER SERVER redaction_any OPTIONS (SET api_token {v})",
    "SET redaction.api_key = {v}",
    "SET SESSION redaction.secret TO {v}",
    "ALTER ROLE redaction_role SET redaction.db_password = {v}",
    "ALTER DATABASE redaction SET redaction.encryption_key TO {v}",
    "ALTER FUNCTION redaction_f() SET redaction.jwt_key = {v}",
]

_CONTENT = [  # a secret inside a literal, a body or a comment; {s} is the secret
    "DO $$BEGIN PERFORM set_config('redaction.api_key', '{s}', false); END$$",
    "DO $$BEGIN PERFORM pgp_sym_encrypt('data', '{s}'); END$$",
    "DO $$BEGIN PERFORM pgp_sym_decrypt(pgp_sym_encrypt('x', '{s}'), '{s}'); END$$",
    "DO $$BEGIN PERFORM hmac('message', '{s}', 'sha256'); END$$",
    "DO $$BEGIN PERFORM encrypt('data', '{s}', 'aes'); END$$",
    "DO $$BEGIN PERFORM crypt('{s}', gen_salt('md5')); END$$",
    "DO $$BEGIN EXECUTE format('ALTER ROLE %I PASSWORD %L', 'redaction_role', '{s}'); END$$",
    "DO $$BEGIN EXECUTE format('ALTER ROLE redaction_role PASSWORD %L', '{s}'); END$$",
    "DO $$BEGIN EXECUTE 'ALTER ROLE redaction_role PASSWORD ''{s}'''; END$$",
    "DO $do$DECLARE api_key text := '{s}'; BEGIN PERFORM length(api_key); END$do$",
    "DO $$BEGIN IF false THEN PERFORM dblink_connect('host=db1 user=u password={s}'); END IF; END$$",
    "DO $$BEGIN IF false THEN PERFORM dblink('postgresql://u:{s}@db1/app', 'SELECT 1'); END IF; END$$",
    "DO $$BEGIN IF false THEN PERFORM pgp_pub_decrypt(dearmor('-'), dearmor('-'), '{s}'); END IF; END$$",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; PGPASSWORD={s} true'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; AWS_SECRET_ACCESS_KEY={s} true'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true --password={s}'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true -u admin:{s} https://backup.example/upload'",
    "CREATE OR REPLACE FUNCTION redaction_g() RETURNS text LANGUAGE sql "
    "AS $$ SELECT pgp_sym_encrypt('x', '{s}')::text $$",
    "CREATE OR REPLACE FUNCTION redaction_h() RETURNS int LANGUAGE plpgsql "
    "AS $$BEGIN PERFORM set_config('redaction.token', '{s}', true); RETURN 1; END$$",
    "CREATE OR REPLACE VIEW redaction_v AS SELECT hmac('m', '{s}', 'sha1') AS mac",
    "COMMENT ON TABLE redaction_t00 IS 'api_key={s}'",
    "COMMENT ON ROLE redaction_role IS 'password: {s}'",
    "COMMENT ON SERVER redaction_any IS 'postgresql://app:{s}@db1:5432/app'",
    "ALTER SERVER redaction_any OPTIONS (SET url 'https://user:{s}@api.example/v1')",
    "/* api_token={s} */ SELECT * FROM redaction_t01",
    "SELECT * FROM redaction_t02 -- password: {s}",
    "/* Authorization: Bearer {s} */ SELECT * FROM redaction_t03",
    '/* {{"client_secret": "{s}"}} */ SELECT * FROM redaction_t04',
    "-- secret={s}\nSELECT * FROM redaction_t05",
    "/* deploy by ci, token {s} */ SELECT * FROM redaction_t06",
    # Found from outside (issue 35): a Slack webhook (its path is the secret), headers, Azure's connection
    # string, passwords on mysql's and sshpass's command lines.
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl -d x https://hooks.slack.com/services/T00/B00/{s}'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl -H \"Authorization: Basic {s}\" https://backup.example/'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl -H \"X-API-Key: {s}\" https://backup.example/'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true az storage blob upload --connection-string "
    '"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net"\'',
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true mysqldump -u backup -p{s} app'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true sshpass -p {s} scp /tmp/x backup.example:'",
    # Found from outside (finding H4's leftovers): those passwords quoted, or after a quoted argument, curl's
    # --user= and quoted -u / --user, and a password after comments nested with a quote inside (they nest).
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true sshpass -p ''{s}'' scp /tmp/x backup.example:'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true sshpass -p \"{s}\" scp /tmp/y backup.example:'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true mysqldump -u backup -p\"{s}\" app'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true mysqldump -u backup -p''{s}'' app'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true mysql -e ''SELECT 1'' -u backup -p{s} app'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl --user=backup:{s} https://backup.example/upload'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl --user \"backup:x {s}\" https://backup.example/upload'",
    "COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; true curl -u ''backup:x {s}'' https://backup.example/upload'",
    "DO $$BEGIN IF false THEN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''sshpass -p ''''{s}'''' true'''; END IF; END$$",
    "ALTER ROLE redaction_role /* a /* it's */ b */ PASSWORD '{s}'",
    "ALTER ROLE redaction_role /* a /* b */ it's */ PASSWORD '{s}'",
    "/* a /* b */ it's */ SELECT * FROM redaction_t14 -- sshpass -p '{s}' scp",
]

# Shapes that give a credential away wherever it stands (they cannot carry SECRET_MARK in their own format,
# so the mark stands right after them, inside the same word where the shape allows).
_SHAPES = [
    ("/* aws AKIAQZ7SECRET0KEY0ID */ SELECT * FROM redaction_t07", "AKIAQZ7SECRET0KEY0ID"),
    (
        "/* ghp_Qz7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa */ SELECT * FROM redaction_t08",
        "ghp_Qz7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ),
    ("/* xoxb-Qz7000000-slack-token */ SELECT * FROM redaction_t09", "xoxb-Qz7000000-slack-token"),
    ("/* eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJRejcifQ.Qz7signature */ SELECT * FROM redaction_t10", "Qz7signature"),
    (
        "/* -----BEGIN PRIVATE KEY-----\nMIIQz7privatekeymaterial\n-----END PRIVATE KEY----- */ "
        "SELECT * FROM redaction_t11",
        "MIIQz7privatekeymaterial",
    ),
    (  # a Google API key: AIza and 35 more
        "/* https://maps.googleapis.com/maps/api/geocode/json?key=AIzaQz7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa */ "
        "SELECT * FROM redaction_t12",
        "AIzaQz7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ),
    ("/* SG.Qz7aaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbb */ SELECT * FROM redaction_t13", "SG.Qz7aaaaaaaaaaaaa"),
]


def corpus() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for template in _NAMED:
        for opening, closing in _QUOTED:
            secret = _secret(len(out))
            out.append((template.format(v=f"{opening}{secret}{closing}"), secret))
    for template in _CONTENT:
        secret = _secret(len(out))
        out.append((template.format(s=secret), secret))
    out += _SHAPES
    return out


CORPUS = corpus()

SETUP = [
    "DROP ROLE IF EXISTS redaction_role",
    "CREATE ROLE redaction_role",
    "CREATE EXTENSION IF NOT EXISTS pgcrypto",
    "CREATE EXTENSION IF NOT EXISTS dblink",
    "DROP FOREIGN DATA WRAPPER IF EXISTS redaction_fdw CASCADE",
    "CREATE FOREIGN DATA WRAPPER redaction_fdw",  # no validator: it takes any option
    "CREATE SERVER redaction_any FOREIGN DATA WRAPPER redaction_fdw "
    "OPTIONS (passwd 'x', aws_secret_access_key 'x', client_secret 'x', api_token 'x', url 'x')",
    "CREATE USER MAPPING FOR redaction_role SERVER redaction_any OPTIONS (user 'u', password 'x')",
    "CREATE OR REPLACE FUNCTION redaction_f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    *(f"CREATE TABLE IF NOT EXISTS redaction_t{i:02d} (id int)" for i in range(15)),
]
TEARDOWN = ["DROP FOREIGN DATA WRAPPER IF EXISTS redaction_fdw CASCADE", "DROP ROLE IF EXISTS redaction_role"]
