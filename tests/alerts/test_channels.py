"""Alert channels as an organization admin sets them up: each kind's target checked with the reason when it is
refused, the network policy applied to outbound addresses, secrets encrypted at rest and never in the row; what
the monitored servers wrote (a statement's text) shown as text in Slack."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from alerts.channels import Message, slack_body
from alerts.models import Channel
from alerts.services import channel_create
from inventory.models import Organization

pytestmark = pytest.mark.django_db
KEY = "a" * 16 + "0123456789ABCDEF"


@pytest.fixture
def org():
    return Organization.objects.create(name="alerting")


def _refused(org, **kw) -> dict:
    with pytest.raises(ValidationError) as raised:
        channel_create(organization=org, name=kw.pop("name", "c"), **kw)
    return raised.value.message_dict


@pytest.mark.parametrize(
    ("kind", "target", "field", "words"),
    [
        ("webhook", "not a url", "target", "https://"),
        ("webhook", "ftp://example.com/hook", "target", "https://"),
        ("webhook", "https://user:pw@example.com/hook", "target", "user name or password"),
        ("webhook", "https://169.254.169.254/latest/meta-data", "target", "link-local or cloud metadata"),
        ("webhook", "https://[fe80::1]/hook", "target", "link-local"),
        ("slack", "https://example.com/services/T0/B0/x", "target", "hooks.slack.com"),
        ("pagerduty", "R0ABCDEF", "target", "32 letters and digits"),
        ("pagerduty", "x" * 31 + "!", "target", "32 letters and digits"),
        ("email", "", "addresses", "at least one address"),
    ],
)
def test_a_bad_target_is_refused_with_the_reason(org, kind, target, field, words):
    errors = _refused(org, kind=kind, target=target)
    assert list(errors) == [field] and words in errors[field][0], errors
    assert not Channel.objects.filter(organization=org).exists()


def test_the_consoles_own_redis_is_refused_as_a_webhook(org, settings):
    redis_port = settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0]
    errors = _refused(org, kind="webhook", target=f"http://127.0.0.1:{redis_port}/")
    assert "console" in errors["target"][0], errors


def test_an_email_address_is_checked(org):
    errors = _refused(org, kind="email", addresses=["dba@example.com", "not-an-address"])
    assert errors == {"addresses": ["'not-an-address' is not an email address"]}


def test_secrets_are_encrypted_and_the_signing_secret_shown_once(org):
    url = "http://127.0.0.1:9/hook-with-a-token-3f9a"
    made = channel_create(organization=org, name="ops", kind="webhook", target=url)
    row = Channel.objects.get(pk=made.channel.pk)
    assert made.signing_secret and made.signing_secret.startswith("whsec_")
    assert url not in row.target_encrypted and made.signing_secret not in row.signing_secret_encrypted
    assert row.target_encrypted and row.signing_secret_encrypted
    pd = channel_create(organization=org, name="pager", kind="pagerduty", target=KEY)
    assert pd.signing_secret is None and KEY not in Channel.objects.get(pk=pd.channel.pk).target_encrypted
    assert _refused(org, name="ops", kind="pagerduty", target=KEY) == {
        "name": ["alerting has a channel named 'ops' already"]
    }


def test_slack_shows_a_statement_text_as_text_never_as_a_link():
    at = datetime(2026, 11, 27, tzinfo=UTC)
    m = Message(
        "open",
        "k",
        "db1: a statement 3.0× slower",
        "warning",
        "SELECT '<https://evil|click>' & 1",
        "o",
        "db1",
        "https://c/",
        at,
    )
    body = json.loads(slack_body(m))
    assert body["text"] == "db1: a statement 3.0× slower: SELECT '&lt;https://evil|click&gt;' &amp; 1"
    assert "<https://evil" not in body["blocks"][0]["text"]["text"]
    assert body["blocks"][1]["elements"][0]["text"] == "<https://c/|Open in pgconsole>"  # our own link stays one
