"""The alert channels, rules, alerts and deliveries as the console's pages and the API show them (frozen
dataclasses, a fixed number of queries each). A channel's secret never leaves here: a Slack or webhook URL is
read for its host alone (the path of a Slack URL is its credential), a PagerDuty routing key and a signing
secret not at all. Every selector takes the organizations the caller may see, so a row of another one is
simply not found (the views answer 404)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from advisor.models import Severity
from alerts import rule_fields
from alerts.models import Alert, Channel, Delivery, Rule
from inventory.crypto import CredentialsError, decrypt_secret

# The thresholds that apply to each kind of rule (the others are stored but never read for it); every kind also
# has hold_minutes, remind_minutes, tag and enabled.
THRESHOLDS: dict[str, tuple[str, ...]] = {
    kind: tuple(f.name for f in rule_fields.of_kind(kind)) for kind in Rule.Kind.values
}
# An alert list's ?state=: one state, or "active" (pending and open: what is still going on).
STATES: dict[str, tuple[str, ...]] = {
    "active": (Alert.State.PENDING, Alert.State.OPEN),
    **{s: (s,) for s in Alert.State.values},
}


@dataclass(frozen=True)
class ChannelRow:
    id: int
    organization_id: int
    name: str
    kind: str  # email | slack | pagerduty | webhook
    target_host: str | None  # a Slack or webhook URL's host; None for PagerDuty (a key) and email
    addresses: list[str]  # email's recipients
    enabled: bool
    created_at: datetime
    consecutive_failures: int  # deliveries that failed for good since the last one delivered
    last_error: str
    last_delivered_at: datetime | None

    @property
    def failing(self) -> bool:
        return self.consecutive_failures > 0


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    channel_id: int
    alert_id: int | None  # None: a test
    event: str  # test | open | resolve | remind
    title: str
    status: str  # pending | sending | sent | failed
    attempts: int
    response_status: int | None
    last_error: str
    created_at: datetime
    sent_at: datetime | None


@dataclass(frozen=True)
class RuleRow:
    id: int
    organization_id: int
    name: str
    kind: str
    enabled: bool
    tag: str  # "": every server of the organization
    channel_ids: list[int]  # []: every enabled channel
    channels: list[str]  # their names, in the same order
    values: dict[str, int | float | str]  # every setting of alerts.rule_fields by name: hold_minutes, down_minutes…

    @property
    def thresholds(self) -> tuple[str, ...]:
        """The names of the thresholds its kind reads."""
        return THRESHOLDS.get(self.kind, ())


@dataclass(frozen=True)
class AlertRow:
    id: int
    organization_id: int
    rule_id: int
    rule: str
    rule_kind: str
    server_id: int
    server: str
    state: str  # pending | open | resolved
    severity: str
    title: str  # may hold a query's text: untrusted, escaped where shown
    summary: str
    figures: dict
    change_text: str
    config_changes: list[dict]
    since: datetime
    opened_at: datetime | None
    resolved_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    path: str  # the console's page of what raised it
    dedup_key: str

    @property
    def acknowledgeable(self) -> bool:
        return self.state != Alert.State.RESOLVED and self.acknowledged_at is None


def _scoped(qs: QuerySet, field: str, organization_ids: Iterable[int] | None) -> QuerySet:
    """`qs` limited to these organizations (None: every one, a console administrator's)."""
    return qs if organization_ids is None else qs.filter(**{f"{field}__in": list(organization_ids)})


def _host(channel: Channel) -> str | None:
    if channel.kind not in (Channel.Kind.SLACK, Channel.Kind.WEBHOOK) or not channel.target_encrypted:
        return None
    try:
        return urlsplit(decrypt_secret(channel.target_encrypted)).hostname
    except (ValueError, CredentialsError):  # not a URL, or another CREDENTIALS_KEY's: no host, the page still shows
        return None


def _channel_row(c: Channel) -> ChannelRow:
    return ChannelRow(
        id=c.pk,
        organization_id=c.organization_id,
        name=c.name,
        kind=c.kind,
        target_host=_host(c),
        addresses=list(c.addresses or []),
        enabled=c.enabled,
        created_at=c.created_at,
        consecutive_failures=c.consecutive_failures,
        last_error=c.last_error,
        last_delivered_at=c.last_delivered_at,
    )


def alert_channels(*, organization_id: int) -> list[ChannelRow]:
    """The organization's channels by name (one query)."""
    return [_channel_row(c) for c in Channel.objects.filter(organization_id=organization_id).order_by("name", "pk")]


def alert_channel(*, channel_id: int, organization_ids: Iterable[int] | None) -> ChannelRow | None:
    found = _scoped(Channel.objects.filter(pk=channel_id), "organization_id", organization_ids).first()
    return None if found is None else _channel_row(found)


def _delivery_row(d) -> DeliveryRow:
    return DeliveryRow(
        id=d.pk,
        channel_id=d.channel_id,
        alert_id=d.alert_id,
        event=d.event,
        title=d.title,
        status=d.status,
        attempts=d.attempts,
        response_status=d.response_status,
        last_error=d.last_error,
        created_at=d.created_at,
        sent_at=d.sent_at,
    )


_DELIVERY_FIELDS = (
    "pk",
    "channel_id",
    "alert_id",
    "event",
    "title",
    "status",
    "attempts",
    "response_status",
    "last_error",
    "created_at",
    "sent_at",
)


def channel_deliveries(*, channel_id: int, offset: int = 0, limit: int = 50) -> tuple[int, list[DeliveryRow]]:
    """(how many, a page of) the channel's deliveries, newest first (two queries)."""
    qs = Delivery.objects.filter(channel_id=channel_id)
    rows = qs.order_by("-created_at", "-pk").only(*_DELIVERY_FIELDS)[offset : offset + limit]
    return qs.count(), [_delivery_row(d) for d in rows]


NEWEST = [F("created_at").desc(), F("pk").desc()]


def recent_deliveries(*, channel_ids: Iterable[int], per_channel: int = 5) -> dict[int, list[DeliveryRow]]:
    """The last `per_channel` deliveries of each channel, newest first, in one query (the channels' page shows
    them under each channel: a query per channel would grow with the organization)."""
    ranked = (
        Delivery.objects.filter(channel_id__in=list(channel_ids))
        .only(*_DELIVERY_FIELDS)
        .annotate(rank=Window(RowNumber(), partition_by=F("channel_id"), order_by=NEWEST))
        .filter(rank__lte=per_channel)
        .order_by("channel_id", "rank")
    )
    out: dict[int, list[DeliveryRow]] = {}
    for d in ranked:
        out.setdefault(d.channel_id, []).append(_delivery_row(d))
    return out


def _rule_row(r: Rule) -> RuleRow:
    chosen = sorted(r.channels.all(), key=lambda c: (c.name, c.pk))  # prefetched
    return RuleRow(
        id=r.pk,
        organization_id=r.organization_id,
        name=r.name,
        kind=r.kind,
        enabled=r.enabled,
        tag=r.tag,
        channel_ids=[c.pk for c in chosen],
        channels=[c.name for c in chosen],
        values={f.name: getattr(r, f.name) for f in rule_fields.FIELDS},
    )


_KIND_ORDER = {kind: i for i, kind in enumerate(Rule.Kind.values)}


def alert_rules(*, organization_id: int) -> list[RuleRow]:
    """The organization's rules in the order of the defaults (server down first), then by name (two queries)."""
    rules = Rule.objects.filter(organization_id=organization_id).prefetch_related("channels")
    return sorted((_rule_row(r) for r in rules), key=lambda r: (_KIND_ORDER.get(r.kind, 99), r.name, r.id))


def alert_rule(*, rule_id: int, organization_ids: Iterable[int] | None) -> RuleRow | None:
    qs = _scoped(Rule.objects.filter(pk=rule_id), "organization_id", organization_ids).prefetch_related("channels")
    found = qs.first()
    return None if found is None else _rule_row(found)


def _alert_row(a: Alert) -> AlertRow:
    return AlertRow(
        id=a.pk,
        organization_id=a.rule.organization_id,
        rule_id=a.rule_id,
        rule=a.rule.name,
        rule_kind=a.rule.kind,
        server_id=a.server_id,
        server=a.server.name,
        state=a.state,
        severity=a.severity,
        title=a.title,
        summary=a.summary,
        figures=dict(a.figures or {}),
        change_text=a.change_text,
        config_changes=list(a.config_changes or []),
        since=a.since,
        opened_at=a.opened_at,
        resolved_at=a.resolved_at,
        acknowledged_at=a.acknowledged_at,
        acknowledged_by=a.acknowledged_by.get_username() if a.acknowledged_by else None,
        # Made by the rules (alerts/conditions.py); only a path of the console itself is ever linked.
        path=a.path if a.path.startswith("/") and not a.path.startswith("//") else "/",
        dedup_key=a.dedup_key,
    )


def _alerts(organization_id: int, states: Iterable[str]) -> QuerySet[Alert]:
    return (
        Alert.objects.filter(rule__organization_id=organization_id, state__in=list(states))
        .select_related("rule", "server", "acknowledged_by")
        .order_by("-since", "-pk")
    )


def alerts_page(
    *, organization_id: int, state: str | None = None, offset: int = 0, limit: int = 50
) -> tuple[int, list[AlertRow]]:
    """(how many, a page of) the organization's alerts in `state` (a key of STATES; None: every state), the
    newest condition first (two queries)."""
    qs = _alerts(organization_id, STATES[state] if state else Alert.State.values)
    return qs.count(), [_alert_row(a) for a in qs[offset : offset + limit]]


def alerts_overview(*, organization_id: int, history: int = 50) -> tuple[list[AlertRow], list[AlertRow]]:
    """(every active alert, the last `history` resolved ones) for the alerts' page: what is going on first
    (two queries)."""
    active = [_alert_row(a) for a in _alerts(organization_id, STATES["active"])]
    resolved = [_alert_row(a) for a in _alerts(organization_id, STATES["resolved"])[:history]]
    return active, resolved


def alert_detail(*, alert_id: int, organization_ids: Iterable[int] | None) -> AlertRow | None:
    qs = Alert.objects.filter(pk=alert_id).select_related("rule", "server", "acknowledged_by")
    found = _scoped(qs, "rule__organization_id", organization_ids).first()
    return None if found is None else _alert_row(found)


def open_alert_counts(*, server_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per server (every id asked for), its open alerts by severity, every severity present (0 where none)."""
    ids = list(server_ids)
    out = {sid: dict.fromkeys(Severity.values, 0) for sid in ids}
    for server_id, severity, n in (
        Alert.objects.filter(server_id__in=ids, state=Alert.State.OPEN)
        .values_list("server_id", "severity")
        .annotate(n=Count("id"))
    ):
        out[server_id][severity] = n
    return out


def failing_deliveries(*, since: datetime) -> dict[str, int]:
    """Per channel kind (every kind, 0 where none): the deliveries failing now, waiting for a retry after a failed
    attempt, or given up since `since`."""
    out = dict.fromkeys(Channel.Kind.values, 0)
    retrying = Q(status=Delivery.Status.PENDING, attempts__gt=0)
    given_up = Q(status=Delivery.Status.FAILED, created_at__gte=since)
    for kind, n in Delivery.objects.filter(retrying | given_up).values_list("channel__kind").annotate(n=Count("id")):
        out[kind] = n
    return out
