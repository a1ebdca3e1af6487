"""Alert channels, rules and alerts through the API (console/api/alerts.py): every member reads, a DBA
acknowledges, an admin adds, tests and deletes channels and changes rules; another organization's objects are a
404, a member without the role a 403, a read-only token a 403; refusals by field in the one error shape; and no
channel's secret (its URL, routing key, signing secret, or their encrypted form) in any answer but the signing
secret in the answer to its creation. Every response is checked against the schema (api_world's client)."""

from __future__ import annotations

import json

import pytest

from alerts.models import Channel, Delivery, Rule
from inventory.models import Organization
from tests.alerts.alerts_world import HOOK, HOSTILE, KEY, AlertsWorld, assert_no_secret, build_alerts
from tests.api_world import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(api_world, settings) -> AlertsWorld:
    return build_alerts(api_world, settings)


def channels_url(org: Organization) -> str:
    return f"/api/v1/organizations/{org.pk}/alert-channels/"


# -- channels ----------------------------------------------------------------------------------------------------


def test_every_member_reads_the_channels_as_kind_host_and_failing_state(world):
    Channel.objects.filter(pk=world.channels["slack"].pk).update(consecutive_failures=3, last_error="answered 500")
    body = world.api.client("viewer").get(channels_url(world.api.acme)).json()
    rows = {r["name"]: r for r in body["results"]}
    assert list(rows) == ["hook", "mail", "pager", "slack"] and body["count"] == 4
    assert rows["hook"]["target_host"] == "127.0.0.1" and rows["hook"]["kind"] == "webhook"
    assert rows["pager"]["target_host"] is None and rows["mail"]["target_host"] is None
    assert rows["slack"]["failing"] and rows["slack"]["consecutive_failures"] == 3
    assert rows["slack"]["last_error"] == "answered 500" and not rows["hook"]["failing"]
    assert rows["mail"]["addresses"] is None  # a viewer is not shown the recipients (as the weekly report's)
    assert "target" not in rows["hook"] and "signing_secret" not in rows["hook"]
    dba = {r["name"]: r for r in world.api.client("dba").get(channels_url(world.api.acme)).json()["results"]}
    assert dba["mail"]["addresses"] == ["oncall@acme.example"] and dba["hook"]["addresses"] is None
    one = world.api.client("viewer").get(f"/api/v1/alert-channels/{world.channels['webhook'].pk}/")
    assert one.status_code == 200 and one.json()["name"] == "hook"
    # Another organization's: 404 for its list and its channel, never a 403 that would confirm it exists.
    assert_error(world.api.client("outsider").get(channels_url(world.api.acme)), 404, "not_found")
    assert_error(world.api.client("outsider").get(f"/api/v1/alert-channels/{world.channels['webhook'].pk}/"), 404)
    theirs = world.api.client("outsider").get(channels_url(world.api.other)).json()["results"]
    assert [r["name"] for r in theirs] == ["their-hook"]


def test_an_admin_adds_a_channel_and_sees_the_signing_secret_once(world):
    url = channels_url(world.api.acme)
    new = {"name": "ops-hook", "kind": "webhook", "target": HOOK}
    assert_error(world.api.client("viewer").post(url, new, content_type="application/json"), 403)
    assert_error(world.api.client("dba").post(url, new, content_type="application/json"), 403, "permission_denied")
    read_only = world.api.client("admin", read_only=True)
    assert_error(read_only.post(url, new, content_type="application/json"), 403, "read_only_token")
    assert_error(world.api.client("outsider").post(url, new, content_type="application/json"), 404)
    assert not Channel.objects.filter(name="ops-hook").exists()

    admin = world.api.client("admin")
    created = admin.post(url, new, content_type="application/json")
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["signing_secret"]
    assert len(secret) >= 32 and body["target_host"] == "127.0.0.1" and body["name"] == "ops-hook"
    assert_no_secret(world, created, allowed=secret)
    channel = Channel.objects.get(pk=body["id"])
    assert channel.created_by == world.api.users["admin"] and secret not in channel.signing_secret_encrypted
    # Never again: not in the list, the channel, its deliveries.
    for path in (url, f"/api/v1/alert-channels/{channel.pk}/", f"/api/v1/alert-channels/{channel.pk}/deliveries/"):
        again = admin.get(path)
        assert again.status_code == 200 and secret not in again.content.decode()
        assert_no_secret(world, again)
    mail = admin.post(
        url, {"name": "m2", "kind": "email", "addresses": ["a@acme.example"]}, content_type="application/json"
    )
    assert mail.status_code == 201 and mail.json()["signing_secret"] is None
    assert mail.json()["addresses"] == ["a@acme.example"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "x", "kind": "sms", "target": HOOK}, "kind", "is not a valid choice"),
        ({"kind": "webhook", "target": HOOK}, "name", "required"),
        ({"name": "x", "kind": "webhook", "target": "ftp://example.com/x"}, "target", "https://"),
        ({"name": "x", "kind": "webhook", "target": "http://u:pw@127.0.0.1:9/x"}, "target", "user name or password"),
        ({"name": "x", "kind": "webhook", "target": "http://169.254.169.254/latest"}, "target", ""),
        ({"name": "x", "kind": "slack", "target": "https://example.com/services/x"}, "target", "hooks.slack.com"),
        ({"name": "x", "kind": "pagerduty", "target": "short"}, "target", "32 letters and digits"),
        ({"name": "x", "kind": "email", "addresses": ["not an address"]}, "addresses", "is not an email address"),
        ({"name": "x", "kind": "email"}, "addresses", "at least one address"),
        ({"name": "hook", "kind": "pagerduty", "target": KEY}, "name", "has a channel named 'hook' already"),
        ({"name": "   ", "kind": "pagerduty", "target": KEY}, "name", ""),
    ],
)
def test_a_refused_channel_says_why_under_its_field(world, body, field, words):
    before = Channel.objects.count()
    response = world.api.client("admin").post(
        channels_url(world.api.acme), json.dumps(body), content_type="application/json"
    )
    errors = assert_error(response, 400, "invalid")["errors"]
    assert list(errors) == [field] and words in " ".join(errors[field]), errors
    assert Channel.objects.count() == before
    assert_no_secret(world, response)
    assert "u:pw" not in response.content.decode()


def test_a_channel_past_the_organizations_limit_is_refused_with_the_reason(world, settings):
    settings.ALERTS_ORG_MAX_CHANNELS = 4  # acme has four, other one
    fifth = {"name": "fifth", "kind": "email", "addresses": ["a@acme.example"]}
    admin = world.api.client("admin")
    errors = assert_error(admin.post(channels_url(world.api.acme), fifth, content_type="application/json"), 400)
    assert errors["errors"] == {
        "non_field_errors": [
            "acme has 4 alert channels already, its limit: delete one first (a console administrator can raise it: "
            "ALERTS_ORG_MAX_CHANNELS)"
        ]
    }
    assert not Channel.objects.filter(name="fifth").exists()


def test_a_body_that_is_not_an_object_is_refused(world):
    response = world.api.client("admin").post(channels_url(world.api.acme), "[1]", content_type="application/json")
    assert "non_field_errors" in assert_error(response, 400)["errors"]


def test_an_admin_sends_a_test_through_the_worker(world, monkeypatch, django_capture_on_commit_callbacks):
    queued = []
    monkeypatch.setattr("alerts.tasks.deliver.delay", queued.append)
    hook = world.channels["webhook"]
    url = f"/api/v1/alert-channels/{hook.pk}/test/"
    for role, status in (("viewer", 403), ("dba", 403), ("outsider", 404)):
        assert_error(world.api.client(role).post(url), status)
    assert_error(world.api.client("admin", read_only=True).post(url), 403, "read_only_token")
    assert not Delivery.objects.exists() and queued == []
    with django_capture_on_commit_callbacks(execute=True):
        response = world.api.client("admin").post(url)
    assert response.status_code == 202, response.content
    body = response.json()
    assert queued == [body["delivery_id"]] and body["status"] == "pending"  # to the worker, once committed
    deliveries = world.api.client("viewer").get(body["deliveries_url"]).json()
    (row,) = deliveries["results"]
    assert (row["id"], row["event"], row["status"], row["alert_id"]) == (body["delivery_id"], "test", "pending", None)
    assert_no_secret(world, response)
    assert_error(world.api.client("outsider").get(body["deliveries_url"]), 404)


def test_deliveries_are_paged_newest_first(world):
    hook = world.channels["webhook"]
    for i in range(3):
        Delivery.objects.create(channel=hook, event="test", title=f"t{i}", status="failed", last_error=f"e{i}")
    c = world.api.client("viewer")
    url = f"/api/v1/alert-channels/{hook.pk}/deliveries/"
    first = c.get(url, {"page_size": 2}).json()
    assert first["count"] == 3 and first["pages"] == 2 and [d["title"] for d in first["results"]] == ["t2", "t1"]
    assert [d["title"] for d in c.get(url, {"page": 2, "page_size": 2}).json()["results"]] == ["t0"]
    assert "page_size" in assert_error(c.get(url, {"page_size": 0}), 400)["errors"]


def test_an_admin_deletes_a_channel_unless_a_rule_notifies_it_alone(world):
    pager, mail = world.channels["pagerduty"], world.channels["email"]
    url = f"/api/v1/alert-channels/{pager.pk}/"
    for role, status in (("viewer", 403), ("dba", 403), ("outsider", 404)):
        assert_error(world.api.client(role).delete(url), status)
    world.rules["server_down"].channels.set([pager])
    refused = assert_error(world.api.client("admin").delete(url), 409, "conflict")
    assert "Server down" in refused["message"] and Channel.objects.filter(pk=pager.pk).exists()
    world.rules["server_down"].channels.set([pager, mail])
    Delivery.objects.create(channel=pager, event="test", title="t")
    assert world.api.client("admin").delete(url).status_code == 204
    assert not Channel.objects.filter(pk=pager.pk).exists() and not Delivery.objects.filter(channel_id=pager.pk)
    assert list(world.rules["server_down"].channels.all()) == [mail]
    assert_error(world.api.client("admin").delete(url), 404)
    assert_error(world.api.client("admin").delete(f"/api/v1/alert-channels/{world.their_channel.pk}/"), 404)


# -- rules -------------------------------------------------------------------------------------------------------


def test_every_member_reads_the_rules_with_their_thresholds(world):
    body = world.api.client("viewer").get(f"/api/v1/organizations/{world.api.acme.pk}/alert-rules/").json()
    rows = {r["kind"]: r for r in body["results"]}
    assert [r["kind"] for r in body["results"]] == ["server_down", "advisor", "dealloc", "regression"]
    assert rows["server_down"]["down_minutes"] == 10 and rows["server_down"]["thresholds"] == ["down_minutes"]
    assert rows["regression"]["regression_factor"] == 2.0 and rows["regression"]["channels"] == []
    assert rows["dealloc"]["thresholds"] == ["dealloc_per_s", "dealloc_minutes"]
    one = world.api.client("viewer").get(f"/api/v1/alert-rules/{world.rules['advisor'].pk}/").json()
    assert one["min_severity"] == "critical"
    assert_error(world.api.client("outsider").get(f"/api/v1/organizations/{world.api.acme.pk}/alert-rules/"), 404)
    assert_error(world.api.client("viewer").get(f"/api/v1/alert-rules/{world.their_rule.pk}/"), 404)


def test_an_admin_changes_a_rule(world):
    rule = world.rules["server_down"]
    url = f"/api/v1/alert-rules/{rule.pk}/"
    change = {"down_minutes": 20, "tag": " prod ", "channels": [world.channels["email"].pk], "enabled": False}
    for role, status in (("viewer", 403), ("dba", 403), ("outsider", 404)):
        assert_error(world.api.client(role).patch(url, change, content_type="application/json"), status)
    assert_error(world.api.client("admin", read_only=True).patch(url, change, content_type="application/json"), 403)
    body = world.api.client("admin").patch(url, change, content_type="application/json").json()
    assert (body["down_minutes"], body["tag"], body["enabled"]) == (20, "prod", False)
    assert body["channels"] == [world.channels["email"].pk] and body["hold_minutes"] == 0  # the rest as it was
    rule.refresh_from_db()
    assert (rule.down_minutes, rule.tag, rule.enabled) == (20, "prod", False)


@pytest.mark.parametrize(
    ("change", "errors"),
    [
        ({"hold_minutes": -1}, {"hold_minutes"}),
        ({"regression_factor": 0.5, "regression_days": 40}, {"regression_factor", "regression_days"}),
        ({"down_minutes": 0}, {"down_minutes"}),
        ({"dealloc_per_s": "fast"}, {"dealloc_per_s"}),
        ({"regression_min_share": 5}, {"regression_min_share"}),
        ({"min_severity": "urgent"}, {"min_severity"}),
        ({"remind_minutes": 2**40}, {"remind_minutes"}),
        ({"treshold": 3}, {"treshold"}),  # misspelt: refused, never taken for a change that was made
        ({"kind": "advisor"}, {"kind"}),  # a rule's kind is what it is
        ({"channels": ["x"]}, {"channels"}),
        ({"name": "Critical advice"}, {"non_field_errors"}),  # another rule's name
    ],
)
def test_a_refused_change_says_why_under_each_field_and_changes_nothing(world, change, errors):
    rule = world.rules["server_down"]
    before = Rule.objects.filter(pk=rule.pk).values().get()
    response = world.api.client("admin").patch(
        f"/api/v1/alert-rules/{rule.pk}/", json.dumps(change), content_type="application/json"
    )
    body = assert_error(response, 400, "invalid")
    assert set(body["errors"]) == errors, body
    assert Rule.objects.filter(pk=rule.pk).values().get() == before


def test_a_rule_notifies_channels_of_its_organization_only(world):
    rule = world.rules["server_down"]
    response = world.api.client("admin").patch(
        f"/api/v1/alert-rules/{rule.pk}/", {"channels": [world.their_channel.pk]}, content_type="application/json"
    )
    assert set(assert_error(response, 400)["errors"]) == {"channels"}
    assert list(rule.channels.all()) == []


# -- alerts ------------------------------------------------------------------------------------------------------


def test_alerts_are_listed_newest_first_by_state(world):
    c = world.api.client("viewer")
    url = f"/api/v1/organizations/{world.api.acme.pk}/alerts/"
    every = c.get(url).json()
    assert [a["id"] for a in every["results"]] == [world.open.pk, world.acknowledged.pk, world.resolved.pk]
    first = every["results"][0]
    assert first["title"] == HOSTILE  # JSON carries the text as it is; escaping is the renderer's job
    assert (first["server"], first["rule_kind"], first["state"]) == ("db1", "server_down", "open")
    assert first["figures"] == {"down_minutes": 12} and first["path"] == f"/servers/{world.server.pk}/"
    assert first["dedup_key"].startswith(f"pgconsole-{world.rules['server_down'].pk}-")
    assert [a["id"] for a in c.get(url, {"state": "resolved"}).json()["results"]] == [world.resolved.pk]
    assert c.get(url, {"state": "active"}).json()["count"] == 2
    assert c.get(url, {"state": "pending"}).json()["count"] == 0
    assert [a["id"] for a in c.get(url, {"page_size": 1, "page": 2}).json()["results"]] == [world.acknowledged.pk]
    assert "state" in assert_error(c.get(url, {"state": "closed"}), 400)["errors"]
    assert_error(world.api.client("outsider").get(url), 404)
    theirs = world.api.client("outsider").get(f"/api/v1/organizations/{world.api.other.pk}/alerts/").json()
    assert [a["id"] for a in theirs["results"]] == [world.theirs.pk]


def test_one_alert_and_another_organizations_is_a_404(world):
    c = world.api.client("viewer")
    body = c.get(f"/api/v1/alerts/{world.acknowledged.pk}/").json()
    assert body["acknowledged_by"] == "dba" and body["acknowledged_at"] is not None
    assert_error(c.get(f"/api/v1/alerts/{world.theirs.pk}/"), 404, "not_found")
    assert_error(c.get("/api/v1/alerts/999999/"), 404)


def test_dbas_and_admins_acknowledge(world):
    url = f"/api/v1/alerts/{world.open.pk}/acknowledge/"
    assert_error(world.api.client("viewer").post(url), 403, "permission_denied")
    assert_error(world.api.client("dba", read_only=True).post(url), 403, "read_only_token")
    assert_error(world.api.client("outsider").post(url), 404)
    assert_error(world.api.client("dba").post(f"/api/v1/alerts/{world.theirs.pk}/acknowledge/"), 404)
    body = world.api.client("dba").post(url).json()
    assert body["acknowledged_by"] == "dba" and body["state"] == "open"
    assert world.api.client("admin").post(url).json()["acknowledged_by"] == "dba"  # the first one stays
    conflict = assert_error(world.api.client("admin").post(f"/api/v1/alerts/{world.resolved.pk}/acknowledge/"), 409)
    assert "resolved" in conflict["message"]
    world.theirs.refresh_from_db()
    assert world.theirs.acknowledged_at is None


def test_no_answer_ever_holds_a_channels_secret(world):
    """Every read of every role, and the refusals, against every secret string and its encrypted form."""
    acme = world.api.acme
    paths = [
        channels_url(acme),
        f"/api/v1/organizations/{acme.pk}/alert-rules/",
        f"/api/v1/organizations/{acme.pk}/alerts/",
        f"/api/v1/alerts/{world.open.pk}/",
    ]
    for channel in world.channels.values():
        paths += [f"/api/v1/alert-channels/{channel.pk}/", f"/api/v1/alert-channels/{channel.pk}/deliveries/"]
    for role in ("viewer", "dba", "admin", "outsider"):
        c = world.api.client(role)
        for path in paths:
            assert_no_secret(world, c.get(path))
            assert_no_secret(world, c.get(path, {"format": "json"}, HTTP_ACCEPT="application/json; indent=2"))
