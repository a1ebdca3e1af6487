"""The recommendations' lifecycle in the real database: dedup per (server, rule, subject), open →
acknowledged → resolved, cleared automatically after `clear_after`, reopened when the condition returns,
history kept; per-organization thresholds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from advisor import advice as found
from advisor.models import OrganizationThresholds, Recommendation, Status
from advisor.selectors import recommendation_counts, recommendation_history, recommendations
from advisor.services import (
    LifecycleError,
    organization_thresholds,
    organization_thresholds_update,
    recommendation_acknowledge,
    recommendation_resolve,
    recommendations_apply,
)
from advisor.thresholds import OVERRIDES, Thresholds
from inventory.connection import parse_dsn
from inventory.services import server_create

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CLEAR = timedelta(hours=2)


@pytest.fixture
def server():
    return server_create(
        name="db1", connection=parse_dsn("postgresql://monitor:pw@127.0.0.1:1/app"), organization_name="acme"
    )


@pytest.fixture
def dba():
    return get_user_model().objects.create_user("dba", password="x")


def finding(severity="warning", subject="server", rule="pgss_max", explanation="dealloc 12.0/s") -> found.Advice:
    return found.Advice(
        rule=rule,
        severity=severity,
        server="db1",
        subject=subject,
        title=f"{rule} {severity}",
        explanation=explanation,
        change=found.Change("ALTER SYSTEM SET pg_stat_statements.max = 10000;", "restart"),
        evidence=(found.EvidenceSeries("deallocations", "dealloc/s", ((T0, 12.0), (T0 + CLEAR, None))),),
        references=("seeds/000_619f50110a6dd62f.txt",),
    )


def apply(server, findings, at):
    return recommendations_apply(server=server, found_now=findings, now=at, clear_after=CLEAR)


def events(rec) -> list[str]:
    return [e.kind for e in rec.events.all()]


def test_one_row_per_server_rule_subject_updated_in_place(server):
    out = apply(server, [finding(), finding(subject="below-default")], T0)
    assert len(out.opened) == 2
    out = apply(
        server,
        [finding(severity="critical", explanation="dealloc 40.0/s"), finding(subject="below-default")],
        T0 + timedelta(minutes=5),
    )
    assert out.opened == [] and len(out.updated) == 1
    assert Recommendation.objects.filter(server=server).count() == 2
    rec = Recommendation.objects.get(server=server, subject="server")
    assert (rec.severity, rec.explanation, rec.last_seen_at) == (
        "critical",
        "dealloc 40.0/s",
        T0 + timedelta(minutes=5),
    )
    assert rec.first_seen_at == T0
    assert events(rec) == ["opened", "severity"]
    assert rec.evidence[0]["points"] == [[T0.isoformat(), 12.0], [(T0 + CLEAR).isoformat(), None]]
    assert rec.change_text.startswith("ALTER SYSTEM") and rec.change_apply == "restart"


def test_a_recommendation_for_a_change_another_one_now_asks_for_is_cleared_at_once(server):
    below = replace(
        finding(subject="below-default"),
        title="pg_stat_statements.max is 100, below the default 5,000",
        explanation="never lower it",
        change=found.Change("ALTER SYSTEM SET pg_stat_statements.max = 5000;", "restart"),
    )
    apply(server, [below], T0)
    # Five minutes later entries are evicted: the raise (another value of the same setting) takes over at once,
    # not after clear_after; the raise's explanation carries the below-default reason (rule 1).
    out = apply(server, [finding(severity="critical")], T0 + timedelta(minutes=5))
    old = Recommendation.objects.get(server=server, subject="below-default")
    assert out.cleared == [old.pk] and old.status == Status.RESOLVED and old.resolved_by is None
    assert old.events.order_by("pk").last().detail == (
        'Now part of "pgss_max critical": one recommendation per change (setting pg_stat_statements.max).'
    )
    active = Recommendation.objects.filter(server=server).exclude(status=Status.RESOLVED)
    assert [r.subject for r in active] == ["server"]
    # A recommendation with another change, or none, keeps its own clear_after.
    others = [
        replace(
            finding(rule="scope", severity="info", subject="save"),
            change=found.Change("ALTER SYSTEM SET pg_stat_statements.save = on;", "reload"),
        ),
        replace(finding(rule="resets", severity="info"), change=None),
    ]
    apply(server, [finding(severity="critical"), *others], T0 + timedelta(minutes=6))
    out = apply(server, [finding(severity="critical")], T0 + timedelta(minutes=7))
    assert out.cleared == []
    assert {r.rule: r.status for r in Recommendation.objects.filter(rule__in=["scope", "resets"])} == {
        "scope": Status.OPEN,
        "resets": Status.OPEN,
    }


def test_a_long_subject_is_deduplicated_by_its_hash(server):
    subject = "family:in_list:" + "SELECT * FROM t WHERE id IN (...) AND x = $1 " * 200
    apply(server, [finding(subject=subject)], T0)
    apply(server, [finding(subject=subject)], T0 + timedelta(minutes=1))
    assert Recommendation.objects.get(server=server).subject == subject


def test_cleared_only_after_clear_after_then_reopened_when_it_returns(server):
    apply(server, [finding()], T0)
    out = apply(server, [], T0 + CLEAR - timedelta(minutes=1))  # not long enough
    assert out.cleared == []
    out = apply(server, [], T0 + CLEAR)
    rec = Recommendation.objects.get(server=server)
    assert out.cleared == [rec.pk]
    assert rec.status == Status.RESOLVED and rec.resolved_by is None and rec.resolved_at == T0 + CLEAR
    out = apply(server, [finding(severity="critical")], T0 + 3 * CLEAR)
    rec.refresh_from_db()
    assert out.reopened == [rec.pk] and rec.status == Status.OPEN and rec.times_opened == 2
    assert rec.opened_at == T0 + 3 * CLEAR and rec.first_seen_at == T0 and rec.resolved_at is None
    assert events(rec) == ["opened", "cleared", "reopened"]


def test_acknowledge_then_resolve_by_a_user_with_a_grace_period(server, dba):
    apply(server, [finding()], T0)
    rec = Recommendation.objects.get(server=server)
    recommendation_acknowledge(recommendation_id=rec.pk, user=dba)
    with pytest.raises(LifecycleError):
        recommendation_acknowledge(recommendation_id=rec.pk, user=dba)
    # Still seen: stays acknowledged (not reopened, not re-acknowledged).
    apply(server, [finding()], T0 + timedelta(minutes=5))
    rec.refresh_from_db()
    assert rec.status == Status.ACKNOWLEDGED and rec.acknowledged_by == dba
    recommendation_resolve(recommendation_id=rec.pk, user=dba)
    with pytest.raises(LifecycleError):
        recommendation_resolve(recommendation_id=rec.pk, user=dba)
    rec.refresh_from_db()
    resolved_at = rec.resolved_at
    # The condition is still in the windows just after the fix: not reopened within clear_after ...
    apply(server, [finding()], resolved_at + timedelta(minutes=10))
    rec.refresh_from_db()
    assert rec.status == Status.RESOLVED
    # ... but reopened if it is still there after it.
    apply(server, [finding()], resolved_at + CLEAR + timedelta(minutes=1))
    rec.refresh_from_db()
    assert rec.status == Status.OPEN and rec.acknowledged_by is None
    history = recommendation_history(recommendation_id=rec.pk, server_ids=[server.pk])
    assert [(e.kind, e.user) for e in history.events] == [
        ("opened", None),
        ("acknowledged", "dba"),
        ("resolved", "dba"),
        ("reopened", None),
    ]


def test_selectors_order_count_and_scope(server):
    other = server_create(
        name="db2", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="other-org"
    )
    apply(server, [finding("info", "a"), finding("critical", "b"), finding("warning", "c")], T0)
    apply(other, [finding("critical", "x")], T0)
    rows = recommendations(server_ids=[server.pk])
    assert [r.severity for r in rows] == ["critical", "warning", "info"]
    assert {r.server for r in rows} == {"db1"}
    counts = recommendation_counts(server_ids=[server.pk, other.pk])
    assert (counts[server.pk].critical, counts[server.pk].warning, counts[server.pk].info) == (1, 1, 1)
    assert counts[server.pk].worst == "critical" and counts[other.pk].total == 1
    # Another organization's recommendation is not found through this organization's servers.
    theirs = Recommendation.objects.get(server=other)
    assert recommendation_history(recommendation_id=theirs.pk, server_ids=[server.pk]) is None
    apply(server, [], T0 + CLEAR)
    assert recommendations(server_ids=[server.pk]) == []
    assert len(recommendations(server_ids=[server.pk], active=False)) == 3
    assert recommendation_counts(server_ids=[server.pk])[server.pk].total == 0


def test_organization_thresholds_override_the_defaults(server):
    org = server.organization
    assert organization_thresholds(organization=org) == Thresholds()
    organization_thresholds_update(organization=org, values={"dealloc_critical_per_s": 50.0, "clear_after_minutes": 30})
    th = organization_thresholds(organization=org)
    assert th.dealloc_critical_per_s == 50.0 and th.clear_after == timedelta(minutes=30)
    assert th.dealloc_warning_per_s == Thresholds().dealloc_warning_per_s
    organization_thresholds_update(organization=org, values={"dealloc_critical_per_s": None})
    assert organization_thresholds(organization=org).dealloc_critical_per_s == Thresholds().dealloc_critical_per_s
    with pytest.raises(ValueError, match="not an advisor threshold"):
        organization_thresholds_update(organization=org, values={"max_round_to": 1})


def test_every_declared_override_is_stored_and_applied_and_nothing_else(server):
    """advisor.thresholds.OVERRIDES is the one declaration: the model holds a field for each (and no other
    threshold), and each stored value reaches the Thresholds field it names."""
    stored = {f.name for f in OrganizationThresholds._meta.get_fields()} - {"organization"}
    assert stored == {o.field for o in OVERRIDES}
    values = {o.field: (o.minimum or 0) + 3 if o.kind == "count" else o.maximum / 4 for o in OVERRIDES}
    organization_thresholds_update(organization=server.organization, values=values)
    th = organization_thresholds(organization=server.organization)
    for o in OVERRIDES:
        expected = timedelta(minutes=values[o.field]) if o.field == "clear_after_minutes" else values[o.field]
        assert getattr(th, o.threshold) == expected != o.value(o.default()), o.field
