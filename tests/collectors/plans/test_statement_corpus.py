"""collectors/plans/statement.py against PostgreSQL's own lexer, on every major: a corpus of quoting forms (E'' and
U&'' strings, `$` and non-ASCII in names, dollar-quote tags, `\\r`, `\\v`, nested comments, continued strings, bit
strings, numbers touching strings) and attacks, each also sent to the server in one Parse message, which says
what PostgreSQL made of it: one statement, several, a text cut inside a literal, or another syntax error. Under
the console's own session (standard_conforming_strings on) the two readings agree; with it off, a text the console
would explain reads the same, and every text that would read otherwise is refused as ambiguous.

Cases marked "strings.sql" are from PostgreSQL's regression tests (src/test/regress/sql/strings.sql)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq

from collectors.plans.statement import Explainable, NotExplainable, classify

MAJORS = (13, 14, 15, 16, 17, 18)

CORPUS = [
    # The attack of finding H1: `x$e` is one name, so `'\'` is a plain string and the rest is a second statement.
    "SELECT x$e'\\' ; COMMIT; SET default_transaction_read_only = off; COMMIT; CREATE TABLE loot AS SELECT 1; "
    "SELECT 1 -- '",
    "SELECT 'a\\'' ; CREATE ROLE injected; SELECT 1 -- '",  # written under standard_conforming_strings off
    "SELECT e'\\'' ; SELECT 1 -- '",
    "SELECT E'\\'' AS one",
    "SELECT é'\\' ; SELECT 1 -- '",  # a non-ASCII name before the quote: a plain string follows
    "SELECT ée'\\' ; SELECT 1 -- '",
    "SELECT 1e'\\'' ; SELECT 2 -- '",  # 13 and 14: 1 then an escape string; 15 on: trailing junk
    "SELECT $1e'\\'' ; SELECT 2 -- '",
    "SELECT 1.e'x'",
    "SELECT .5e'x'",
    "SELECT b'01''1'",  # a bit string takes no doubled quote: the second quote opens a plain string
    "SELECT x'1F' AS hex, n'nat' AS nat, B'1' AS bits",
    "SELECT U&'d\\0061t\\+000061' AS U&\"d\\0061t\\+000061\"",  # strings.sql
    "SELECT U&'d!0061t\\+000061' UESCAPE '!' AS U&\"d*0061t\\+000061\" UESCAPE '*'",  # strings.sql
    "SELECT U&'a\\' ; SELECT 1 --'",
    "SELECT 'first line'\n' - next line'\n\t' - third line'\n\tAS \"Three lines to one\"",  # strings.sql
    "SELECT 'first line'\n' - next line' /* this comment is not allowed here */\n' - third line'\n"
    '\tAS "Illegal comment within continuation"',  # strings.sql
    "SELECT E'a'\n'b\\'' ; SELECT 1 -- '",  # a continued escape string stays one
    "SELECT E'a' -- a comment before the newline\n'b\\'' ; SELECT 1 -- '",
    "SELECT E'a'\r'b\\'' ; SELECT 1 -- '",
    "SELECT E'a' '\\'' ; SELECT 1 -- '",  # no newline: not continued, the second is a plain string
    "SELECT E'a'\n\v'b\\'' ; SELECT 1 -- '",  # \v: a blank from 17
    "SELECT\v1",
    "SELECT 'a'\v\n'b'",
    "SELECT 1 -- a comment ended by a carriage return\rSELECT 2",
    "SELECT 1 -- a comment ended by a carriage return\r; SELECT 2",
    "SELECT 1 /* outer /* inner */ still a comment; SELECT 2 */",
    "SELECT 1 /* outer /* inner */ closed */ ; SELECT 2",
    "SELECT 1 /*/ not closed */",
    "SELECT 1 /* a * / b **/",
    "SELECT 1 +/* a comment inside an operator */ 2",
    "SELECT 1 --- three dashes\n",
    "SELECT $$a ; b$$, $tag$ $$ ; $tag$, $a$ $ab$ ; $a$",
    "SELECT $a$b$ ; SELECT 1 -- $a$",
    "SELECT a$$b$$ FROM (SELECT 1 AS a$$b$$) s",  # `$` inside a name opens no dollar quote
    "SELECT $1, $2::int, a$1",
    "SELECT $é$ ; $é$",
    "SELECT $_1$ ; $_1$",
    'SELECT "a;b" FROM (SELECT 1 AS "a;b") s; ',
    'SELECT "a""b" ; SELECT 1',
    'SELECT U&"a\\0020b" FROM (SELECT 1 AS "a b") s',
    "SELECT 'it''s' ; ",
    "SELECT 'cut",
    'SELECT "cut',
    "SELECT $$cut",
    "SELECT 1 /* cut",
    "SELECT E'cut\\'",
    "SELECT 'a\\bcd' AS f1, 'a\\b''cd' AS f2, 'abcd\\'   AS f4",  # strings.sql, written for standard strings
    "SELECT 'a\\\\bcd' AS f1, 'a\\\\b\\'cd' AS f2, 'abcd\\\\'   AS f4",  # strings.sql, for standard strings off
    "SELECT regexp_matches('foobarbequebaz', $re$(bar)(beque)$re$)",  # strings.sql
    "SELECT regexp_replace('1112223333', E'(\\\\d{3})(\\\\d{3})(\\\\d{4})', E'(\\\\1) \\\\2-\\\\3')",  # strings.sql
    "WITH t AS (SELECT 1) SELECT * FROM t ; ; ",
    "SELECT 1;;",
    "SELECT 1; -- only a comment after\n/* and another */",
    "SELECT 1 ; SELECT 2",
    "(SELECT 1) UNION (SELECT 2)",
    "",
    "   -- nothing but a comment",
]


def _server(conn: psycopg.Connection, text: str) -> tuple[str, int]:
    """What PostgreSQL makes of `text` in one Parse message: one | several | unterminated | syntax, and the number
    of parameters of the one statement."""
    result = conn.pgconn.prepare(b"", text.encode())
    if result.status != pq.ExecStatus.FATAL_ERROR:
        described = conn.pgconn.describe_prepared(b"")
        return "one", described.nparams
    state = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
    message = (result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode()
    if state != "42601":  # not a syntax error: one statement, which parse analysis refused
        return "one", -1
    if message.startswith("cannot insert multiple commands"):
        return "several", -1
    if message.startswith("unterminated"):
        return "unterminated", -1
    return "syntax", -1


def _ours(found: Explainable | NotExplainable) -> str:
    if isinstance(found, Explainable):
        return "one"
    return {"utility": "one", "empty": "one", "version": "one"}.get(found.code, found.code)


@pytest.mark.parametrize("major", MAJORS)
def test_the_console_reads_every_text_as_the_servers_lexer_does(pg_clusters, major):
    version, disagreements = major * 10000, []
    with (
        psycopg.connect(pg_clusters[major].dsn(), options="-c standard_conforming_strings=on") as standard,
        psycopg.connect(pg_clusters[major].dsn(), options="-c standard_conforming_strings=off") as escaping,
    ):
        for text in CORPUS:
            found = classify(text, version)
            ours = _ours(found)
            server, parameters = _server(standard, text)
            if ours == "ambiguous":
                continue  # refused; what the server makes of it depends on a setting the text does not carry
            # The grammar pulls tokens as it goes: a syntax error before the end hides a literal cut after it.
            agreed = {
                "one": server in ("one", "syntax"),
                "several": server in ("several", "syntax"),
                "unterminated": server in ("unterminated", "syntax"),
            }[ours] and not (server in ("several", "unterminated") and ours != server)
            if not agreed:
                disagreements.append((text, found, server))
            if isinstance(found, Explainable) and parameters >= 0 and found.parameters != parameters:
                disagreements.append((text, f"{found.parameters} parameters", f"{parameters} to the server"))
            if ours == "one" and _server(escaping, text)[0] != server:
                disagreements.append((text, found, "another reading with standard_conforming_strings off"))
    assert disagreements == [], "\n".join(map(repr, disagreements))


def test_the_corpus_holds_each_verdict_and_the_attacks_are_refused():
    verdicts = {_ours(classify(text, 170000)) for text in CORPUS}
    assert verdicts == {"one", "several", "unterminated", "ambiguous"}
    attacks = [text for text in CORPUS if "; SELECT 1 -- '" in text or "CREATE" in text]
    assert len(attacks) >= 8
    assert [text for text in attacks if isinstance(classify(text, 170000), Explainable)] == []
