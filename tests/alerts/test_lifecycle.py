"""An alert's life through evaluate_organization on real rows: pending until the hold, one notification when it
opens and one when it resolves however often (or however concurrently) the same instant is evaluated, a flap
shorter than the hold never notified, an escalation told once, reminders until acknowledged, the rule's tag and
channels, advice with its exact change, a failed read that leaves the rest alone, and an evaluation cut into groups
of servers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection

from advisor.models import Recommendation
from alerts.lifecycle import evaluate_organization, evaluation_groups
from alerts.models import Alert, Delivery, Rule
from alerts.services import alert_acknowledge, channel_create
from inventory.models import Organization, Server
from tests.alerts import alerts_world

pytestmark = pytest.mark.django_db
T = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def org():
    return Organization.objects.create(name="lifecycle")


@pytest.fixture
def evaluate(django_capture_on_commit_callbacks):
    """evaluate(org, at) -> the deliveries handed to the workers (after the commit, as in production)."""

    def run(organization: Organization, at: datetime) -> list[int]:
        sent: list[int] = []
        with django_capture_on_commit_callbacks(execute=True):
            evaluate_organization(organization=organization, enqueue=sent.append, now=at)
        return sent

    return run


def _server(org: Organization, name: str = "db1", tags: list[str] | None = None) -> Server:
    return Server.objects.create(organization=org, name=name, host="192.0.2.1", user="monitor", tags=tags or [])


def _failing(server: Server, since: datetime) -> None:
    Server.objects.filter(pk=server.pk).update(
        consecutive_failures=5,
        last_attempt_at=since + 20 * MINUTE,
        last_success_at=since,
        last_error_class="unreachable",
        last_error_message="connection refused",
    )


def _recovered(server: Server, at: datetime) -> None:
    Server.objects.filter(pk=server.pk).update(consecutive_failures=0, last_attempt_at=at, last_success_at=at)


def _rule(org: Organization, name: str = "down", **values) -> Rule:
    return Rule.objects.create(organization=org, name=name, kind="server_down", down_minutes=10, **values)


def _mail(org: Organization, name: str = "dba", **kw):
    return channel_create(organization=org, name=name, kind="email", addresses=[f"{name}@example.com"], **kw).channel


def _advice(server: Server, **values) -> Recommendation:
    """An active recommendation of the server, opened a minute before T (pgss_max on the server unless given)."""
    made = {"rule": "pgss_max", "subject": "server", "subject_key": "a", "title": "Raise pg_stat_statements.max"}
    made |= {"evidence": [], "first_seen_at": T - MINUTE, "opened_at": T - MINUTE, "last_seen_at": T}
    return Recommendation.objects.create(server=server, **(made | values))


def _events(alert: Alert) -> list[str]:
    return list(Delivery.objects.filter(alert=alert).order_by("pk").values_list("event", flat=True))


def test_it_opens_after_the_hold_notifies_once_and_resolves_once(org, evaluate, settings):
    settings.CONSOLE_URL = "https://console.example.com"
    channel = _mail(org)
    server = _server(org)
    _failing(server, T - 30 * MINUTE)
    _rule(org, hold_minutes=5)

    assert evaluate(org, T) == []
    alert = Alert.objects.get()
    assert (alert.state, alert.first_true_at, alert.since) == ("pending", T, T - 30 * MINUTE)
    assert evaluate(org, T + 4 * MINUTE) == []
    opened = evaluate(org, T + 5 * MINUTE)
    assert evaluate(org, T + 5 * MINUTE) == [] and evaluate(org, T + 6 * MINUTE) == []  # the same instant, again
    _recovered(server, T + 7 * MINUTE)
    resolved = evaluate(org, T + 8 * MINUTE)
    assert evaluate(org, T + 8 * MINUTE) == [] and evaluate(org, T + 9 * MINUTE) == []

    alert.refresh_from_db()
    assert (alert.state, alert.opened_at, alert.resolved_at) == ("resolved", T + 5 * MINUTE, T + 8 * MINUTE)
    open_delivery, resolve_delivery = Delivery.objects.filter(alert=alert).order_by("pk")
    assert opened == [open_delivery.pk] and resolved == [resolve_delivery.pk]
    assert (open_delivery.event, resolve_delivery.event) == ("open", "resolve")
    assert open_delivery.channel == channel and open_delivery.status == "pending"
    m = open_delivery.message
    assert m["title"] == "db1: collection failing (unreachable)" and m["severity"] == "critical"
    assert m["summary"].startswith("Not collected for 35 min: its last snapshot was at 2026-11-27 08:30 UTC;")
    assert m["url"] == f"https://console.example.com/servers/{server.pk}/"
    assert (m["organization"], m["server"]) == ("lifecycle", "db1")
    # PagerDuty's dedup key: one per condition, the same on its resolution.
    assert m["key"] == resolve_delivery.message["key"] == f"pgconsole-{alert.rule_id}-server:{server.pk}"
    assert resolve_delivery.message["summary"].startswith("Resolved at 2026-11-27 09:08 UTC, after 3 min open")


def test_a_flap_shorter_than_the_hold_is_never_notified(org, evaluate):
    _mail(org)
    server = _server(org)
    _failing(server, T - 30 * MINUTE)
    _rule(org, hold_minutes=5)
    assert evaluate(org, T) == []
    _recovered(server, T + 2 * MINUTE)
    assert evaluate(org, T + 3 * MINUTE) == []
    _failing(server, T - 30 * MINUTE)  # down again: a new condition, its hold from the start
    assert evaluate(org, T + 4 * MINUTE) == [] and evaluate(org, T + 8 * MINUTE) == []
    assert len(evaluate(org, T + 9 * MINUTE)) == 1
    first, second = Alert.objects.order_by("pk")
    assert (first.state, first.notified_open_at, first.resolved_at) == ("resolved", None, T + 3 * MINUTE)
    assert (second.state, second.first_true_at) == ("open", T + 4 * MINUTE)
    assert _events(first) == [] and _events(second) == ["open"]


def test_reminders_every_remind_minutes_until_acknowledged(org, evaluate):
    _mail(org)
    server = _server(org)
    _failing(server, T - 30 * MINUTE)
    _rule(org, hold_minutes=0, remind_minutes=30)
    assert len(evaluate(org, T)) == 1
    assert evaluate(org, T + 29 * MINUTE) == []
    assert len(evaluate(org, T + 30 * MINUTE)) == 1
    assert evaluate(org, T + 30 * MINUTE) == [] and evaluate(org, T + 59 * MINUTE) == []
    assert len(evaluate(org, T + 60 * MINUTE)) == 1
    alert = Alert.objects.get()
    user = User.objects.create_user("oncall")
    alert_acknowledge(alert=alert, user=user, now=T + 61 * MINUTE)
    assert evaluate(org, T + 90 * MINUTE) == [] and evaluate(org, T + 200 * MINUTE) == []
    _recovered(server, T + 201 * MINUTE)
    assert len(evaluate(org, T + 202 * MINUTE)) == 1  # acknowledged: still told when it resolves
    alert.refresh_from_db()
    assert _events(alert) == ["open", "remind", "remind", "resolve"]
    assert (alert.acknowledged_at, alert.acknowledged_by, alert.last_reminded_at) == (
        T + 61 * MINUTE,
        user,
        T + 60 * MINUTE,
    )
    remind = Delivery.objects.filter(alert=alert, event="remind").first().message
    assert remind["summary"].startswith("Still open after 30 min, not acknowledged. Not collected for 1 h")


def test_the_tag_scopes_the_rule_and_a_server_leaving_it_resolves(org, evaluate):
    _mail(org)
    prod, dev = _server(org, "prod-db", ["prod", "eu"]), _server(org, "dev-db", ["dev"])
    _failing(prod, T - 30 * MINUTE)
    _failing(dev, T - 30 * MINUTE)
    _rule(org, hold_minutes=0, tag="prod")
    assert len(evaluate(org, T)) == 1
    assert list(Alert.objects.values_list("server__name", "state")) == [("prod-db", "open")]
    Server.objects.filter(pk=prod.pk).update(tags=["dev"])
    assert len(evaluate(org, T + MINUTE)) == 1
    assert _events(Alert.objects.get()) == ["open", "resolve"]


def test_a_rule_notifies_its_channels_or_every_enabled_one(org, evaluate):
    a, b = _mail(org, "a"), _mail(org, "b")
    off = _mail(org, "off")
    off.enabled = False
    off.save()
    _failing(_server(org), T - 30 * MINUTE)
    _rule(org, "to everyone", hold_minutes=0)
    _rule(org, "to b", hold_minutes=0).channels.set([b, off])
    assert len(evaluate(org, T)) == 3
    sent = sorted(Delivery.objects.values_list("alert__rule__name", "channel__name"))
    assert sent == [("to b", "b"), ("to everyone", "a"), ("to everyone", "b")]
    assert a.deliveries.get().message["key"] != b.deliveries.filter(alert__rule__name="to b").get().message["key"]


def test_critical_advice_is_sent_with_its_exact_change_and_resolves_with_the_recommendation(org, evaluate):
    _mail(org)
    server = _server(org)
    Rule.objects.create(organization=org, name="advice", kind="advisor", hold_minutes=0)
    critical = _advice(
        server,
        severity="critical",
        explanation="42.0 deallocations/s.",
        change_text="ALTER SYSTEM SET pg_stat_statements.max = 20000;",
        change_apply="restart",
    )
    _advice(server, rule="resets", subject="s", subject_key="b", severity="warning", explanation="")
    assert len(evaluate(org, T)) == 1
    alert = Alert.objects.get()
    assert alert.change_text == "ALTER SYSTEM SET pg_stat_statements.max = 20000; (needs a server restart)"
    message = Delivery.objects.get().message
    assert message["title"] == "db1: Raise pg_stat_statements.max"
    assert message["summary"].endswith(
        "Change: ALTER SYSTEM SET pg_stat_statements.max = 20000; (needs a server restart)"
    )
    assert message["url"].endswith(f"/advisor/recommendations/{critical.pk}/")
    Recommendation.objects.filter(pk=critical.pk).update(status="resolved", resolved_at=T + MINUTE)
    assert len(evaluate(org, T + 2 * MINUTE)) == 1
    assert _events(alert) == ["open", "resolve"]


def test_advice_that_becomes_more_severe_is_sent_again_once_even_acknowledged_and_a_milder_one_is_not(org, evaluate):
    _mail(org)
    user = User.objects.create_user("escalation-dba")
    server = _server(org)
    Rule.objects.create(organization=org, name="advice", kind="advisor", min_severity="warning", hold_minutes=0)
    advice = _advice(server, severity="warning", explanation="3.0 deallocations/s.")
    assert len(evaluate(org, T)) == 1
    alert = Alert.objects.get()
    alert_acknowledge(alert=alert, user=user, now=T + MINUTE)
    Recommendation.objects.filter(pk=advice.pk).update(severity="critical", explanation="42.0 deallocations/s.")
    escalated = evaluate(org, T + 2 * MINUTE)
    assert len(escalated) == 1
    assert evaluate(org, T + 2 * MINUTE) == [] and evaluate(org, T + 3 * MINUTE) == []  # once
    message = Delivery.objects.get(pk=escalated[0]).message
    assert (message["event"], message["severity"]) == ("escalate", "critical")
    assert message["summary"].startswith("Now critical, was warning when notified. Since ")
    assert message["summary"].endswith("42.0 deallocations/s.")
    # Milder again: shown on the alert, not sent; worse again than the last notification said: nothing either.
    Recommendation.objects.filter(pk=advice.pk).update(severity="warning")
    assert evaluate(org, T + 4 * MINUTE) == []
    alert.refresh_from_db()
    assert (alert.severity, alert.notified_severity) == ("warning", "critical")
    Recommendation.objects.filter(pk=advice.pk).update(severity="critical")
    assert evaluate(org, T + 5 * MINUTE) == []
    assert _events(alert) == ["open", "escalate"]


def test_a_disabled_rule_resolves_its_alerts(org, evaluate):
    _mail(org)
    _failing(_server(org), T - 30 * MINUTE)
    rule = _rule(org, hold_minutes=0)
    assert len(evaluate(org, T)) == 1
    Rule.objects.filter(pk=rule.pk).update(enabled=False)
    assert len(evaluate(org, T + MINUTE)) == 1
    assert Alert.objects.get().state == "resolved"


def test_a_failed_read_leaves_an_open_alert_as_it_was(org, evaluate):
    _mail(org)
    server = _server(org)
    rule = Rule.objects.create(organization=org, name="storm", kind="dealloc", dealloc_minutes=0)  # no window: fails
    alert = alerts_world.alert(rule, server, at=T, key=f"server:{server.pk}", notified_open_at=T, title="deallocating")
    assert evaluate(org, T + MINUTE) == []
    alert.refresh_from_db()
    assert alert.state == "open"
    Rule.objects.filter(pk=rule.pk).update(dealloc_minutes=15)  # read again: no history, no storm
    assert len(evaluate(org, T + 2 * MINUTE)) == 1
    assert _events(alert) == ["resolve"]


def test_an_organization_without_rules_gets_the_defaults_once(org, evaluate):
    evaluate(org, T)
    evaluate(org, T + MINUTE)
    kinds = sorted(Rule.objects.filter(organization=org).values_list("kind", flat=True))
    assert kinds == ["advisor", "dealloc", "regression", "server_down"]


def test_evaluation_is_cut_into_groups_of_servers_each_organization_its_own(org):
    small = Organization.objects.create(name="small")
    empty = Organization.objects.create(name="empty")
    big = [_server(org, f"db{i}") for i in range(5)]
    Server.objects.filter(pk=big[2].pk).update(enabled=False)
    _server(small)
    groups = [g for g in evaluation_groups(size=2) if g[0] in (org.pk, small.pk, empty.pk)]
    enabled = [s.pk for s in big if s.pk != big[2].pk]
    assert groups == [(org.pk, enabled[:2]), (org.pk, enabled[2:]), (small.pk, None), (empty.pk, None)]
    assert [g for g in evaluation_groups(size=4) if g[0] == org.pk] == [(org.pk, None)]


def test_a_group_answers_for_its_servers_and_for_the_servers_no_longer_enabled(org, django_capture_on_commit_callbacks):
    _mail(org)
    one, two, gone = _server(org, "db1"), _server(org, "db2"), _server(org, "db3")
    for server in (one, two, gone):
        _failing(server, T - 30 * MINUTE)
    _rule(org, hold_minutes=0)

    def group(ids: list[int], at: datetime) -> list[int]:
        sent: list[int] = []
        with django_capture_on_commit_callbacks(execute=True):
            evaluate_organization(organization=org, enqueue=sent.append, now=at, server_ids=ids)
        return sent

    assert len(group([one.pk], T)) == 1
    assert set(Alert.objects.values_list("server_id", flat=True)) == {one.pk}  # the others' group has not run
    assert len(group([two.pk, gone.pk], T)) == 2
    _recovered(two, T + MINUTE)
    Server.objects.filter(pk=gone.pk).update(enabled=False)
    # db1's group: db2 recovered, but db2 is another group's; db3 is no longer enabled, so any group resolves it.
    assert len(group([one.pk], T + 2 * MINUTE)) == 1
    states = dict(Alert.objects.values_list("server__name", "state"))
    assert states == {"db1": "open", "db2": "open", "db3": "resolved"}
    assert len(group([two.pk], T + 3 * MINUTE)) == 1
    assert Alert.objects.get(server=two).state == "resolved"
    assert group([two.pk], T + 4 * MINUTE) == [] and group([one.pk], T + 4 * MINUTE) == []  # each resolved once


@pytest.mark.django_db(transaction=True)
def test_racing_evaluations_of_one_instant_send_each_notification_once():
    """Four evaluations at once (beat's next run while a worker still runs the last, a restart): the condition
    is made once, and its opening and its resolution are each claimed by one of them."""
    org = Organization.objects.create(name="racing")
    _mail(org)
    server = _server(org)
    _failing(server, T - 30 * MINUTE)
    _rule(org, hold_minutes=0)

    def race(at: datetime) -> list[int]:
        sent: list[int] = []
        start = threading.Barrier(4)

        def one() -> None:
            try:
                start.wait()
                evaluate_organization(organization=org, enqueue=sent.append, now=at)
            finally:
                connection.close()

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sent

    assert len(race(T)) == 1
    _recovered(server, T + MINUTE)
    assert len(race(T + 2 * MINUTE)) == 1
    assert _events(Alert.objects.get()) == ["open", "resolve"]


def test_a_pending_regression_asks_the_plans_worker_for_its_statements_plan(org, evaluate, monkeypatch, settings):
    """While a regression waits out its hold, each evaluation sends its statement's plan to the `plans` queue (the
    task reads it unless it is fresh), so that the alert names a plan change when it opens; an open one no more."""
    import json
    from base64 import b64decode

    import redis

    from alerts import lifecycle
    from alerts.conditions import Condition

    server = _server(org)
    Rule.objects.create(organization=org, name="slower", kind="regression", hold_minutes=15)
    found = Condition(
        key="statement:77",
        server_id=server.pk,
        severity="warning",
        title="a statement 4.0× slower than usual",
        summary="...",
        since=T,
        figures={},
        path="/statements/77/",
        statement_id=77,
    )
    monkeypatch.setattr(
        lifecycle,
        "conditions_now",
        lambda rule, servers, now: {s.pk: [found] if rule.kind == "regression" else [] for s in servers},
    )
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("plans")
    evaluate(org, T)
    evaluate(org, T + MINUTE)
    sent = [json.loads(m) for m in broker.lrange("plans", 0, -1)]
    assert [m["headers"]["task"] for m in sent] == ["collectors.tasks.plan_statement"] * 2
    assert json.loads(b64decode(sent[0]["body"]))[0] == [server.pk, 77, 600]
    evaluate(org, T + 16 * MINUTE)  # the evaluation that opens it still finds it pending: asked once more
    assert Alert.objects.get(key="statement:77").state == Alert.State.OPEN and broker.llen("plans") == 3
    evaluate(org, T + 17 * MINUTE)  # open: no more
    assert broker.llen("plans") == 3
    broker.delete("plans")
