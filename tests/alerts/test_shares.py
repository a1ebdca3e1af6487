"""Each organization's share of the alert workers (alerts/shares.py): slots held by deliveries being sent, in their
own sessions of the console's database, across threads as across workers, apart from the collections' share. The
share under a real worker and slow receivers: tests/production/test_faults_receivers.py."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from alerts import shares
from readings import shares as collection_shares

pytestmark = pytest.mark.django_db(transaction=True)


class Holder(threading.Thread):
    """A delivery of its own, in a thread (its own session), holding a slot of its organization's share until told."""

    def __init__(self, organization_id: int, limit: int):
        super().__init__(daemon=True)
        self.organization_id, self.limit = organization_id, limit
        self.got: bool | None = None
        self.holding, self.done = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with shares.held(self.organization_id, self.limit) as mine:
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


def test_no_more_deliveries_of_an_organization_hold_a_slot_than_its_share_and_a_slot_let_go_is_taken_again():
    with Holder(7, 2) as a, Holder(7, 2) as b:
        assert (a.got, b.got) == (True, True)
        assert shares.running(7) == 2
        with Holder(7, 2) as c, Holder(8, 2) as other:
            assert c.got is False, "the organization's two slots are held"
            assert other.got is True, "another organization's share is its own"
            assert shares.running(8) == 1
        # The collections' share of the same organization is another row of locks: neither counts the other.
        assert collection_shares.running(7) == 0
        with collection_shares.held(7, 1) as collecting:
            assert collecting and shares.running(7) == 2
    assert shares.running(7) == 0
    with Holder(7, 2) as again:
        assert again.got is True


def test_with_no_limit_every_delivery_goes_and_holds_nothing():
    holders = [Holder(7, 0) for _ in range(3)]
    for h in holders:
        h.__enter__()
    try:
        assert [h.got for h in holders] == [True] * 3
        assert shares.running(7) == 0
    finally:
        for h in holders:
            h.__exit__()
