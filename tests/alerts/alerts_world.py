"""The alerts as the API and the pages show them: two organizations' servers, default rules, a channel of each
kind with secrets that must never be shown, and alerts open (one with a hostile title), acknowledged and
resolved; and the check that no answer holds a secret."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from alerts.models import Alert, Channel, Rule
from alerts.services import channel_create, rules_default
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import server_create
from tests.api_world import ApiWorld

UNREACHABLE = "postgresql://m:pw@127.0.0.1:1/app"
KEY = "0123456789abcdef0123456789ABCDEF"  # a PagerDuty routing key's shape
HOOK = "http://127.0.0.1:9/hook/s3cr3t-webhook-path?token=webhook-token-value"
SLACK = "http://127.0.0.1:9/services/T000/B000/slack-secret-part"
HOSTILE = "SELECT '<script>alert(1)</script>' FROM orders"


@dataclass
class AlertsWorld:
    """acme: a server, the default rules, four channels (one of each kind), an open alert with a hostile title,
    an acknowledged one and resolved ones; other: the same rules, a channel and an open alert."""

    api: ApiWorld
    server: Server
    rules: dict[str, Rule]  # kind -> acme's rule
    channels: dict[str, Channel]  # kind -> acme's channel
    open: Alert
    acknowledged: Alert
    resolved: Alert
    theirs: Alert  # other's open alert
    their_channel: Channel
    their_rule: Rule

    def secrets(self) -> list[str]:
        """Every string that must never be in an answer (but the signing secret in its creation's)."""
        out = [KEY, "s3cr3t-webhook-path", "webhook-token-value", "slack-secret-part"]
        for c in Channel.objects.all():
            out += [s for s in (c.target_encrypted, c.signing_secret_encrypted) if s]
        return out


def alert(
    rule: Rule,
    server: Server,
    *,
    state: str = "open",
    title: str = "down",
    at: datetime | None = None,
    minutes_ago: int = 0,
    **extra,
) -> Alert:
    """An alert of `rule` on `server`, true since `at` (or `minutes_ago`), opened unless pending, resolved five
    minutes later if resolved; `extra` sets any other field (the key, a notification's time, ...)."""
    since = at or timezone.now() - timedelta(minutes=minutes_ago)
    values = {
        "key": f"server:{server.pk}:{title[:20]}",
        "state": state,
        "since": since,
        "first_true_at": since,
        "last_true_at": since,
        "opened_at": since if state != "pending" else None,
        "resolved_at": since + timedelta(minutes=5) if state == "resolved" else None,
        "severity": "critical",
        "title": title,
        "summary": f"summary of {title}",
        "figures": {"down_minutes": 12},
        "path": f"/servers/{server.pk}/",
    }
    return Alert.objects.create(rule=rule, server=server, **{**values, **extra})


def build_alerts(api: ApiWorld, settings) -> AlertsWorld:
    settings.ALERTS_SLACK_URL_PREFIXES = ["http://127.0.0.1:9/services/"]
    ours = server_create(name="db1", connection=parse_dsn(UNREACHABLE), organization_name="acme")
    theirs = server_create(name="db9", connection=parse_dsn(UNREACHABLE), organization_name="other")
    rules = {r.kind: r for r in rules_default(organization=api.acme)}
    their_rules = rules_default(organization=api.other)
    admin = api.users["admin"]
    channels = {
        "webhook": channel_create(organization=api.acme, name="hook", kind="webhook", target=HOOK, user=admin),
        "slack": channel_create(organization=api.acme, name="slack", kind="slack", target=SLACK, user=admin),
        "pagerduty": channel_create(organization=api.acme, name="pager", kind="pagerduty", target=KEY, user=admin),
        "email": channel_create(organization=api.acme, name="mail", kind="email", addresses=["oncall@acme.example"]),
    }
    their_channel = channel_create(organization=api.other, name="their-hook", kind="webhook", target=HOOK).channel
    down = rules["server_down"]
    world = AlertsWorld(
        api=api,
        server=ours,
        rules=rules,
        channels={k: v.channel for k, v in channels.items()},
        open=alert(down, ours, state="open", title=HOSTILE, minutes_ago=10),
        acknowledged=alert(
            rules["dealloc"],
            ours,
            state="open",
            title="deallocation storm",
            minutes_ago=30,
            acknowledged_at=timezone.now(),
            acknowledged_by=api.users["dba"],
        ),
        resolved=alert(down, ours, state="resolved", title="was down", minutes_ago=120),
        theirs=alert(their_rules[0], theirs, state="open", title="their outage", minutes_ago=5),
        their_channel=their_channel,
        their_rule=their_rules[0],
    )
    return world


def assert_no_secret(world: AlertsWorld, response, *, allowed: str | None = None) -> None:
    text = response.content.decode()
    if allowed:
        text = text.replace(allowed, "")
    leaked = [s for s in world.secrets() if s in text]
    assert not leaked, f"{response.request['PATH_INFO']} shows {leaked}"
