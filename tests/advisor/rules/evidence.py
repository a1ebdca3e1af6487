"""Constructed evidence for the advisor's rules, and what every recommendation must look like: one well-formed
change of a known shape, public citations only."""

from __future__ import annotations

import re

import sqlparse

from advisor import sources
from advisor.advice import Advice
from advisor.evidence import Evidence, StatementFact
from advisor.thresholds import Thresholds

TH = Thresholds()

ALTER = re.compile(
    r"^ALTER SYSTEM SET pg_stat_statements\.(max|track|track_utility|track_planning|save|sample_rate)"
    r" = ('[a-z]+'|on|off|\d+(\.\d+)?);$"
)

GRANT = re.compile(r"^GRANT pg_read_all_stats TO (\w+|\"[^\"]+\");$")

_NAME = r'([a-z_][a-z0-9_$]*|"([^"]|"")+")'
CREATE_INDEX = re.compile(
    rf"^-- in database {_NAME} \(CREATE INDEX CONCURRENTLY runs outside a transaction block\)\n"
    rf"CREATE INDEX CONCURRENTLY {_NAME} ON {_NAME}\.{_NAME} \({_NAME}(, {_NAME})*\);$"
)
DROP_INDEX = re.compile(
    rf"^-- in database {_NAME} \(DROP INDEX CONCURRENTLY runs outside a transaction block\)\n"
    rf"DROP INDEX CONCURRENTLY {_NAME}\.{_NAME};$"
)


def ev(**kw: object) -> Evidence:
    kw.setdefault("server", "s1")
    kw.setdefault("version", 16)
    return Evidence(**kw)  # type: ignore[arg-type]


INTERNAL = re.compile(r"\bseeds?\b|\.txt\b|reference/|pg_stat_statements\.md", re.I)


def assert_sane(recs: list[Advice]) -> None:
    """Every change is one well-formed statement of a known shape, or a client-side comment; every source is a
    public citation, and no sentence names a file of ours a user cannot open."""
    for r in recs:
        assert r.references and set(r.references) <= set(sources.CITATIONS), r.references
        for text in (r.title, r.explanation, r.effect, r.cost, *r.references):
            assert not INTERNAL.search(text), text
        if r.change is None:
            continue
        text = r.change.text
        if r.change.apply == "client":
            assert text.startswith("--"), text
            continue
        assert ALTER.match(text) or GRANT.match(text) or DROP_INDEX.match(text) or CREATE_INDEX.match(text), text
        assert len(sqlparse.split(text)) == 1


def gids(n: int) -> tuple[StatementFact, ...]:
    return tuple(StatementFact(queryid=i, query=f"COMMIT PREPARED 'tx-{i}'", calls=1) for i in range(n))
