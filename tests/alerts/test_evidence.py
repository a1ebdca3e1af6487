"""The rules over real histories (collected and rolled up through the real path): deallocation sustained against a
single burst, a statement regression against the same hours of the previous days with its share floor and the
configuration change in between, read in a number of queries set by the baseline days alone, and a server whose
history cannot be read left out rather than cleared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from alerts.evidence import conditions_now
from alerts.models import Rule
from collectors.redact import redact
from history import plans
from history.models import Statement
from inventory.models import Organization
from readtier.coverage import window_summary
from readtier.db import counting
from readtier.windows import Window
from tests.alerts.alert_world import Synthetic, collected

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 3, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def org():
    return Organization.objects.create(name="alert-evidence")


def _dealloc_server(org: Organization, name: str, per_minute) -> tuple:
    """30 minutes collected every minute; per_minute(i) deallocations in minute i."""
    synth = Synthetic(n=15, start=T0, step_s=60, seed=3)
    minutes = iter(range(10_000))

    def deallocate(s: Synthetic) -> None:
        s.dealloc += per_minute(next(minutes))

    server = collected(synth, organization=org, name=name, until=T0 + 30 * MINUTE, step=MINUTE, every_step=deallocate)
    return server, synth.taken_at + timedelta(seconds=5)


def test_sustained_deallocation_alerts_and_a_single_burst_does_not(org):
    rule = Rule.objects.create(organization=org, name="storm", kind="dealloc", dealloc_per_s=10, dealloc_minutes=15)
    storm, now = _dealloc_server(org, "storming", lambda i: 900 if i >= 10 else 0)  # 15/s for the last 20 min
    burst, _ = _dealloc_server(org, "bursting", lambda i: 60_000 if i == 25 else 0)  # one minute at 1,000/s

    found = conditions_now(rule=rule, servers=[storm, burst], now=now)

    (c,) = found[storm.pk]
    assert c.key == f"server:{storm.pk}" and c.severity == "critical"
    assert c.figures["dealloc_per_s"] == pytest.approx(15.0) and c.figures["share_above"] == 1.0
    assert "15.0 deallocations/s on average over the last 15 min" in c.summary
    assert found[burst.pk] == []
    # The burst's average over the same window is far above the rate: only the share of the window tells them apart.
    average = window_summary(server_id=burst.pk, window=Window.last(15 * MINUTE, now=now)).dealloc_per_s
    assert average > 60


NOW = datetime(2026, 6, 10, 12, 1, tzinfo=UTC)
SLOW_FROM = NOW.replace(minute=0) - timedelta(hours=1)  # the workload of the snapshots after 11:00 is slower


@pytest.fixture
def regressed(org):
    """Two days and an hour of history every 15 minutes. In the last hour the hottest statement runs 4 times
    slower, and a rare one (about 0.3% of the time) 5 times slower; pg_stat_statements.max went from 10000 to
    20000 three hours before."""
    synth = Synthetic(n=20, start=NOW - timedelta(days=2, hours=1, minutes=16), step_s=900, seed=5)
    synth.entries_max, synth.max_changed_at = "20000", NOW - timedelta(hours=3)
    hot = int(np.argmax(synth.p_run * (1 + synth.rate) * synth.us_per_call))
    rare = int(np.argmin(synth.p_run * (1 + synth.rate) * synth.us_per_call))
    synth.p_run[[hot, rare]] = 1.0  # both run every minute: each has a baseline every day
    synth.rate[rare] = 0.0
    synth.us_per_call[rare] = 0.003 * float((synth.p_run * (1 + synth.rate) * synth.us_per_call).sum())
    slowed = []

    def slow_down(s: Synthetic) -> None:
        if s.taken_at >= SLOW_FROM and not slowed:
            s.us_per_call[hot] *= 4
            s.us_per_call[rare] *= 5
            slowed.append(True)

    server = collected(
        synth, organization=org, name="regressed", until=NOW, step=timedelta(minutes=15), every_step=slow_down
    )
    ids = {
        i: Statement.objects.get(server=server, queryid=int(synth.keys[i][2]), userid=int(synth.keys[i][0])).pk
        for i in (hot, rare)
    }
    return server, ids[hot], ids[rare]


def _regression_rule(org: Organization, **values) -> Rule:
    return Rule.objects.create(
        **{"organization": org, "name": "slower", "kind": "regression", "regression_days": 2, **values}
    )


def test_a_regression_names_the_configuration_change_and_a_rare_statement_is_below_the_floor(org, regressed):
    server, hot, rare = regressed
    rule = _regression_rule(org)

    (c,) = conditions_now(rule=rule, servers=[server], now=NOW)[server.pk]

    assert c.key == f"statement:{hot}" and c.path == f"/statements/{hot}/"
    assert 3 <= c.figures["ratio"] <= 5.5 and c.figures["share"] >= 0.05 and c.figures["baseline_days"] == 2
    assert [(x["setting"], x["before"], x["after"]) for x in c.config_changes] == [
        ("pg_stat_statements.max", "10000", "20000")
    ]
    assert "pg_stat_statements.max 10000 → 20000 at 2026-06-10 09:15 UTC." in c.summary
    # The rare statement regressed too, only its share keeps it quiet: a floor of 0.1% lets it through.
    lower = _regression_rule(org, name="slower-all", regression_min_share=0.001)
    keys = {c.key for c in conditions_now(rule=lower, servers=[server], now=NOW)[server.pk]}
    assert keys == {f"statement:{hot}", f"statement:{rare}"}


def test_without_enough_baseline_days_nothing_is_a_regression(org, regressed):
    server, _, _ = regressed
    rule = _regression_rule(org, name="a-week")
    rule.regression_days = 7  # four days needed, two in the history
    assert conditions_now(rule=rule, servers=[server], now=NOW)[server.pk] == []


def test_a_server_whose_history_cannot_be_read_is_left_out(org):
    server, now = _dealloc_server(org, "unreadable", lambda i: 0)
    rule = Rule.objects.create(organization=org, name="no-window", kind="dealloc", dealloc_minutes=0)  # no window
    assert conditions_now(rule=rule, servers=[server], now=now) == {}


def test_a_regression_reads_a_fixed_number_of_queries_whatever_the_statements_and_the_baseline_days(org, regressed):
    """Every baseline day in one query (readtier.baselines): 20 statements or one, 2 days or 28."""
    server, _, _ = regressed
    counts = {}
    for days, share in ((2, 0.05), (2, 0.001), (28, 0.05), (28, 0.001)):
        rule = _regression_rule(org, name=f"{days}-{share}", regression_days=days, regression_min_share=share)
        with counting() as c:
            found = conditions_now(rule=rule, servers=[server], now=NOW)[server.pk]
        counts[days, share] = c.queries
        assert bool(found) is (days == 2)  # 28 days need 14 of baseline: the history has two
    # A regression found also reads the configuration changes and its statements' plan changes since the baseline
    # began: two queries more.
    assert counts[2, 0.05] == counts[2, 0.001] == counts[28, 0.05] + 2 == counts[28, 0.001] + 2
    assert counts[2, 0.05] <= 9


def _planned(server_id: int, statement_id: int, paths: list[str], at: datetime) -> None:
    node = paths[0].split(" on ")[0].split(" using ")[0]
    plan = {"Plan": {"Node Type": node, "Relation Name": "orders", "Total Cost": 10.0, "Plan Rows": 1.0}}
    new = plans.NewPlan(
        plan=plan,
        fingerprint=node.replace(" ", "").ljust(32, "0"),
        access_paths=paths,
        node_count=1,
        method="generic_plan",
    )
    plans.record_plan(server_id, statement_id, new, at=at, redact=redact)


def test_a_regression_names_the_plan_change_that_fell_in_its_window(org, regressed):
    """The hot statement planned with its index a day before, and without it when the regression began: the
    condition says so, in the words the mail, the page and the webhook carry."""
    server, hot, rare = regressed
    _planned(server.pk, hot, ["Index Scan using orders_customer_idx on orders"], NOW - timedelta(days=1))
    _planned(server.pk, hot, ["Seq Scan on orders"], SLOW_FROM + timedelta(minutes=2))
    _planned(server.pk, rare, ["Index Scan using orders_customer_idx on orders"], NOW - timedelta(days=1))

    (c,) = conditions_now(rule=_regression_rule(org), servers=[server], now=NOW)[server.pk]

    seen = (SLOW_FROM + timedelta(minutes=2)).strftime("%Y-%m-%d %H:%M UTC")
    assert c.summary.endswith(
        f"Its plan changed (seen at {seen}): from Index Scan using orders_customer_idx on orders to Seq Scan on orders."
    ), c.summary
    assert c.figures["plan_changed_at"] == (SLOW_FROM + timedelta(minutes=2)).isoformat() and c.statement_id == hot


def test_a_plan_change_before_the_baseline_began_is_not_named(org, regressed):
    server, hot, _ = regressed
    _planned(server.pk, hot, ["Index Scan using orders_customer_idx on orders"], NOW - timedelta(days=5))
    _planned(server.pk, hot, ["Seq Scan on orders"], NOW - timedelta(days=4))
    (c,) = conditions_now(rule=_regression_rule(org), servers=[server], now=NOW)[server.pk]
    assert "plan changed" not in c.summary and "plan_changed_at" not in c.figures
