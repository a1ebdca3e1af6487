"""Advisor rules against constructed evidence: thresholds' edges and the "do not recommend" cases."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlparse

from advisor import sources
from advisor.advice import Advice
from advisor.evidence import Evidence, Settings, StatementFact
from advisor.rules import (
    evaluate,
    r1_max,
    r2_track_planning,
    r3_sample_rate,
    r4_lwlock,
    r5_families,
    r6_resets,
    r7_planning,
    r8_scope,
)
from advisor.thresholds import Thresholds

TH = Thresholds()
T0 = datetime(2026, 11, 1, tzinfo=UTC)
ALTER = re.compile(
    r"^ALTER SYSTEM SET pg_stat_statements\.(max|track|track_utility|track_planning|save|sample_rate)"
    r" = ('[a-z]+'|on|off|\d+(\.\d+)?);$"
)
GRANT = re.compile(r"^GRANT pg_read_all_stats TO (\w+|\"[^\"]+\");$")


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
        assert ALTER.match(text) or GRANT.match(text), text
        assert len(sqlparse.split(text)) == 1


# Rule 1 ------------------------------------------------------------------------------------------------------
def test_rule1_critical_with_value_and_numbers() -> None:
    e = ev(
        settings=Settings(max=100),
        dealloc_per_s={"1h": 1450.0, "24h": 1400.0, "7d": 1200.0},
        distinct_keys_1d=128,
        distinct_keys_7d=140,
    )
    recs = r1_max.check(e, TH)
    crit = [r for r in recs if r.subject == "server"]
    assert crit[0].severity == "critical"
    assert "1200.0/s" in crit[0].explanation
    assert crit[0].change and crit[0].change.text == "ALTER SYSTEM SET pg_stat_statements.max = 5000;"
    assert crit[0].change.apply == "restart"
    assert "MB of shared memory" in crit[0].cost
    # max = 100 is below the default: said in the raise, not as a second recommendation with the same change.
    assert [r.subject for r in recs] == ["server"] and "never lower it" in crit[0].explanation
    assert_sane(recs)


def test_rule1_below_default_on_its_own_when_nothing_is_evicted() -> None:
    (r,) = r1_max.check(ev(settings=Settings(max=1000), dealloc_per_s={"1h": 0.0, "24h": 0.0, "7d": 0.0}), TH)
    assert r.subject == "below-default" and r.severity == "warning" and "never lower it" in r.explanation
    assert r.change and r.change.text == "ALTER SYSTEM SET pg_stat_statements.max = 5000;"
    assert r1_max.check(ev(settings=Settings(max=5000), dealloc_per_s={"1h": 0.0, "24h": 0.0, "7d": 0.0}), TH) == []


@pytest.mark.parametrize(
    ("rate", "severity"), [(10.0, "warning"), (10.01, "critical"), (0.01, "warning"), (0.009, None), (0.0, None)]
)
def test_rule1_edges(rate: float, severity: str | None) -> None:
    recs = r1_max.check(ev(dealloc_per_s={"1h": rate, "24h": rate, "7d": rate}), TH)
    assert [r.severity for r in recs] == ([severity] if severity else [])


def test_rule1_burst_not_sustained_is_not_critical() -> None:
    recs = r1_max.check(ev(dealloc_per_s={"1h": 500.0, "24h": 2.0, "7d": 0.5}), TH)
    assert [r.severity for r in recs] == ["warning"]


def test_rule1_value_from_week_with_headroom_rounded() -> None:
    e = ev(settings=Settings(max=5000), distinct_keys_1d=6000, distinct_keys_7d=11_200)
    assert r1_max.recommended_max(e, TH) == 25_000  # 11,200 × 2 = 22,400 → 25,000
    assert r1_max.recommended_max(ev(distinct_keys_1d=10), TH) == 5000  # never below the default


def test_rule1_pg13_infers_eviction() -> None:
    e = ev(version=13, settings=Settings(max=5000), entries_peak=4990, keys_disappeared_1d=300)
    assert [r.severity for r in r1_max.check(e, TH)] == ["warning"]
    assert r1_max.check(ev(version=13, entries_peak=4000, keys_disappeared_1d=300), TH) == []
    assert r1_max.check(ev(version=13, entries_peak=4990, keys_disappeared_1d=0), TH) == []


def test_rule1_nothing_at_default_without_dealloc() -> None:
    assert r1_max.check(ev(dealloc_per_s={"1h": 0.0, "24h": 0.0, "7d": 0.0}), TH) == []


# Rule 2 ------------------------------------------------------------------------------------------------------
def test_rule2_off_far_from_cliff_recommends_on() -> None:
    e = ev(cpu_count=192, hottest_calls_per_s=10_000)
    (r,) = r2_track_planning.check(e, TH)
    assert r.change and r.change.text.endswith("track_planning = on;")
    assert "×40.0" in r.explanation and "×20.0" in r.explanation  # 400k/10k and 200k/10k
    assert_sane([r])


def test_rule2_off_near_cliff_keeps_off() -> None:
    (r,) = r2_track_planning.check(ev(cpu_count=192, hottest_calls_per_s=60_000), TH)  # 200k/60k = ×3.3 < 4
    assert r.change is None and "Keep track_planning off" in r.title


def test_rule2_unknown_cpu_says_so() -> None:
    (r,) = r2_track_planning.check(ev(hottest_calls_per_s=60_000), TH)
    assert "unknown" in r.explanation and r.severity == "info"
    (r,) = r2_track_planning.check(ev(hottest_calls_per_s=60_000, sees_all_statements=False), TH)
    assert "partial" in r.explanation


def test_rule2_on_near_cliff_recommends_off_and_on_far_nothing() -> None:
    (r,) = r2_track_planning.check(
        ev(cpu_count=192, hottest_calls_per_s=150_000, settings=Settings(track_planning=True)), TH
    )
    assert r.change and r.change.text.endswith("track_planning = off;")
    assert (
        r2_track_planning.check(
            ev(cpu_count=192, hottest_calls_per_s=50_000, settings=Settings(track_planning=True)), TH
        )
        == []
    )


# Rule 3 ------------------------------------------------------------------------------------------------------
def test_rule3_missing_guc_gives_alternatives_not_a_failing_setting() -> None:
    (r,) = r3_sample_rate.check(ev(spindelay_share=0.4, spindelay_on_hot_statements=True), TH)
    assert "does not exist" in r.explanation
    assert r.change is None  # track_planning already off: no server-side setting to give
    (r,) = r3_sample_rate.check(
        ev(spindelay_share=0.4, spindelay_on_hot_statements=True, settings=Settings(track_planning=True)), TH
    )
    assert r.change and "sample_rate" not in r.change.text and r.change.text.endswith("track_planning = off;")
    assert r3_sample_rate.check(ev(spindelay_share=0.01), TH) == []


def test_rule3_fork_with_contention() -> None:
    (r,) = r3_sample_rate.check(
        ev(settings=Settings(sample_rate=1.0), spindelay_share=0.1, spindelay_on_hot_statements=True), TH
    )
    assert r.change and r.change.text == "ALTER SYSTEM SET pg_stat_statements.sample_rate = 0.5;"
    (r,) = r3_sample_rate.check(
        ev(settings=Settings(sample_rate=1.0), spindelay_share=0.5, spindelay_on_hot_statements=True), TH
    )
    assert r.change and r.change.text.endswith("= 0.25;")
    assert "unrecorded" in r.cost
    assert_sane([r])


def test_rule3_back_to_one_without_contention_and_no_advice_at_one() -> None:
    (r,) = r3_sample_rate.check(ev(settings=Settings(sample_rate=0.5), spindelay_share=0.0), TH)
    assert r.change and r.change.text.endswith("sample_rate = 1;")
    assert r3_sample_rate.check(ev(settings=Settings(sample_rate=1.0), spindelay_share=0.0), TH) == []


# Rule 4 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("share", "sev"), [(0.049, None), (0.05, "warning"), (0.2, "critical"), (None, None)])
def test_rule4_edges(share: float | None, sev: str | None) -> None:
    recs = r4_lwlock.check(ev(lwlock_pgss_share=share, dealloc_per_s={"1h": 30.0}, distinct_keys_1d=9000), TH)
    assert [r.severity for r in recs] == ([sev] if sev else [])
    if sev:
        assert "30.0/s" in recs[0].explanation and "9,000" in recs[0].explanation


# Rule 5 ------------------------------------------------------------------------------------------------------
def gids(n: int) -> tuple[StatementFact, ...]:
    return tuple(StatementFact(queryid=i, query=f"COMMIT PREPARED 'tx-{i}'", calls=1) for i in range(n))


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


# Rule 6 ------------------------------------------------------------------------------------------------------
def test_rule6_resets() -> None:
    assert r6_resets.check(ev(stats_resets=(T0,)), TH) == []
    assert r6_resets.check(ev(stats_resets=(T0, T0 + timedelta(days=8))), TH) == []
    (r,) = r6_resets.check(ev(stats_resets=(T0, T0 + timedelta(days=1), T0 + timedelta(days=2))), TH)
    assert "3 times in 7 days" in r.title


# Rule 7 ------------------------------------------------------------------------------------------------------
def test_rule7_plan_share_and_material_time() -> None:
    heavy = StatementFact(
        queryid=7, query="SELECT ... JOIN ...", calls=100, total_exec_ms=400, total_plan_ms=600, statement_id=42
    )
    edge = StatementFact(queryid=8, query="x", total_exec_ms=500, total_plan_ms=500)  # exactly 50%: not above
    small = StatementFact(queryid=9, query="y", total_exec_ms=1, total_plan_ms=9)  # 10 ms of 100,000: not material
    e = ev(settings=Settings(track_planning=True), server_db_time_ms=100_000, statements=(heavy, edge, small))
    (r,) = r7_planning.check(e, TH)
    assert r.subject == "statement:42" and "60%" in r.title
    assert r7_planning.check(ev(server_db_time_ms=100_000, statements=(heavy,)), TH) == []  # track_planning off


# Rule 8 ------------------------------------------------------------------------------------------------------
def test_rule8_scope_and_partial() -> None:
    assert r8_scope.check(ev(), TH) == []
    recs = r8_scope.check(
        ev(settings=Settings(save=False, track="none"), sees_all_statements=False, monitoring_role="Mon"), TH
    )
    assert {r.subject for r in recs} == {"save", "track", "visibility"}
    assert_sane(recs)
    assert any(r.change and r.change.text == 'GRANT pg_read_all_stats TO "Mon";' for r in recs)


# evaluate ----------------------------------------------------------------------------------------------------
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


# Sources ------------------------------------------------------------------------------------------------------
def test_stored_references_of_earlier_versions_read_as_public_citations() -> None:
    stored = ["seeds/003_e849de0dc9fc603e.txt", sources.TANTOR_URL, "reference/pg_stat_statements.md"]
    assert sources.public(stored) == [sources.TANTOR_SAMPLE_RATE, sources.PGSS_DOCS]
    assert sources.public(["seeds/000_619f50110a6dd62f.txt"]) == [sources.DALIBO_SLOW_COMMIT]
    assert sources.public(["Someone's notes"]) == ["Someone's notes"]  # unknown: kept as it is, never dropped


def test_a_reference_links_only_to_a_web_address() -> None:
    title = 'PostgreSQL documentation, "pg_stat_statements — track statistics of SQL planning and execution"'
    assert sources.link(sources.PGSS_DOCS) == (title, sources.PGSS_DOCS_URL)
    assert sources.link(sources.DALIBO_SLOW_COMMIT) == (sources.DALIBO_SLOW_COMMIT, "")
    assert sources.link("https://example.org/a") == ("https://example.org/a", "https://example.org/a")
    assert sources.link("javascript:alert(1)") == ("javascript:alert(1)", "")
    assert sources.link("see javascript:alert(1)") == ("see javascript:alert(1)", "")
    for citation in sources.CITATIONS:
        text, url = sources.link(citation)
        assert text and not INTERNAL.search(citation), citation
        assert url == "" or url.startswith("https://www.postgresql.org/") or url == sources.TANTOR_URL
