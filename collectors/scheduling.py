"""Which servers are due, claimed with a conditional UPDATE so two dispatchers never enqueue twice."""

from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from inventory.models import Server


def servers_dispatch_due(*, enqueue: Callable[[int, int], None], now: datetime | None = None) -> list[int]:
    """Claim every enabled server whose next collection is due and hand it to `enqueue(server_id, expires_s)`."""
    now = now or timezone.now()
    due = Server.objects.filter(enabled=True).filter(Q(next_collect_at__isnull=True) | Q(next_collect_at__lte=now))
    claimed = []
    for server_id, next_at, interval_s in due.values_list("pk", "next_collect_at", "interval_s"):
        step = timedelta(seconds=interval_s)
        # Keep the cadence (no drift) unless we fell behind by more than one interval.
        following = next_at + step if next_at is not None and next_at + step > now else now + step
        won = Server.objects.filter(pk=server_id, next_collect_at=next_at).update(next_collect_at=following)
        if won:
            enqueue(server_id, interval_s)
            claimed.append(server_id)
    return claimed
