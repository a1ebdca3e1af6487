"""collectors/plans/statement.py: which texts are explained, decided on the text in one pass."""

import pytest

from collectors.plans.statement import Explainable, NotExplainable, classify

PG16, PG14 = 160004, 140011


@pytest.mark.parametrize(
    "text, kind, parameters",
    [
        ("SELECT * FROM orders WHERE id = $1", "select", 1),
        ("  -- a comment\n/* and /* a nested */ one */ select $2, $10 FROM t", "select", 10),
        ("INSERT INTO t VALUES ($1, $2)", "insert", 2),
        ("UPDATE t SET v = $1 WHERE id = $2;", "update", 2),
        ("DELETE FROM t WHERE id = ANY($1);  -- trailing\n", "delete", 1),
        ("WITH gone AS (DELETE FROM t RETURNING *) SELECT count(*) FROM gone", "with", 0),
        ("VALUES ($1), ($2)", "values", 2),
        ("TABLE t", "table", 0),
        ("((SELECT 1))", "select", 0),
        ("SELECT 'a;b', \"semi;colon\", $$x; DROP TABLE t$$, $tag$ $1 $tag$ FROM t", "select", 0),
        ("SELECT E'it\\'s; $9', 'it''s $8' FROM t WHERE a$1 = $3", "select", 3),
        ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "merge", 0),
    ],
)
def test_explainable_statements_with_their_kind_and_parameters(text, kind, parameters):
    found = classify(text, PG16)
    assert isinstance(found, Explainable) and (found.kind, found.parameters) == (kind, parameters)
    assert not found.text.rstrip().endswith(";")  # a final semicolon is not sent


@pytest.mark.parametrize(
    "text, code",
    [
        ("", "empty"),
        ("  -- only a comment", "empty"),
        ("SELECT 1; DROP TABLE t", "several"),
        ("SELECT 1; COMMIT", "several"),
        ("SELECT 1;; SET default_transaction_read_only = off", "several"),
        ("CREATE INDEX ON t (a)", "utility"),
        ("VACUUM t", "utility"),
        ("EXPLAIN ANALYZE DELETE FROM t", "utility"),
        ("SET search_path = $1", "utility"),
        ("COPY t TO STDOUT", "utility"),
        ("SELECT 'cut at the server", "unterminated"),
        ('SELECT "cut name', "unterminated"),
        ("SELECT $$ never closed", "unterminated"),
        ("SELECT 1 /* never closed", "unterminated"),
    ],
)
def test_what_is_not_explained_gets_its_reason(text, code):
    found = classify(text, PG16)
    assert isinstance(found, NotExplainable) and found.code == code and found.reason


def test_merge_is_explained_from_15():
    assert classify("MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE", PG14).code == "version"


def test_a_second_statement_hidden_behind_quotes_comments_and_dollar_quotes_is_found():
    """Each way a semicolon can hide: the scan leaves each quoting exactly where PostgreSQL's lexer does."""
    for text in (
        "SELECT 'x'''; DROP TABLE t",
        'SELECT "x"""; DROP TABLE t',
        "SELECT $a$ $b$ $a$; DROP TABLE t",
        "SELECT /* /* */ */ 1; DROP TABLE t",
        "SELECT E'\\\\'; DROP TABLE t",
        "SELECT 1 -- x\n; DROP TABLE t",
    ):
        assert classify(text, PG16).code == "several", text
