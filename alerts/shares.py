"""Each organization's share of the alert workers.

At most ALERTS_ORG_MAX_SENDING deliveries of one organization's channels are being sent at once, across every
alerts worker: a tenant whose receivers answer slowly, or whose names resolve slowly (each holding a worker
thread until the request's deadline, ALERTS_TIMEOUT_S), takes that many threads and no more, and the other
organizations' deliveries go out on time. A delivery over its organization's share is deferred (alerts.services:
tried again a little later, never lost, the reason on its record).

The share is history.shares', as for collections and plans, in a namespace of its own (the shares never count
each other): a delivery being sent holds a slot in its worker thread's session.
"""

from __future__ import annotations

import contextlib

from history.public import worker_shares

SHARE_NAMESPACE = 0x7061_0000  # + slot; the collections' and the plans' are 0x7068_0000 and 0x7069_0000
RUNNING_SQL = worker_shares.RUNNING_SQL


def held(organization_id: int, limit: int) -> contextlib.AbstractContextManager:
    """Whether a slot of the organization's share is this delivery's, for the block (history.shares.held)."""
    return worker_shares.held(SHARE_NAMESPACE, organization_id, limit)


def running_params(organization_id: int) -> list[int]:
    return worker_shares.running_params(SHARE_NAMESPACE, organization_id)


def running(organization_id: int) -> int:
    """How many of the organization's deliveries hold a slot now, on any worker."""
    return worker_shares.running(SHARE_NAMESPACE, organization_id)
