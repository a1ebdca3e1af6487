"""An organization's share of a kind of worker thread: at most a limit of its jobs of that kind run at once, across
every worker (the collections' share, the plans', the alert deliveries': collectors.shares, alerts.shares).

The share is a row of advisory locks in the history store, (namespace + slot, organization id) for each slot below
the limit, each kind in a namespace of its own (apart from history.LOCK_NAMESPACE's keys and from each other's: a
slot number stays below 0x10000): a running job holds one in its worker's session, so a worker that dies gives its
slots back with its connection, and no count can drift.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

from django.db import DatabaseError, connection


def _try(namespace: int, slot: int, organization_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace + slot, organization_id])
        return cur.fetchone()[0]


def _release(namespace: int, slot: int, organization_id: int) -> None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace + slot, organization_id])
    except DatabaseError:
        pass  # the session is gone, and its lock with it


@contextlib.contextmanager
def held(namespace: int, organization_id: int, limit: int) -> Iterator[bool]:
    """Yields whether a slot of the organization's share is this job's for the block (always, with no limit).
    Slots are tried from a random one on, so that concurrent claims seldom meet on the same slot."""
    if limit <= 0:
        yield True
        return
    start = random.randrange(limit)
    tried = ((start + k) % limit for k in range(limit))
    slot = next((s for s in tried if _try(namespace, s, organization_id)), None)
    if slot is None:
        yield False
        return
    try:
        yield True
    finally:
        _release(namespace, slot, organization_id)


RUNNING_SQL = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid::bigint BETWEEN %s AND %s AND objid::bigint = %s"
)


def running_params(namespace: int, organization_id: int) -> list[int]:
    return [namespace, namespace + 0xFFFF, organization_id]


def running(namespace: int, organization_id: int) -> int:
    """How many of the organization's jobs of that kind hold a slot now, on any worker (RUNNING_SQL: also run by the
    tests from outside the workers)."""
    with connection.cursor() as cur:
        cur.execute(RUNNING_SQL, running_params(namespace, organization_id))
        return cur.fetchone()[0]
