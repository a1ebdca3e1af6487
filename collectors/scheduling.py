"""Which servers are due, claimed with a conditional UPDATE so two dispatchers never enqueue twice.

Every server has a phase within its interval, fixed by its id: servers registered together (a fleet
imported at once, or every server after a restart) are not all due in the same second of every
minute, so a worker meets an even stream of collections instead of a wave it takes most of the
interval to drain. A new server is collected at once, then on its phase.
"""

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from inventory.models import Server

_GOLDEN = (math.sqrt(5) - 1) / 2  # successive ids land far apart in the interval, whatever its length
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def spread(server_id: int) -> float:
    """The server's place in any period, in [0, 1): successive ids land far apart."""
    return (server_id * _GOLDEN) % 1.0


def phase_s(server_id: int, interval_s: float) -> float:
    """Seconds past every multiple of `interval_s` since the UTC epoch at which the server is due."""
    return round(spread(server_id) * interval_s, 3)


def next_due(server_id: int, interval_s: int, after: datetime) -> datetime:
    """The server's first due time strictly after `after`."""
    offset = phase_s(server_id, interval_s)
    since = (after - _EPOCH).total_seconds() - offset
    slot = math.floor(since / interval_s) + 1
    return _EPOCH + timedelta(seconds=slot * interval_s + offset)


def servers_dispatch_due(
    *, enqueue: Callable[[int, float, float], None], now: datetime | None = None, horizon_s: float = 0.0
) -> list[int]:
    """Claim every enabled server due by `now + horizon_s` and hand it to `enqueue(server_id, expires_s,
    countdown_s)`: a server due before the dispatcher's next tick is sent now, to run at its due time (the
    countdown), so that it is not late by up to a tick; one already due runs at once."""
    now = now or timezone.now()
    until = now + timedelta(seconds=horizon_s)
    due = Server.objects.filter(enabled=True).filter(Q(next_collect_at__isnull=True) | Q(next_collect_at__lte=until))
    claimed = []
    for server_id, next_at, interval_s in due.values_list("pk", "next_collect_at", "interval_s"):
        runs_at = max(now, next_at) if next_at is not None else now
        # The next slot on the server's phase: the cadence is kept, and a dispatcher that fell behind by
        # more than an interval skips the slots it missed rather than enqueueing them all at once.
        following = next_due(server_id, interval_s, runs_at)
        won = Server.objects.filter(pk=server_id, next_collect_at=next_at).update(next_collect_at=following)
        if won:
            countdown_s = (runs_at - now).total_seconds()
            enqueue(server_id, countdown_s + interval_s, countdown_s)
            claimed.append(server_id)
    return claimed
