"""Each organization's share of the alert workers.

At most ALERTS_ORG_MAX_SENDING deliveries of one organization's channels are being sent at once, across every
alerts worker: a tenant whose receivers answer slowly, or whose names resolve slowly (each holding a worker
thread until the request's deadline, ALERTS_TIMEOUT_S), takes that many threads and no more, and the other
organizations' deliveries go out on time. A delivery over its organization's share is deferred (alerts.services:
tried again a little later, never lost, the reason on its record).

The share is a row of advisory locks in the console's database, (SHARE_NAMESPACE + slot, organization id) for
each slot below the limit, as readings.shares does for collections (in a namespace of its own, so that the two
shares never count each other): a delivery being sent holds one in its worker thread's session, so a worker that
dies gives its slots back with its connection, and no count can drift.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

from django.db import DatabaseError, connection

SHARE_NAMESPACE = 0x7061_0000  # + slot; readings.shares' is 0x7068_0000, history's and reports' locks are apart


def _try(slot: int, organization_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [SHARE_NAMESPACE + slot, organization_id])
        return cur.fetchone()[0]


def _release(slot: int, organization_id: int) -> None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [SHARE_NAMESPACE + slot, organization_id])
    except DatabaseError:
        pass  # the session is gone, and its lock with it


@contextlib.contextmanager
def held(organization_id: int, limit: int) -> Iterator[bool]:
    """Yields whether a slot of the organization's share is this delivery's for the block (always, with no
    limit). Slots are tried from a random one on, so that concurrent claims seldom meet on the same slot."""
    if limit <= 0:
        yield True
        return
    start = random.randrange(limit)
    slot = next((s for s in ((start + k) % limit for k in range(limit)) if _try(s, organization_id)), None)
    if slot is None:
        yield False
        return
    try:
        yield True
    finally:
        _release(slot, organization_id)


RUNNING_SQL = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid::bigint BETWEEN %s AND %s AND objid::bigint = %s"
)


def running_params(organization_id: int) -> list[int]:
    return [SHARE_NAMESPACE, SHARE_NAMESPACE + 0xFFFF, organization_id]


def running(organization_id: int) -> int:
    """How many of the organization's deliveries hold a slot now, on any worker (RUNNING_SQL: also run by the tests
    from outside the workers)."""
    with connection.cursor() as cur:
        cur.execute(RUNNING_SQL, running_params(organization_id))
        return cur.fetchone()[0]
