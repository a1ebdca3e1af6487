"""Each organization's share of a kind of worker thread (history/shares.py): slots held by running jobs in their own
sessions of the history store, across threads as across workers, each kind's share apart from the others'. The
shares at work: collections and plans (tests/collectors/test_shares.py, tests/production/test_faults_fleet.py,
tests/collectors/test_tasks.py), alert deliveries (tests/alerts/test_shares.py,
tests/production/test_faults_receivers.py)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from alerts import shares as alert_shares
from collectors import shares as reading_shares
from history import shares

pytestmark = pytest.mark.django_db(transaction=True)
KINDS = (reading_shares.SHARE_NAMESPACE, reading_shares.PLANS_NAMESPACE, alert_shares.SHARE_NAMESPACE)


class Holder(threading.Thread):
    """A job of its own, in a thread (its own session of the history store), holding a slot of its organization's
    share of `namespace` until told."""

    def __init__(self, namespace: int, organization_id: int, limit: int):
        super().__init__(daemon=True)
        self.namespace, self.organization_id, self.limit = namespace, organization_id, limit
        self.got: bool | None = None
        self.holding, self.done = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with shares.held(self.namespace, self.organization_id, self.limit) as mine:
                self.got = mine
                self.holding.set()
                self.done.wait(30)
        finally:
            connection.close()

    def __enter__(self) -> Holder:
        self.start()
        assert self.holding.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join(30)


@pytest.mark.parametrize("namespace", KINDS)
def test_no_more_jobs_of_an_organization_hold_a_slot_than_its_limit_and_a_slot_let_go_is_taken_again(namespace):
    with Holder(namespace, 7, 2) as a, Holder(namespace, 7, 2) as b:
        assert (a.got, b.got) == (True, True)
        assert shares.running(namespace, 7) == 2
        with Holder(namespace, 7, 2) as c, Holder(namespace, 8, 2) as other:
            assert c.got is False, "the organization's two slots are held"
            assert other.got is True, "another organization's share is its own"
            assert shares.running(namespace, 8) == 1
    assert shares.running(namespace, 7) == 0
    with Holder(namespace, 7, 2) as again:
        assert again.got is True


def test_each_kinds_share_is_apart_from_the_others():
    assert len(set(KINDS)) == 3 and all(abs(a - b) > 0xFFFF for a in KINDS for b in KINDS if a != b)
    holders = [Holder(namespace, 7, 1) for namespace in KINDS]
    for h in holders:
        h.__enter__()
    try:
        assert [h.got for h in holders] == [True] * 3, "one slot of each kind: none counts another's"
        assert [shares.running(namespace, 7) for namespace in KINDS] == [1, 1, 1]
        with Holder(KINDS[1], 7, 1) as second:
            assert second.got is False
    finally:
        for h in holders:
            h.__exit__()


def test_with_no_limit_every_job_runs_and_holds_nothing():
    holders = [Holder(KINDS[0], 7, 0) for _ in range(3)]
    for h in holders:
        h.__enter__()
    try:
        assert [h.got for h in holders] == [True] * 3
        assert shares.running(KINDS[0], 7) == 0
    finally:
        for h in holders:
            h.__exit__()
