"""Each organization's share of the collection workers, and of the plans worker.

At most `Organization.collecting_limit()` collections of one organization's servers run at once, across every
worker: a tenant whose servers answer slowly (each holding a worker thread until its snapshot's deadline) takes
that many threads and no more, and the other organizations' collections keep their cadence. A collection over
its organization's share is put off a second or two, and skipped once its server's next collection is due
(collectors.tasks). Plan jobs (a server's round, one statement's EXPLAIN asked for) have a share of their own,
`Organization.planning_limit()` (PLANS_NAMESPACE; collectors.plans.service.plans_slot).

The share is history.shares', in a namespace of each kind's own.
"""

from __future__ import annotations

import contextlib

from history.public import worker_shares

SHARE_NAMESPACE = 0x7068_0000  # the collections'
PLANS_NAMESPACE = 0x7069_0000  # the plans worker's
RUNNING_SQL = worker_shares.RUNNING_SQL


def held(organization_id: int, limit: int, *, namespace: int = SHARE_NAMESPACE) -> contextlib.AbstractContextManager:
    """Whether a slot of the organization's share is this job's, for the block (history.shares.held)."""
    return worker_shares.held(namespace, organization_id, limit)


def running_params(organization_id: int, *, namespace: int = SHARE_NAMESPACE) -> list[int]:
    return worker_shares.running_params(namespace, organization_id)


def running(organization_id: int, *, namespace: int = SHARE_NAMESPACE) -> int:
    """How many of the organization's jobs (collections, or plan jobs with PLANS_NAMESPACE) hold a slot now."""
    return worker_shares.running(namespace, organization_id)
