"""An alert's life, evaluation after evaluation: a condition found true is pending until it has been true for its
rule's hold (a shorter flap resolves silently), then open and notified once; notified again when it becomes more
severe than it was said to be; reminded every remind_minutes while open and not acknowledged; resolved and
notified once when it is no longer true.

Each notification is claimed by a conditional UPDATE of its timestamp (`notified_open_at IS NULL`, ...) in the
transaction that makes its deliveries: the evaluation whose UPDATE changed the row sends, a second one of the
same instant or a racing one (beat or a worker restarted) finds it claimed, as the weekly report's send is."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from advisor.models import SEVERITY_RANK
from alerts.channels import Message
from alerts.conditions import Condition, duration, when
from alerts.evidence import conditions_now
from alerts.models import Alert, Channel, Rule
from alerts.services import deliveries_create, rules_default
from collectors.public import plan_soon
from inventory.models import Organization, Server

Enqueue = Callable[[int], object]


@dataclass
class Evaluated:
    """What one evaluation did: notifications claimed (and the deliveries they made)."""

    opened: int = 0
    resolved: int = 0
    reminded: int = 0
    escalated: int = 0
    deliveries: int = 0


def evaluation_groups(*, size: int) -> list[tuple[int, list[int] | None]]:
    """What one evaluation of every rule is cut into, one task each: (organization id, its enabled servers' ids,
    at most `size` of them), or (organization id, None) for an organization of `size` servers or fewer (all of it,
    one task). A large organization is spread over several workers, and one group's failure holds up no other."""
    servers: dict[int, list[int]] = {pk: [] for pk in Organization.objects.order_by("pk").values_list("pk", flat=True)}
    for organization_id, server_id in (
        Server.objects.filter(enabled=True).order_by("pk").values_list("organization_id", "pk")
    ):
        servers[organization_id].append(server_id)
    groups: list[tuple[int, list[int] | None]] = []
    for organization_id, ids in servers.items():
        if len(ids) <= size:
            groups.append((organization_id, None))
        else:
            groups += [(organization_id, ids[i : i + size]) for i in range(0, len(ids), size)]
    return groups


def evaluate_organization(
    *,
    organization: Organization,
    enqueue: Enqueue,
    now: datetime | None = None,
    server_ids: Collection[int] | None = None,
) -> Evaluated:
    """Each rule of the organization (its defaults made first when it has none) over the enabled servers of its
    scope, or of them those in `server_ids` (one group of a large organization: evaluation_groups). A disabled
    rule, or a server that left the scope (disabled, moved, untagged), resolves its alerts."""
    now = now or timezone.now()
    rules = list(Rule.objects.filter(organization=organization).prefetch_related("channels").order_by("pk"))
    if not rules:
        rules = rules_default(organization=organization)
    enabled = Server.objects.filter(organization=organization, enabled=True)
    group = enabled if server_ids is None else enabled.filter(pk__in=server_ids)
    servers = list(group.order_by("pk"))
    # A group answers for the alerts of its servers and of any server no longer enabled in the organization
    # (every group does, the claims keep each resolution to one); the whole organization, for all of them.
    mine = None if server_ids is None else Q(server_id__in=server_ids) | ~Q(server_id__in=enabled.values("pk"))
    done = Evaluated()
    for rule in rules:
        scope = [s for s in servers if not rule.tag or rule.tag in (s.tags or [])] if rule.enabled else []
        found = conditions_now(rule=rule, servers=scope, now=now) if scope else {}
        _apply(rule, {s.pk for s in scope}, found, now, enqueue, done, mine)
    return done


def _apply(
    rule: Rule,
    scope: set[int],
    found: dict[int, list[Condition]],
    now: datetime,
    enqueue: Enqueue,
    done: Evaluated,
    mine: Q | None,
) -> None:
    true_now = set()
    for conditions in found.values():
        for condition in conditions:
            true_now.add(condition.key)
            alert = _seen(rule, condition, now)
            if alert is not None:
                if condition.statement_id is not None and alert.state == Alert.State.PENDING:
                    # A regression's likeliest cause is a new plan: read it while the alert waits out its hold,
                    # so that the alert names the change when it opens (the plans worker, within the budget).
                    plan_soon(condition.server_id, condition.statement_id)
                _progress(rule, alert, now, enqueue, done)
    unresolved = rule.alerts.exclude(state=Alert.State.RESOLVED)
    for alert in (unresolved if mine is None else unresolved.filter(mine)).select_related("server"):
        unread = alert.server_id in scope and alert.server_id not in found  # a failed read: left as it was
        if alert.key not in true_now and not unread:
            _resolve(rule, alert, now, enqueue, done)


def _seen(rule: Rule, c: Condition, now: datetime) -> Alert | None:
    """The condition's unresolved alert with its words and figures as of now; made pending if it has none. None:
    an evaluation of a later instant resolved it meanwhile (the next evaluation makes it again if still true)."""
    words = {
        "severity": c.severity,
        "title": c.title[:300],
        "summary": c.summary,
        "figures": c.figures,
        "change_text": c.change_text,
        "config_changes": list(c.config_changes),
        "path": c.path,
        "last_true_at": now,
    }
    current = Alert.objects.filter(rule=rule, key=c.key).exclude(state=Alert.State.RESOLVED)
    if not current.update(**words):
        try:
            with transaction.atomic():
                Alert.objects.create(
                    rule=rule, server_id=c.server_id, key=c.key, since=c.since, first_true_at=now, **words
                )
        except IntegrityError:  # a racing evaluation made it first (one unresolved alert per condition)
            current.update(**words)
    return current.select_related("server").first()


def _progress(rule: Rule, alert: Alert, now: datetime, enqueue: Enqueue, done: Evaluated) -> None:
    """Opens the alert once it has been true for the rule's hold, notifies its opening once, its escalation to a
    higher severity once each time, and reminds."""
    with transaction.atomic():
        if alert.state == Alert.State.PENDING and now - alert.first_true_at >= timedelta(minutes=rule.hold_minutes):
            Alert.objects.filter(pk=alert.pk, state=Alert.State.PENDING).update(state=Alert.State.OPEN, opened_at=now)
        opening = Q(state=Alert.State.OPEN, notified_open_at__isnull=True)
        if _claim(alert, opening, notified_open_at=now, notified_severity=alert.severity):
            done.opened += 1
            done.deliveries += _notify(rule, alert, "open", now, enqueue)
            return
    was = alert.notified_severity
    if alert.notified_open_at is not None and SEVERITY_RANK[alert.severity] > SEVERITY_RANK.get(was, -1):
        with transaction.atomic():
            # Worse than it was said to be: told once more, acknowledged or not (an acknowledgement silences
            # reminders of what was acknowledged). A lower severity is only shown, never sent.
            if _claim(alert, Q(state=Alert.State.OPEN, notified_severity=was), notified_severity=alert.severity):
                done.escalated += 1
                done.deliveries += _notify(rule, alert, "escalate", now, enqueue, was=was)
        return
    if not rule.remind_minutes or alert.acknowledged_at is not None or alert.notified_open_at is None:
        return
    last = alert.last_reminded_at or alert.notified_open_at
    if now - last < timedelta(minutes=rule.remind_minutes):
        return
    with transaction.atomic():
        # Claimed on the value read: of two evaluations, the one whose UPDATE still sees it reminds.
        claim = Q(state=Alert.State.OPEN, acknowledged_at__isnull=True)
        claim &= Q(last_reminded_at=alert.last_reminded_at) if alert.last_reminded_at else Q(last_reminded_at=None)
        if _claim(alert, claim, last_reminded_at=now):
            done.reminded += 1
            done.deliveries += _notify(rule, alert, "remind", now, enqueue)


def _resolve(rule: Rule, alert: Alert, now: datetime, enqueue: Enqueue, done: Evaluated) -> None:
    """Resolved; notified only when its opening was (a pending flap ends silently)."""
    with transaction.atomic():
        if not _claim(alert, ~Q(state=Alert.State.RESOLVED), state=Alert.State.RESOLVED, resolved_at=now):
            return
        if _claim(alert, Q(notified_open_at__isnull=False, notified_resolve_at__isnull=True), notified_resolve_at=now):
            done.resolved += 1
            done.deliveries += _notify(rule, alert, "resolve", now, enqueue)


def _claim(alert: Alert, condition: Q, **changes) -> bool:
    """The conditional UPDATE: True for the one caller that changed the row (the alert is then read again)."""
    if not Alert.objects.filter(condition, pk=alert.pk).update(**changes):
        return False
    alert.refresh_from_db()
    return True


def _notify(rule: Rule, alert: Alert, event: str, now: datetime, enqueue: Enqueue, *, was: str = "") -> int:
    """Deliveries of the event to the rule's channels (none chosen: every enabled channel of the organization)."""
    named = list(rule.channels.all())  # prefetched by evaluate_organization
    chosen = [c for c in named if c.enabled]
    if not named:
        chosen = list(Channel.objects.filter(organization_id=rule.organization_id, enabled=True).order_by("pk"))
    message = message_of(alert, event, now, was=was)
    return len(deliveries_create(message=message, to=chosen, alert=alert, enqueue=enqueue))


def message_of(alert: Alert, event: str, now: datetime, *, was: str = "") -> Message:
    """Plain words first (which server, what happened, how bad, since when), then the figures and a link."""
    server = alert.server
    opened = alert.opened_at or now
    if event == "resolve":
        summary = (
            f"Resolved at {when(now)}, after {duration(now - opened)} open (true since {when(alert.since)}). "
            f"It was: {alert.summary}"
        )
    elif event == "escalate":
        summary = f"Now {alert.severity}, was {was or 'less severe'} when notified. {alert.summary}"
    elif event == "remind":
        summary = f"Still open after {duration(now - opened)}, not acknowledged. {alert.summary}"
    else:
        summary = alert.summary
    return Message(
        event=event,
        key=alert.dedup_key,
        title=f"{server.name}: {alert.title}",
        severity=alert.severity,
        summary=summary,
        organization=alert.rule.organization.name,
        server=server.name,
        url=settings.CONSOLE_URL.rstrip("/") + alert.path,
        at=now,
    )
