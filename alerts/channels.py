"""What each kind of channel accepts and what it is sent: its target checked when it is saved (with the
reason when it is refused), and a message in its own shape (Slack blocks, a PagerDuty event with a dedup key
per condition, the generic webhook's versioned JSON, a mail as text and HTML)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from alerts import outbound

SCHEMA = "pgconsole.alert/1"  # the generic webhook's body: docs/alerts.md, "The generic webhook"
_ROUTING_KEY = re.compile(r"[A-Za-z0-9]{32}")


@dataclass(frozen=True)
class Message:
    """An alert's words, whatever the channel: plain words first, then the figures and a link."""

    event: str  # test | open | resolve | remind | escalate
    key: str  # the condition's identity (PagerDuty's dedup key, the webhook's alert.id)
    title: str  # which server, what happened
    severity: str  # critical | warning | info
    summary: str  # how bad, since when
    organization: str
    server: str | None
    url: str  # into the console
    at: datetime


def clean_target(kind: str, target: str) -> str:
    """The channel's target as stored, or ValidationError saying why not."""
    target = target.strip()
    if kind == "pagerduty":
        if not _ROUTING_KEY.fullmatch(target):
            raise ValidationError(
                "a PagerDuty routing key is the 32 letters and digits of an Events API v2 integration "
                "(Service → Integrations → Events API v2)"
            )
        return target
    if kind == "slack" and not target.startswith(tuple(settings.ALERTS_SLACK_URL_PREFIXES)):
        raise ValidationError(
            "a Slack incoming webhook URL starts with https://hooks.slack.com/services/ (Slack app → Incoming Webhooks)"
        )
    try:
        outbound.check_url(target)
    except outbound.OutboundError as exc:
        raise ValidationError(exc.message) from exc
    return target


def clean_addresses(addresses: list[str]) -> list[str]:
    out = []
    for address in addresses:
        address = address.strip()
        try:
            validate_email(address)
        except ValidationError as exc:
            raise ValidationError(f"{address!r} is not an email address") from exc
        out.append(address)
    if not out:
        raise ValidationError("an email channel needs at least one address")
    return out


def webhook_body(m: Message) -> bytes:
    return json.dumps(
        {
            "schema": SCHEMA,
            "event": m.event,
            "sent_at": m.at.isoformat(),
            "alert": {
                "id": m.key,
                "title": m.title,
                "severity": m.severity,
                "summary": m.summary,
                "organization": m.organization,
                "server": m.server,
                "url": m.url,
            },
        },
        separators=(",", ":"),
    ).encode()


_SLACK_MARK = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}


def _slack_escaped(text: str) -> str:
    """Slack's three control characters escaped: a query text's `<http://x|y>` stays text, never a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(m: Message) -> bytes:
    mark = ":white_check_mark:" if m.event == "resolve" else _SLACK_MARK.get(m.severity, "")
    title, summary = _slack_escaped(m.title), _slack_escaped(m.summary)
    head = f"{mark} *{title}*".strip()
    return json.dumps(
        {
            "text": f"{title}: {summary}",  # notifications and clients without blocks
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": f"{head}\n{summary}"}},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{m.url}|Open in pgconsole>"}]},
            ],
        }
    ).encode()


def pagerduty_body(m: Message, routing_key: str) -> bytes:
    event: dict = {"routing_key": routing_key, "dedup_key": m.key}
    if m.event == "resolve":
        event["event_action"] = "resolve"
    else:
        event["event_action"] = "trigger"
        event["payload"] = {
            "summary": f"{m.title}: {m.summary}"[:1024],
            "source": m.server or m.organization,
            "severity": m.severity if m.severity in ("critical", "warning", "info") else "error",
            "timestamp": m.at.isoformat(),
            "custom_details": {"organization": m.organization, "server": m.server},
        }
        event["links"] = [{"href": m.url, "text": "Open in pgconsole"}]
    return json.dumps(event).encode()
