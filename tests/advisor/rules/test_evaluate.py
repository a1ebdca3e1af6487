"""The whole catalogue at once (advisor.rules.evaluate): ordered by severity, one recommendation per change with
every reason in it."""

from __future__ import annotations

from advisor import sources
from advisor.evidence import Settings, StatementFact
from advisor.rules import (
    evaluate,
    r3_sample_rate,
)
from advisor.thresholds import Thresholds
from tests.advisor.rules.evidence import assert_sane, ev, gids


def test_evaluate_orders_and_dedups() -> None:
    e = ev(
        settings=Settings(max=100, save=False),
        dealloc_per_s={"1h": 50.0, "24h": 40.0, "7d": 30.0},
        statements=gids(30),
        version=15,
        cpu_count=8,
        hottest_calls_per_s=100,
    )
    recs = evaluate(e)
    assert recs[0].severity == "critical" and recs[0].rule == "pgss_max"
    assert len({r.key for r in recs}) == len(recs)
    assert {r.rule for r in recs} >= {"pgss_max", "churn_family", "scope", "track_planning"}
    assert_sane(recs)
    assert evaluate(ev(settings=Settings(track_planning=True))) == []


def test_one_recommendation_per_change_with_every_reason() -> None:
    # On 15, 2PC GIDs and savepoint names both ask for track_utility = off: one card, both reasons, both sources.
    sts = gids(30) + tuple(StatementFact(queryid=1000 + i, query=f"SAVEPOINT sp_{i}") for i in range(25))
    recs = [r for r in evaluate(ev(version=15, statements=sts)) if r.rule == "churn_family"]
    (r,) = recs
    assert r.change and r.change.text == "ALTER SYSTEM SET pg_stat_statements.track_utility = off;"
    assert "30 entries" in r.explanation and "Also (25 entries differ only by savepoint name): 25 entries" in (
        r.explanation
    )
    assert sources.HACKERS_COMMIT_PREPARED in r.references and sources.PG17_RELEASE_NOTES in r.references
    assert len(r.references) == len(set(r.references))
    assert_sane(recs)
    # Different changes stay apart: IN lists (a client change) next to the GIDs.
    in_lists = tuple(
        StatementFact(queryid=2000 + i, query=f"SELECT 1 FROM t WHERE id IN ({', '.join(['$1'] * (i + 1))})")
        for i in range(25)
    )
    found = evaluate(ev(version=15, statements=gids(30) + in_lists))
    kinds = {r.subject.split(":")[1] for r in found if r.rule == "churn_family"}
    assert kinds >= {"gid", "in_list"}
    # Near the spinlock cliff with no sample_rate on this release: track_planning's rule and sample_rate's
    # ("turn track_planning off instead") ask for the same line, at the same severity. The rule about the
    # setting leads the one card; sample_rate's reason is in it.
    near = ev(settings=Settings(track_planning=True), cpu_count=8, hottest_calls_per_s=9000.0)
    busy = evaluate(near)
    off = [r for r in busy if r.change and "track_planning = off" in r.change.text]
    assert [(r.rule, r.subject) for r in off] == [("track_planning", "server")]
    (reason,) = r3_sample_rate.check(near, Thresholds())
    assert off[0].explanation.endswith(f" Also ({reason.title}): {reason.explanation}")
    assert not [r for r in busy if r.rule == "sample_rate" and r.change]
    assert_sane(busy)
