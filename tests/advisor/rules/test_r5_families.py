"""Rule 5 (churn families) against constructed evidence: each kind of family, the releases that normalize it, the
threshold's edge."""

from __future__ import annotations

import pytest

from advisor.evidence import StatementFact
from advisor.rules import r5_families
from tests.advisor.rules.evidence import TH, assert_sane, ev, gids


def test_rule5_gid_family_on_15_not_on_17() -> None:
    (r,) = r5_families.check(ev(version=15, statements=gids(30)), TH)
    assert r.subject == f"family:gid:{r5_families.GID_FAMILY}" and "30 entries" in r.explanation
    assert r.change and r.change.text.endswith("track_utility = off;")
    assert_sane([r])
    assert r5_families.check(ev(version=17, statements=gids(30)), TH) == []


def test_rule5_one_gid_family_for_prepare_and_commit_prepared() -> None:
    both = tuple(
        StatementFact(queryid=k * 100 + i, query=f"{verb} 'tx-{i}'", calls=1)
        for k, verb in enumerate(("PREPARE TRANSACTION", "COMMIT PREPARED"))
        for i in range(12)
    )
    (r,) = r5_families.check(ev(version=16, statements=both), TH)
    assert "24 entries" in r.explanation and r.subject.startswith("family:gid:")


def test_rule5_threshold_edge_and_partial() -> None:
    assert r5_families.check(ev(version=15, statements=gids(19)), TH) == []
    assert len(r5_families.check(ev(version=15, statements=gids(20)), TH)) == 1
    assert r5_families.check(ev(version=15, statements=gids(30), sees_all_statements=False), TH) == []


@pytest.mark.parametrize(
    ("texts", "kind", "flagged_on", "not_on"),
    [
        ([f"SELECT * FROM t WHERE id IN ({', '.join(['$1'] * (i + 1))})" for i in range(25)], "in_list", 17, 18),
        ([f"SAVEPOINT sp_{i}" for i in range(25)], "savepoint", 16, 17),
        ([f"INSERT INTO tmp_load_{i} SELECT 1" for i in range(25)], "temp_table", 17, 18),
        ([f"SET work_mem = '{i}MB'" for i in range(25)], "set", 18, None),
        ([f"/* trace {i} */ VACUUM t" for i in range(25)], "comment", 18, None),
    ],
)
def test_rule5_kinds(texts: list[str], kind: str, flagged_on: int, not_on: int | None) -> None:
    sts = tuple(StatementFact(queryid=i, query=q) for i, q in enumerate(texts))
    recs = r5_families.check(ev(version=flagged_on, statements=sts), TH)
    assert [r.subject.split(":")[1] for r in recs] == [kind]
    if not_on:
        assert r5_families.check(ev(version=not_on, statements=sts), TH) == []
