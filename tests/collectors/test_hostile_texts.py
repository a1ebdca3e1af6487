"""A real server holding query texts written against the console's regular expressions, collected and advised as
production does (server_collect, server_advise), beside the same server holding benign texts of the same
lengths: the hostile ones cost about what the benign ones cost. Found from outside: 80 such statements took 78 s to
collect against 3.3 s, and 60 s to advise against 1.4 s (a comment of eyJ- repeated against the redaction's JSON
Web Token pattern, an alias tmp111…1a against the family rule's temp-name pattern, a name full of /* against
its comment pattern). A ratio in one run, not an absolute time."""

from __future__ import annotations

import time

import pytest

from advisor.services import server_advise
from history.models import Statement
from tests.conftest import APP_DB
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
MAJOR = 15
PER_KIND = 8  # statements of each hostile kind
LENGTH = 24_000  # characters of each text, within COLLECTOR_QUERY_TEXT_MAX_BYTES
RATIO = 4  # hostile against benign, at most (before: ×14 to collect, ×390 to advise, at these lengths)


def _columns(k: int) -> str:
    """A distinct statement per k (pg_stat_statements' query id ignores comments and aliases)."""
    return ", ".join(["1"] * (k + 1))


def _texts(hostile: bool) -> list[str]:
    texts = []
    for k in range(PER_KIND):
        pad = LENGTH
        texts.append(f"SELECT {_columns(k)} /* trace {('eyJ-' if hostile else 'abc-') * (pad // 4)} */")
        texts.append(f"SELECT {_columns(PER_KIND + k)} AS tmp{('1' if hostile else 'x') * pad}a")
        texts.append(f'SELECT {_columns(2 * PER_KIND + k)} AS "{("/*" if hostile else "ab") * (pad // 2)}"')
    return texts


def _seconds(c, texts: list[str]) -> tuple[float, float, int]:
    """(collecting, advising) a server that ran `texts` and nothing else since its statistics were reset; how many
    of the texts were stored."""
    run(c, "SELECT pg_stat_statements_reset()")
    for text in texts:
        run(c, text)
    server = register(c)
    started = time.perf_counter()
    collect(server)  # the baseline: every text read, redacted and stored
    collected = time.perf_counter() - started
    for text in texts:
        run(c, text)
    collect(server)  # calls for the advisor to weigh
    started = time.perf_counter()
    outcome = server_advise(server_id=server.pk)
    advised = time.perf_counter() - started
    assert outcome.error in ("", None), outcome.error
    stored = Statement.objects.filter(server=server, query__startswith="SELECT $1").count()
    return collected, advised, stored


def test_texts_written_against_the_patterns_cost_what_benign_ones_cost(pg_clusters):
    c = pg_clusters[MAJOR]
    run(c, "SELECT 1", dbname=APP_DB)  # warm the path (connections, caches) before timing either
    try:
        benign = _seconds(c, _texts(hostile=False))
        hostile = _seconds(c, _texts(hostile=True))
    finally:  # the cluster is shared: no later test reads these texts
        run(c, "SELECT pg_stat_statements_reset()")
    assert benign[2] == hostile[2] == 3 * PER_KIND, (benign, hostile)
    assert hostile[0] < RATIO * max(benign[0], 0.05), ("collect", hostile, benign)
    assert hostile[1] < RATIO * max(benign[1], 0.05), ("advise", hostile, benign)
