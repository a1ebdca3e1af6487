"""The alerts' reads (alerts/selectors.py): a channel shown by its kind and its URL's host only, the last
deliveries of every channel in one query, rules in the defaults' order with the thresholds of their kind,
alerts newest first by state, each read scoped to the caller's organizations; query counts fixed whatever
the number of rows."""

from __future__ import annotations

import pytest

from alerts import selectors
from alerts.models import Channel, Delivery
from inventory.crypto import encrypt_secret
from tests.alerts.alerts_world import HOOK, KEY, AlertsWorld, alert, build_alerts

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(api_world, settings) -> AlertsWorld:
    return build_alerts(api_world, settings)


def test_channels_show_a_urls_host_and_nothing_secret(world, django_assert_num_queries):
    with django_assert_num_queries(1):
        rows = {c.name: c for c in selectors.alert_channels(organization_id=world.api.acme.pk)}
    assert [rows[n].target_host for n in ("hook", "slack", "pager", "mail")] == ["127.0.0.1", "127.0.0.1", None, None]
    assert rows["mail"].addresses == ["oncall@acme.example"] and not rows["hook"].failing
    shown = repr(list(rows.values()))
    assert KEY not in shown and "s3cr3t" not in shown and "slack-secret-part" not in shown
    # A target that cannot be read (another CREDENTIALS_KEY's, or not a URL) has no host; the list still shows.
    Channel.objects.filter(pk=world.channels["webhook"].pk).update(target_encrypted="not-a-fernet-token")
    Channel.objects.filter(pk=world.channels["slack"].pk).update(target_encrypted=encrypt_secret("http://[::1"))
    rows = {c.name: c for c in selectors.alert_channels(organization_id=world.api.acme.pk)}
    assert rows["hook"].target_host is None and rows["slack"].target_host is None


def test_a_channel_is_found_in_the_callers_organizations_only(world):
    hook = world.channels["webhook"]
    assert selectors.alert_channel(channel_id=hook.pk, organization_ids=[world.api.acme.pk]).name == "hook"
    assert selectors.alert_channel(channel_id=hook.pk, organization_ids=None).name == "hook"  # a superuser
    assert selectors.alert_channel(channel_id=hook.pk, organization_ids=[world.api.other.pk]) is None
    assert selectors.alert_channel(channel_id=hook.pk, organization_ids=[]) is None


def test_the_last_deliveries_of_every_channel_in_one_query(world, django_assert_num_queries):
    hook, pager = world.channels["webhook"], world.channels["pagerduty"]
    for i in range(7):
        Delivery.objects.create(channel=hook, event="test", title=f"hook {i}")
    Delivery.objects.create(channel=pager, event="open", title="pager 0", status="failed", last_error="HTTP 400")
    with django_assert_num_queries(1):
        recent = selectors.recent_deliveries(channel_ids=[hook.pk, pager.pk, world.channels["email"].pk])
    assert [d.title for d in recent[hook.pk]] == ["hook 6", "hook 5", "hook 4", "hook 3", "hook 2"]
    assert [(d.status, d.last_error) for d in recent[pager.pk]] == [("failed", "HTTP 400")]
    assert world.channels["email"].pk not in recent
    with django_assert_num_queries(2):
        count, page = selectors.channel_deliveries(channel_id=hook.pk, offset=5, limit=5)
    assert count == 7 and [d.title for d in page] == ["hook 1", "hook 0"]


def test_rules_in_the_defaults_order_with_their_kinds_thresholds(world, django_assert_num_queries):
    world.rules["dealloc"].channels.set([world.channels["webhook"], world.channels["email"]])
    with django_assert_num_queries(2):
        rules = selectors.alert_rules(organization_id=world.api.acme.pk)
    assert [r.kind for r in rules] == ["server_down", "advisor", "dealloc", "regression"]
    dealloc = rules[2]
    assert dealloc.thresholds == ("dealloc_per_s", "dealloc_minutes") and dealloc.channels == ["hook", "mail"]
    assert dealloc.channel_ids == [world.channels["webhook"].pk, world.channels["email"].pk]
    assert selectors.alert_rule(rule_id=dealloc.id, organization_ids=[world.api.other.pk]) is None


def test_alerts_newest_first_by_state_and_scoped(world, django_assert_num_queries):
    acme = world.api.acme.pk
    for i in range(5):  # more rows cost no more queries
        alert(world.rules["advisor"], world.server, state="resolved", title=f"old {i}", minutes_ago=300 + i)
    with django_assert_num_queries(2):
        count, rows = selectors.alerts_page(organization_id=acme, state="active")
    assert count == 2 and [a.id for a in rows] == [world.open.pk, world.acknowledged.pk]
    assert rows[0].acknowledgeable and not rows[1].acknowledgeable and rows[1].acknowledged_by == "dba"
    count, rows = selectors.alerts_page(organization_id=acme, offset=3, limit=2)
    assert count == 8 and [a.title for a in rows] == ["old 0", "old 1"]
    with django_assert_num_queries(2):
        active, resolved = selectors.alerts_overview(organization_id=acme, history=3)
    assert [a.id for a in active] == [world.open.pk, world.acknowledged.pk]
    assert [a.title for a in resolved] == ["was down", "old 0", "old 1"] and not resolved[0].acknowledgeable
    assert selectors.alert_detail(alert_id=world.theirs.pk, organization_ids=[acme]) is None
    assert selectors.alert_detail(alert_id=world.theirs.pk, organization_ids=None).server == "db9"


def test_only_a_path_of_the_console_is_linked(world):
    for path in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        a = alert(world.rules["advisor"], world.server, state="resolved", title=path, minutes_ago=1000, path=path)
        assert selectors.alert_detail(alert_id=a.pk, organization_ids=None).path == "/"
    assert selectors.alert_detail(alert_id=world.open.pk, organization_ids=None).path.startswith("/servers/")
    assert HOOK not in repr(selectors.alerts_overview(organization_id=world.api.acme.pk))
