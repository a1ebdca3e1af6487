"""Alert channels, rules and deliveries: creating a channel (its target checked and encrypted, up to the
organization's number of channels), sending a test, an organization's default rules and their changes (checked,
with the reason when refused), acknowledging an alert, and one attempt of a delivery, claimed with a conditional
UPDATE so that two workers (or a message delivered twice) never send it twice, one delivery of a channel at a
time and a few of an organization at a time (its share, alerts/shares.py: a tenant's slow receivers hold that
many worker threads, not all), with the outcome recorded on the delivery and on its channel. When an alert
opens, resolves or reminds: alerts/lifecycle.py."""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from advisor.services import organization_thresholds
from alerts import channels, outbound, rule_fields, shares, signing
from alerts.channels import Message
from alerts.defaults import DEFAULT_RULES
from alerts.models import Alert, Channel, Delivery, Rule
from inventory.crypto import decrypt_secret, encrypt_secret
from inventory.models import Organization
from presentation.mail import render_mail

Outcome = Literal["sent", "retry", "failed", "skipped", "busy", "deferred"]
MAX_BACKOFF_S = 3600
BUSY_RETRY_S = (1.0, 3.0)  # a delivery whose channel is sending another tries again within this, at random
# A delivery over its organization's share waits this (at random), doubled each time it waited already, up to
# ALERTS_TIMEOUT_S (within which a slot is let go): a tenant's backlog of thousands is asked about less and less
# often, not every second.
DEFER_S = (1.0, 3.0)
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NewChannel:
    channel: Channel
    signing_secret: str | None  # a webhook's, shown once


def channel_create(
    *,
    organization: Organization,
    name: str,
    kind: str,
    target: str = "",
    addresses: list[str] | None = None,
    user=None,
) -> NewChannel:
    """A channel of `organization`; ValidationError (by field) when its target or addresses are refused, or
    (not by field) when the organization has ALERTS_ORG_MAX_CHANNELS channels already."""
    if kind not in Channel.Kind.values:
        raise ValidationError({"kind": f"one of {', '.join(Channel.Kind.values)}"})
    _room_for_a_channel(organization)  # before the target's check, which may wait on a name's lookup
    channel = Channel(organization=organization, name=name.strip(), kind=kind, created_by=user)
    secret = None
    if kind == Channel.Kind.EMAIL:
        try:
            channel.addresses = channels.clean_addresses(addresses or [])
        except ValidationError as exc:
            raise ValidationError({"addresses": exc.messages}) from exc
    else:
        try:
            channel.target_encrypted = encrypt_secret(channels.clean_target(kind, target))
        except ValidationError as exc:
            raise ValidationError({"target": exc.messages}) from exc
    if kind == Channel.Kind.WEBHOOK:
        secret = signing.new_secret()
        channel.signing_secret_encrypted = encrypt_secret(secret)
    if not channel.name:
        raise ValidationError({"name": "a channel needs a name"})
    with transaction.atomic():
        # Counted again under the organization's row lock: two channels added at once cannot both take the last place.
        Organization.objects.select_for_update().filter(pk=organization.pk).first()
        _room_for_a_channel(organization)
        if Channel.objects.filter(organization=organization, name=channel.name).exists():
            raise ValidationError({"name": f"{organization} has a channel named {channel.name!r} already"})
        channel.save()
    return NewChannel(channel, secret)


def _room_for_a_channel(organization: Organization) -> None:
    """ValidationError (not by field) when the organization has ALERTS_ORG_MAX_CHANNELS channels (0: no limit)."""
    limit = settings.ALERTS_ORG_MAX_CHANNELS
    if limit > 0 and Channel.objects.filter(organization=organization).count() >= limit:
        raise ValidationError(
            {
                NON_FIELD_ERRORS: f"{organization} has {limit} alert channels already, its limit: delete one first "
                "(a console administrator can raise it: ALERTS_ORG_MAX_CHANNELS)"
            }
        )


def channel_send_test(*, channel: Channel, enqueue: Callable[[int], object], now: datetime | None = None) -> Delivery:
    """A test message to the channel, sent by a worker (`enqueue(delivery_id)`, alerts.tasks.deliver)."""
    now = now or timezone.now()
    message = Message(
        event=Delivery.Event.TEST,
        key=f"pgconsole-test-{channel.pk}-{int(now.timestamp())}",
        title=f"Test of the alert channel {channel.name}",
        severity="info",
        summary=f"pgconsole sent this test for {channel.organization.name}: alerts reach this channel.",
        organization=channel.organization.name,
        server=None,
        url=settings.CONSOLE_URL.rstrip("/") + "/",
        at=now,
    )
    (delivery,) = deliveries_create(message=message, to=[channel], alert=None, enqueue=enqueue)
    return delivery


def channel_delete(*, channel: Channel) -> None:
    """Deletes the channel and its deliveries' record. Refused (ValidationError) while a rule notifies it alone:
    a rule with no channel notifies every enabled channel, so the deletion would quietly send that rule's alerts
    to everyone (page a team by mail, or mail a pager) instead of stopping them."""
    alone = [
        rule.name
        for rule in Rule.objects.filter(channels=channel).prefetch_related("channels").order_by("name")
        if len(rule.channels.all()) == 1
    ]
    if alone:
        raise ValidationError(
            f"the rule{'s' if len(alone) > 1 else ''} {', '.join(alone)} notif{'y' if len(alone) > 1 else 'ies'} "
            "only this channel: choose other channels for it first (a rule with none notifies every channel)"
        )
    channel.delete()


def deliveries_create(
    *, message: Message, to: list[Channel], alert: Alert | None, enqueue: Callable[[int], object]
) -> list[Delivery]:
    """One delivery of `message` per channel, each sent by a worker once the caller's transaction commits."""
    made = [
        Delivery.objects.create(
            channel=channel,
            alert=alert,
            event=message.event,
            title=message.title[:300],
            message=_stored(message),
            next_attempt_at=message.at,
        )
        for channel in to
    ]
    for delivery in made:
        transaction.on_commit(lambda pk=delivery.pk: enqueue(pk))
    return made


def _stored(m: Message) -> dict:
    return {**dataclasses.asdict(m), "at": m.at.isoformat()}


def _loaded(d: dict) -> Message:
    return Message(**{**d, "at": datetime.fromisoformat(d["at"])})


def delivery_attempt(*, delivery_id: int, now: datetime | None = None, waited: int = 0) -> Outcome:
    """One attempt, within the organization's share of the alert workers (ALERTS_ORG_MAX_SENDING deliveries at
    once): claimed (a delivery sent, failed or taken by another worker is skipped; one claimed longer ago than
    ALERTS_CLAIM_STALE_S by a worker that died is taken again while attempts remain, and failed once none do),
    sent, recorded. "retry": the caller tries again later, while attempts remain (ALERTS_MAX_ATTEMPTS). "busy":
    another delivery of the same channel is being sent; "deferred": the organization's share is taken, said on
    the delivery (`waited`: how often it was put off already, each wait longer); for both the caller tries again
    at the delivery's next_attempt_at, seconds away, and no attempt is spent."""
    now = now or timezone.now()
    found = Delivery.objects.filter(pk=delivery_id).values_list(
        "channel__organization_id", "channel__organization__name"
    )
    if not (owner := found.first()):
        return "skipped"  # gone with its channel
    organization_id, organization = owner
    limit = settings.ALERTS_ORG_MAX_SENDING
    with shares.held(organization_id, limit) as mine:
        if not mine:
            return _defer(delivery_id, organization, limit, waited, now)
        return _attempt(delivery_id, now)


def _defer(delivery_id: int, organization: str, limit: int, waited: int, now: datetime) -> Outcome:
    """The delivery put off for its organization's share, the reason on its record (shown with its deliveries
    until its attempt says otherwise); "skipped" when it is not waiting to be sent any more."""
    stale = now - timedelta(seconds=settings.ALERTS_CLAIM_STALE_S)
    delay_s = min(random.uniform(*DEFER_S) * 2 ** min(waited, 10), max(DEFER_S[1], settings.ALERTS_TIMEOUT_S))
    said = (
        f"waiting: {limit} other deliver{'y' if limit == 1 else 'ies'} of {organization} "
        f"{'was' if limit == 1 else 'were'} being sent, its share of the alert workers (ALERTS_ORG_MAX_SENDING); "
        "sent once one is done"
    )
    waiting = Delivery.objects.filter(
        Q(status=Delivery.Status.PENDING) | Q(status=Delivery.Status.SENDING, claimed_at__lt=stale), pk=delivery_id
    )
    if not waiting.update(next_attempt_at=now + timedelta(seconds=delay_s), last_error=said):
        return "skipped"
    log.info("alert delivery %s deferred %.1f s: its organization's share of the alert workers", delivery_id, delay_s)
    return "deferred"


def _attempt(delivery_id: int, now: datetime) -> Outcome:
    claimed = _claim(delivery_id, now)
    if claimed != "claimed":
        return claimed
    delivery = Delivery.objects.select_related("channel__organization").get(pk=delivery_id)
    try:
        answer = _send(delivery.channel, _loaded(delivery.message), delivery)
    except outbound.OutboundError as exc:
        return _record_failure(delivery, exc.message, retry=exc.retry, now=now)
    except OSError as exc:  # the mail server
        return _record_failure(delivery, f"the mail server: {exc}", retry=True, now=now)
    status = None if answer is None else answer.status
    if answer is not None and not answer.delivered:
        return _record_failure(delivery, f"answered HTTP {status}", retry=answer.retry, now=now, status=status)
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.SENT, sent_at=now, response_status=status, last_error=""
    )
    Channel.objects.filter(pk=delivery.channel_id).update(consecutive_failures=0, last_error="", last_delivered_at=now)
    return "sent"


def _claim(delivery_id: int, now: datetime) -> Literal["claimed", "skipped", "busy", "failed"]:
    """The delivery marked as being sent by this worker, under its channel's row lock so that two workers never
    send to one channel at once: whatever a receiver does, it holds one thread for ALERTS_TIMEOUT_S at most."""
    stale = now - timedelta(seconds=settings.ALERTS_CLAIM_STALE_S)
    with transaction.atomic():
        channel_id = Delivery.objects.filter(pk=delivery_id).values_list("channel_id", flat=True).first()
        if channel_id is None or not list(Channel.objects.select_for_update().filter(pk=channel_id).values("pk")):
            return "skipped"  # gone with its channel
        mine = Delivery.objects.filter(pk=delivery_id)
        if _fail_exhausted(mine, stale):
            return "failed"
        claimable = mine.filter(
            Q(status=Delivery.Status.PENDING) | Q(status=Delivery.Status.SENDING, claimed_at__lt=stale)
        )
        if not claimable.exists():
            return "skipped"
        sending = Delivery.objects.filter(channel_id=channel_id, status=Delivery.Status.SENDING, claimed_at__gte=stale)
        if sending.exclude(pk=delivery_id).exists():
            mine.filter(status=Delivery.Status.PENDING).update(
                next_attempt_at=now + timedelta(seconds=random.uniform(*BUSY_RETRY_S))
            )
            return "busy"
        claimable.update(status=Delivery.Status.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    return "claimed"


def _fail_exhausted(deliveries, stale: datetime) -> int:
    """Of `deliveries`, those claimed by a worker that died on their last attempt: failed, their channel's
    failures counted. How many."""
    exhausted = list(
        deliveries.filter(
            status=Delivery.Status.SENDING, claimed_at__lt=stale, attempts__gte=settings.ALERTS_MAX_ATTEMPTS
        ).values_list("pk", "channel_id")
    )
    error = "the worker sending its last attempt stopped without an answer"
    for pk, channel_id in exhausted:
        Delivery.objects.filter(pk=pk).update(status=Delivery.Status.FAILED, last_error=error, next_attempt_at=None)
        Channel.objects.filter(pk=channel_id).update(
            consecutive_failures=F("consecutive_failures") + 1, last_error=error
        )
    return len(exhausted)


def retry_delay_s(attempts: int) -> float:
    """How long a delivery waits after its `attempts`-th failed attempt: ALERTS_RETRY_BASE_S, doubled each time."""
    return min(settings.ALERTS_RETRY_BASE_S * 2 ** max(attempts - 1, 0), MAX_BACKOFF_S)


def _record_failure(
    delivery: Delivery, error: str, *, retry: bool, now: datetime, status: int | None = None
) -> Outcome:
    again = retry and delivery.attempts < settings.ALERTS_MAX_ATTEMPTS
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.PENDING if again else Delivery.Status.FAILED,
        last_error=error[:2000],
        response_status=status,
        next_attempt_at=now + timedelta(seconds=retry_delay_s(delivery.attempts)) if again else None,
    )
    if not again:
        Channel.objects.filter(pk=delivery.channel_id).update(
            consecutive_failures=F("consecutive_failures") + 1, last_error=error[:2000]
        )
    return "retry" if again else "failed"


def _send(channel: Channel, m: Message, delivery: Delivery) -> outbound.Answer | None:
    """What the channel's service answered (None for a mail the server took)."""
    if channel.kind == Channel.Kind.EMAIL:
        _mail(channel, m)
        return None
    target = decrypt_secret(channel.target_encrypted)
    headers = {"X-Pgconsole-Delivery": str(delivery.pk)}
    if channel.kind == Channel.Kind.WEBHOOK:
        body = channels.webhook_body(m)
        headers |= signing.signed_headers(decrypt_secret(channel.signing_secret_encrypted), body)
        return outbound.post(target, body, headers)
    if channel.kind == Channel.Kind.SLACK:
        return outbound.post(target, channels.slack_body(m), headers)
    return outbound.post(settings.ALERTS_PAGERDUTY_URL, channels.pagerduty_body(m, target), headers)


def _mail(channel: Channel, m: Message) -> None:
    subject, text, html = render_mail("alerts/alert", {"m": m})
    mail = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, channel.addresses)
    mail.attach_alternative(html, "text/html")
    mail.send()


def deliveries_fail_exhausted(*, now: datetime | None = None) -> int:
    """Beat's tidy task, first: the deliveries claimed by a worker that died on their last attempt (ALERTS_CLAIM_STALE_S
    ago) are failed, never sent again. How many."""
    now = now or timezone.now()
    return _fail_exhausted(Delivery.objects.all(), now - timedelta(seconds=settings.ALERTS_CLAIM_STALE_S))


def deliveries_lost(*, now: datetime | None = None) -> list[int]:
    """Deliveries whose message is gone: pending long past their next attempt, or claimed by a worker that died
    (ALERTS_CLAIM_STALE_S ago) with attempts left; beat's tidy task sends them again. The claim in
    delivery_attempt keeps a delivery that was sent after all from being sent twice, and refuses one past its
    attempts (deliveries_fail_exhausted fails those)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.ALERTS_CLAIM_STALE_S)
    pending = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lt=stale)
    claimed = Delivery.objects.filter(
        status=Delivery.Status.SENDING, claimed_at__lt=stale, attempts__lt=settings.ALERTS_MAX_ATTEMPTS
    )
    return list((pending | claimed).order_by("pk").values_list("pk", flat=True)[:1000])


# -- rules and alerts --------------------------------------------------------------------------------------------

CHANGEABLE = frozenset({"name", "enabled", "tag", *rule_fields.BY_NAME})  # a rule's kind is what it is


def rules_default(*, organization: Organization) -> list[Rule]:
    """The organization's default rules (alerts/defaults.py), one per kind, made once: by name, so that two
    evaluations making them at the same time end with one of each. The deallocation rate is the organization's
    own critical rate where it overrides the advisor's."""
    rate = organization_thresholds(organization=organization).dealloc_critical_per_s
    out = []
    for values in DEFAULT_RULES:
        values = {**values, "dealloc_per_s": rate} if values["kind"] == Rule.Kind.DEALLOC else dict(values)
        rule, _ = Rule.objects.get_or_create(organization=organization, name=values.pop("name"), defaults=values)
        out.append(rule)
    return out


def rule_update(*, rule: Rule, values: dict, channel_ids: list[int] | None = None) -> Rule:
    """Changes `values` (CHANGEABLE) of the rule and, when given, its channels (empty: every enabled channel);
    ValidationError by field when a value is out of its range or a channel is not the organization's."""
    unknown = set(values) - CHANGEABLE
    if unknown:
        raise ValidationError({name: "not a setting of a rule" for name in sorted(unknown)})
    for name, value in values.items():
        setattr(rule, name, value.strip() if isinstance(value, str) else value)
    rule.full_clean()
    with transaction.atomic():
        rule.save()
        if channel_ids is not None:
            chosen = list(Channel.objects.filter(organization_id=rule.organization_id, pk__in=channel_ids))
            if len(chosen) != len(set(channel_ids)):
                raise ValidationError({"channels": f"channels of {rule.organization} only"})
            rule.channels.set(chosen)
    return rule


def alert_acknowledge(*, alert: Alert, user, now: datetime | None = None) -> Alert:
    """Silences the alert's reminders (its resolution is still sent). The first acknowledgement stays; a resolved
    alert has nothing to silence: ValidationError."""
    now = now or timezone.now()
    if alert.state == Alert.State.RESOLVED:
        raise ValidationError("this alert is resolved already")
    Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(acknowledged_at=now, acknowledged_by=user)
    alert.refresh_from_db()
    return alert
