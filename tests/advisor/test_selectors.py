"""advisor.selectors: the one read path of the recommendations. Active ones come most severe first and newest first
within a severity, resolved ones most recently resolved first; counts cover every server asked for; a history
is found only through the caller's servers; a row turns into JSON with ISO times and public citations."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from advisor import advice as found
from advisor import sources
from advisor.models import Recommendation
from advisor.selectors import (
    Counts,
    recommendation_activity,
    recommendation_counts,
    recommendation_history,
    recommendations,
    threshold_overrides,
)
from advisor.services import organization_thresholds_update, recommendation_acknowledge, recommendation_resolve
from advisor.services import recommendations_apply as apply_findings
from inventory.connection import parse_dsn
from inventory.services import server_create

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def advice(severity: str, subject: str, change: found.Change | None = None) -> found.Advice:
    return found.Advice("pgss_max", severity, "db", subject, f"{subject} is {severity}", f"why {subject}", change)


def apply(server, findings, at):
    return apply_findings(server=server, found_now=findings, now=at, clear_after=2 * HOUR)


@pytest.fixture
def servers():
    dsn = "postgresql://monitor:pw@127.0.0.1:1/app"
    return [
        server_create(name=name, connection=parse_dsn(dsn), organization_name="sel-acme") for name in ("db1", "db2")
    ]


@pytest.fixture
def dba():
    return get_user_model().objects.create_user("sel-dba")


def test_active_ones_come_by_severity_then_newest_then_server_name(servers, dba):
    db1, db2 = servers
    first = [advice("critical", "d"), advice("warning", "a")]
    apply(db1, first, T0)
    apply(db1, [*first, advice("warning", "b"), advice("info", "e")], T0 + HOUR)
    apply(db2, [advice("warning", "c")], T0 + HOUR)
    ids = [db1.pk, db2.pk]
    assert [r.subject for r in recommendations(server_ids=ids)] == ["d", "b", "c", "a", "e"]
    assert [r.subject for r in recommendations(server_ids=ids, limit=2)] == ["d", "b"]
    assert [r.subject for r in recommendations(server_ids=[db2.pk])] == ["c"]
    by_subject = {r.subject: r.pk for r in Recommendation.objects.filter(server__in=servers)}
    recommendation_acknowledge(recommendation_id=by_subject["a"], user=dba)  # acknowledged: still active
    recommendation_resolve(recommendation_id=by_subject["b"], user=dba)
    recommendation_resolve(recommendation_id=by_subject["e"], user=dba)
    active = [(r.subject, r.status) for r in recommendations(server_ids=ids)]
    assert active == [("d", "open"), ("c", "open"), ("a", "acknowledged")]
    assert [r.subject for r in recommendations(server_ids=ids, active=False)] == ["e", "b"]
    unknown = db2.pk + 1000
    counts = recommendation_counts(server_ids=[*ids, unknown])
    assert counts == {db1.pk: Counts(critical=1, warning=1), db2.pk: Counts(warning=1), unknown: Counts()}
    assert recommendations(server_ids=[]) == [] and recommendation_counts(server_ids=[]) == {}


@pytest.mark.parametrize(
    "counts, total, worst",
    [
        (Counts(), 0, None),
        (Counts(info=2), 2, "info"),
        (Counts(0, 1, 3), 4, "warning"),
        (Counts(1, 0, 5), 6, "critical"),
    ],
)
def test_counts_add_up_and_name_the_worst_severity(counts, total, worst):
    assert (counts.total, counts.worst) == (total, worst)


def test_a_row_as_json_has_iso_times_usernames_and_public_citations(servers, dba):
    legacy = "seeds/000_619f50110a6dd62f.txt"  # a file name earlier versions stored: cited publicly now
    change = found.Change("ALTER SYSTEM SET pg_stat_statements.max = 10000;", "restart")
    apply(servers[0], [found.Advice("pgss_max", "warning", "db", "s", "t", "x", change, references=(legacy,))], T0)
    rec = Recommendation.objects.get(server=servers[0])
    recommendation_acknowledge(recommendation_id=rec.pk, user=dba)
    (row,) = recommendations(server_ids=[servers[0].pk])
    out = json.loads(json.dumps(row.as_json()))
    assert (out["server"], out["organization"], out["change_apply"]) == ("db1", "sel-acme", "restart")
    assert out["first_seen_at"] == out["opened_at"] == T0.isoformat()
    assert datetime.fromisoformat(out["acknowledged_at"]) == row.acknowledged_at and out["acknowledged_by"] == "sel-dba"
    assert (out["resolved_at"], out["resolved_by"], out["times_opened"]) == (None, None, 1)
    assert out["references"] == [sources.DALIBO_SLOW_COMMIT]


def test_a_history_lists_its_events_oldest_first_only_through_the_callers_servers(servers, dba):
    db1, db2 = servers
    apply(db1, [advice("warning", "a")], T0)
    apply(db1, [advice("critical", "a")], T0 + HOUR)
    rec = Recommendation.objects.get(server=db1)
    recommendation_resolve(recommendation_id=rec.pk, user=dba)
    history = recommendation_history(recommendation_id=rec.pk, server_ids=[db1.pk, db2.pk])
    assert history.recommendation.id == rec.pk and history.recommendation.resolved_by == "sel-dba"
    assert [(e.kind, e.severity, e.user, e.detail) for e in history.events] == [
        ("opened", "warning", None, "why a"),
        ("severity", "critical", None, "why a"),
        ("resolved", "critical", "sel-dba", ""),
    ]
    assert history.events[0].at == T0
    assert recommendation_history(recommendation_id=rec.pk, server_ids=[db2.pk]) is None
    assert recommendation_history(recommendation_id=rec.pk + 1000, server_ids=[db1.pk]) is None


def test_activity_is_what_opened_and_resolved_inside_the_window(servers):
    db1 = servers[0]
    apply(db1, [advice("warning", "a")], T0)
    apply(db1, [advice("critical", "a")], T0 + HOUR)  # a severity change is not activity
    apply(db1, [], T0 + 3 * HOUR)  # cleared: not seen for clear_after
    apply(db1, [advice("info", "a")], T0 + 5 * HOUR)  # reopened
    window = recommendation_activity(server_ids=[db1.pk], start=T0, end=T0 + 5 * HOUR)
    assert [(a.kind, a.severity, a.at, a.by) for a in window] == [
        ("opened", "warning", T0, None),
        ("resolved", "critical", T0 + 3 * HOUR, None),
    ]
    later = recommendation_activity(server_ids=[db1.pk], start=T0 + HOUR, end=T0 + 6 * HOUR)
    assert [(a.kind, a.at) for a in later] == [("resolved", T0 + 3 * HOUR), ("opened", T0 + 5 * HOUR)]


def test_threshold_overrides_are_none_until_saved(servers):
    org = servers[0].organization_id
    assert set(threshold_overrides(organization_id=org).values()) == {None}
    organization_thresholds_update(organization=servers[0].organization, values={"dealloc_critical_per_s": 50.0})
    overrides = threshold_overrides(organization_id=org)
    assert overrides["dealloc_critical_per_s"] == 50.0 and overrides["clear_after_minutes"] is None
