"""The redaction corpus (tests/collectors/redaction_corpus.py) through redact() alone: every secret gone, and in
strict mode no literal nor comment left at all."""

import re

import pytest

from collectors.redact import redact
from tests.collectors.redaction_corpus import CORPUS


def test_the_corpus_is_large_and_every_secret_distinct():
    assert len(CORPUS) >= 60 and len({secret for _, secret in CORPUS}) == len(CORPUS)
    assert all(secret in statement for statement, secret in CORPUS)


@pytest.mark.parametrize(("statement", "secret"), CORPUS, ids=[s[:60] for s, _ in CORPUS])
def test_every_secret_of_the_corpus_is_redacted(statement, secret):
    out = redact(statement)
    assert secret not in out and "<redacted>" in out, out


@pytest.mark.parametrize(("statement", "secret"), CORPUS, ids=[s[:60] for s, _ in CORPUS])
def test_strict_mode_keeps_no_literal_and_no_comment(statement, secret):
    out = redact(statement, strict=True)
    assert secret not in out
    without = out.replace("'<redacted>'", "").replace("/* <redacted> */", "").replace("-- <redacted>", "")
    assert not re.search(r"'|\$\$|\$k\$|\$do\$|/\*|--", without), out
