"""Every SQL change the advisor emits is accepted by a real server of each major it applies to.

Scenarios make every rule with an ALTER SYSTEM change emit it on 13-18; each change is run on a throwaway
cluster of that major (ALTER SYSTEM, reload, restart) and must show up as the recommended value.
"""

from __future__ import annotations

import inspect
import pkgutil
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import import_module

import pytest
import sqlparse

import advisor.rules
from advisor.advice import Advice
from advisor.evidence import Evidence, Settings, StatementFact
from advisor.rules import RULES, evaluate, r3_sample_rate
from advisor.thresholds import Thresholds
from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, start_many, stop_many
from devenv.ports import TEST_ALTER_PORT_BASE
from tests import slots

MAJORS = (13, 14, 15, 16, 17, 18)
SQL_APPLY = ("restart", "reload")
# Rule codes that can emit an ALTER SYSTEM change. Listed by hand: a rule with SQL missing here (or from the
# scenarios below) fails test_every_sql_rule_is_covered instead of being skipped silently.
EXPECTED_SQL_RULES = {"pgss_max", "track_planning", "sample_rate", "churn_family", "scope"}
ALTER_SYSTEM = re.compile(r"^ALTER SYSTEM SET (?P<name>[a-z_.]+) = (?P<value>'[^']*'|[\w.]+);$")
SAMPLE_RATE = "pg_stat_statements.sample_rate"
# The throwaway clusters start in the "bad" state the scenarios describe (in postgresql.conf), so most changes
# have to override a setting, not just confirm a default.
START_SETTINGS = {
    "pg_stat_statements.max": "1000",
    "pg_stat_statements.track": "none",
    "pg_stat_statements.track_utility": "on",
    "pg_stat_statements.track_planning": "off",
    "pg_stat_statements.save": "off",
}
CANNOT_APPLY_YET = "setting could not be applied"  # pg_file_settings' error for a restart-only GUC before restart
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def ev(major: int, **kw: object) -> Evidence:
    """Evidence of one server of `major` with the fields given."""
    return Evidence(server=f"pg{major}", version=major, **kw)  # type: ignore[arg-type]


def statements(template: str, n: int = 25, *, start: int = 1) -> tuple[StatementFact, ...]:
    """`n` statements whose texts differ only where `template` has {n}."""
    return tuple(StatementFact(queryid=start + i, query=template.format(n=i), calls=10) for i in range(n))


def scenarios(major: int) -> dict[str, Evidence]:
    """Evidence that, together, makes every rule with an SQL change emit it on `major`."""
    out: dict[str, Evidence] = {}
    if major >= 14:
        out["max-critical"] = ev(
            major, dealloc_per_s={"1h": 50.0, "24h": 40.0, "7d": 30.0}, distinct_keys_1d=4000, distinct_keys_7d=4800
        )
        out["max-warning"] = ev(
            major, dealloc_per_s={"1h": 0.5, "24h": 0.5, "7d": 0.5}, distinct_keys_1d=5000, distinct_keys_7d=6000
        )
    else:
        out["max-evicted-13"] = ev(
            major, entries_peak=4900, keys_disappeared_1d=300, distinct_keys_1d=4000, distinct_keys_7d=4900
        )
    out["max-below-default"] = ev(major, settings=Settings(max=1000))
    out["planning-on"] = ev(major, settings=Settings(track_planning=False), cpu_count=16, hottest_calls_per_s=100.0)
    out["planning-off"] = ev(major, settings=Settings(track_planning=True), cpu_count=8, hottest_calls_per_s=9000.0)
    # GIDs are normalized from 17 on; SET literals on no release, so track_utility is advised on every major.
    out["families"] = ev(
        major,
        statements=statements("PREPARE TRANSACTION 'gid_{n}'")
        + statements("SET application_name = 'job_{n}'", start=1000),
    )
    out["scope"] = ev(major, settings=Settings(save=False, track="none"))
    return out


def client_scenarios(major: int) -> dict[str, Evidence]:
    """Evidence whose advice is a client-side change (families the server cannot fold, periodic resets)."""
    in_lists = tuple(
        StatementFact(queryid=i, query="SELECT * FROM orders WHERE id IN (" + ", ".join(map(str, range(i))) + ")")
        for i in range(1, 26)
    )
    return {
        "client-families": ev(
            major,
            statements=in_lists
            + statements("CREATE TEMP TABLE tmp_{n} (id int)", start=100)
            + statements("/* trace:{n} */ SELECT 1", start=200),
        ),
        "resets": ev(major, stats_resets=tuple(T0 - timedelta(days=d) for d in (0, 2, 4))),
    }


def recommendations(major: int, built: dict[str, Evidence]) -> list[tuple[str, Advice]]:
    """(scenario, recommendation) for every recommendation that carries a change, as each rule writes it
    (`evaluate` then merges those asking for the same change into one card: each rule's SQL is run here)."""
    th = Thresholds()
    return [(name, r) for name, e in built.items() for rule in RULES for r in rule(e, th) if r.change is not None]


def sql_changes(major: int) -> list[tuple[str, Advice]]:
    """(scenario, recommendation) of every restart/reload change the scenarios of `major` emit."""
    return [(n, r) for n, r in recommendations(major, scenarios(major)) if r.change and r.change.apply in SQL_APPLY]


def parse(text: str) -> tuple[str, str]:
    """(GUC name, value as pg_settings shows it) of one ALTER SYSTEM SET statement."""
    m = ALTER_SYSTEM.match(text)
    assert m, f"not an ALTER SYSTEM SET of the expected shape: {text!r}"
    return m["name"], m["value"].strip("'")


def rounds(texts: set[str]) -> list[list[str]]:
    """Split statements into rounds in which each GUC is set to one value only."""
    out: list[list[str]] = []
    for text in sorted(texts):
        name = parse(text)[0]
        for r in out:
            if all(parse(t)[0] != name for t in r):
                r.append(text)
                break
        else:
            out.append([text])
    return out


def hypothetical_sample_rate() -> list[Advice]:
    """Rule 3 on a server where sample_rate exists (a fork): lower it under contention, back to 1 without."""
    contended = ev(16, settings=Settings(sample_rate=1.0), spindelay_share=0.3, spindelay_on_hot_statements=True)
    idle = ev(16, settings=Settings(sample_rate=0.25))
    return r3_sample_rate.check(contended, Thresholds()) + r3_sample_rate.check(idle, Thresholds())


# Pure: what the scenarios emit ----------------------------------------------------------------------------------
def test_every_sql_rule_is_covered() -> None:
    codes = {r.rule for m in MAJORS for _, r in sql_changes(m)}
    assert codes == EXPECTED_SQL_RULES, (
        f"missing: {EXPECTED_SQL_RULES - codes}, unexpected: {codes - EXPECTED_SQL_RULES}"
    )
    for m in MAJORS:
        assert {r.rule for _, r in sql_changes(m)} == EXPECTED_SQL_RULES, m
    # A rule module that writes ALTER SYSTEM must be listed (and so must have a scenario above).
    with_sql = set()
    for info in pkgutil.iter_modules(advisor.rules.__path__):
        module = import_module(f"advisor.rules.{info.name}")
        if "ALTER SYSTEM" in inspect.getsource(module):
            with_sql.add(module.CODE)
    assert with_sql <= EXPECTED_SQL_RULES, with_sql - EXPECTED_SQL_RULES


@pytest.mark.parametrize("major", MAJORS)
def test_scenarios_take_each_path(major: int) -> None:
    by = {(n, r.rule, r.subject): r for n, r in sql_changes(major)}
    if major >= 14:
        assert by[("max-critical", "pgss_max", "server")].severity == "critical"
        assert by[("max-critical", "pgss_max", "server")].change.text == (  # type: ignore[union-attr]
            "ALTER SYSTEM SET pg_stat_statements.max = 10000;"
        )
        assert by[("max-warning", "pgss_max", "server")].severity == "warning"
        assert by[("max-warning", "pgss_max", "server")].change.text == (  # type: ignore[union-attr]
            "ALTER SYSTEM SET pg_stat_statements.max = 15000;"
        )
    else:
        raised = by[("max-evicted-13", "pgss_max", "server")]
        assert "no dealloc counter" in raised.explanation
        assert raised.change and raised.change.text == "ALTER SYSTEM SET pg_stat_statements.max = 10000;"
    below = by[("max-below-default", "pgss_max", "below-default")].change
    assert below and (below.text, below.apply) == ("ALTER SYSTEM SET pg_stat_statements.max = 5000;", "restart")
    on = by[("planning-on", "track_planning", "server")].change
    assert on and on.text == "ALTER SYSTEM SET pg_stat_statements.track_planning = on;"
    off = by[("planning-off", "track_planning", "server")].change
    assert off and off.text == "ALTER SYSTEM SET pg_stat_statements.track_planning = off;"
    families = {k[2].split(":")[1] for k in by if k[1] == "churn_family"}
    assert families == ({"gid", "set"} if major < 17 else {"set"})
    for k, r in by.items():
        if k[1] == "churn_family":
            assert r.change and r.change.text == "ALTER SYSTEM SET pg_stat_statements.track_utility = off;"
    assert by[("scope", "scope", "save")].change.text == (  # type: ignore[union-attr]
        "ALTER SYSTEM SET pg_stat_statements.save = on;"
    )
    assert by[("scope", "scope", "track")].change.text == (  # type: ignore[union-attr]
        "ALTER SYSTEM SET pg_stat_statements.track = 'top';"
    )


@pytest.mark.parametrize("major", MAJORS)
def test_sample_rate_absent_gives_alternatives_not_sql(major: int) -> None:
    near = [r for n, r in recommendations(major, scenarios(major)) if r.rule == "sample_rate"]
    assert near, "the planning-off scenario is near the cliff and should raise rule 3"
    spin = ev(major, spindelay_share=0.3, spindelay_on_hot_statements=True)  # track_planning already off
    spin_recs = [r for r in evaluate(spin) if r.rule == "sample_rate"]
    assert len(spin_recs) == 1 and spin_recs[0].change is None
    for r in near + spin_recs:
        assert r.change is None or SAMPLE_RATE not in r.change.text, r.change
        assert r3_sample_rate.ALTERNATIVES in r.explanation
        for alternative in ("turn track_planning off", "cache its result", "ALTER ROLE ... SET"):
            assert alternative in r.explanation


def test_hypothetical_sample_rate_sql_is_emitted() -> None:
    texts = [r.change.text for r in hypothetical_sample_rate() if r.change]
    assert texts == [
        "ALTER SYSTEM SET pg_stat_statements.sample_rate = 0.25;",
        "ALTER SYSTEM SET pg_stat_statements.sample_rate = 1;",
    ]
    for t in texts:
        assert parse(t)[0] == SAMPLE_RATE


def test_change_text_is_one_statement() -> None:
    recs = [r for m in MAJORS for _, r in recommendations(m, scenarios(m))] + hypothetical_sample_rate()
    recs.append(next(r for r in evaluate(ev(16, sees_all_statements=False)) if r.subject == "visibility"))
    non_client = [r.change for r in recs if r.change and r.change.apply != "client"]
    assert {c.apply for c in non_client} == {"restart", "reload", "none"}
    for c in non_client:
        assert c.text.endswith(";"), c.text
        assert "\n" not in c.text and "\r" not in c.text, c.text
        assert len(sqlparse.split(c.text)) == 1, c.text


def test_client_changes_never_start_with_alter() -> None:
    changes = [
        r.change
        for m in MAJORS
        for _, r in recommendations(m, {**scenarios(m), **client_scenarios(m)})
        if r.change and r.change.apply == "client"
    ]
    rules = {r.rule for m in MAJORS for _, r in recommendations(m, client_scenarios(m)) if r.change}
    assert {"churn_family", "stats_resets"} <= rules
    assert len(changes) >= 2 * len(MAJORS)
    for c in changes:
        assert not c.text.lstrip().upper().startswith("ALTER"), c.text


# Real servers ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def alter_clusters(cluster_lock) -> Iterator[dict[int, Cluster]]:
    """major -> a fresh throwaway cluster with pg_stat_statements preloaded and START_SETTINGS."""
    specs = [
        ClusterSpec(
            name=f"test-alter-pg{m}",
            major=m,
            port=slots.port(TEST_ALTER_PORT_BASE + m),
            base=slots.cluster_dir(),
            settings=dict(START_SETTINGS),
            preload=["pg_stat_statements"],
            fresh=True,
        )
        for m in MAJORS
    ]
    started = start_many(specs)
    try:
        yield {c.major: c for c in started.values()}
    finally:
        stop_many(started.values())


def file_settings(c: Cluster) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(name, error) of every erroring pg_file_settings line; name -> setting of postgresql.auto.conf."""
    with c.connect() as conn:
        errors = conn.execute("SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL").fetchall()
        auto = conn.execute(
            "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'"
        ).fetchall()
    return [(n, e) for n, e in errors], dict(auto)


@pytest.mark.parametrize("major", MAJORS)
def test_sample_rate_guc_does_not_exist(alter_clusters: dict[int, Cluster], major: int) -> None:
    # So the hypothetical sample_rate SQL is run nowhere: no community release 13-18 has the GUC.
    rows = alter_clusters[major].execute("SELECT count(*) FROM pg_settings WHERE name = %s", params=[SAMPLE_RATE])
    assert rows == [(0,)]


@pytest.mark.parametrize("major", MAJORS)
def test_every_sql_change_is_accepted(alter_clusters: dict[int, Cluster], major: int) -> None:
    c = alter_clusters[major]
    emitted = sql_changes(major)
    apply_of = {parse(r.change.text)[0]: r.change.apply for _, r in emitted if r.change}
    texts = {r.change.text for _, r in emitted if r.change}
    plan = rounds(texts)
    assert {t for r in plan for t in r} == texts  # every emitted statement is run on this major
    for statements_of_round in plan:
        expected = dict(parse(t) for t in statements_of_round)
        with c.connect() as conn:
            conn.execute("ALTER SYSTEM RESET ALL")  # each round starts from START_SETTINGS
            for text in statements_of_round:
                conn.execute(text)  # type: ignore[arg-type] - the advisor's exact text
            conn.execute("SELECT pg_reload_conf()")
        errors, auto = file_settings(c)
        # Before the restart only restart-only settings may be "could not be applied"; nothing else may err.
        assert [(n, e) for n, e in errors if not (e == CANNOT_APPLY_YET and apply_of.get(n) == "restart")] == [], (
            statements_of_round
        )
        assert auto == expected
        c.restart()
        errors, auto = file_settings(c)
        assert errors == [], statements_of_round
        assert auto == expected
        with c.connect() as conn:
            for name, value in expected.items():
                row = conn.execute(
                    "SELECT current_setting(%s), pending_restart FROM pg_settings WHERE name = %s", [name, name]
                ).fetchone()
                assert row == (value, False), (major, name)
