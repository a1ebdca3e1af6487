"""Each organization's share of the alert workers (alerts/shares.py): slots held by deliveries being sent, in their
own sessions of the console's database, across threads as across workers, apart from the collections' share. The
share under a real worker and slow receivers: tests/production/test_faults_receivers.py."""

from __future__ import annotations

import pytest

from alerts import shares
from collectors import shares as collection_shares
from tests.history.test_shares import Holder as StoreHolder

pytestmark = pytest.mark.django_db(transaction=True)


def Holder(organization_id: int, limit: int) -> StoreHolder:  # noqa: N802
    """A delivery of its own holding a slot of its organization's share of the alert workers until told."""
    return StoreHolder(shares.SHARE_NAMESPACE, organization_id, limit)


def test_a_delivery_holds_a_slot_of_its_organizations_share_of_the_alert_workers():
    with Holder(7, 1) as sending:
        assert sending.got is True and shares.running(7) == 1
        assert shares.running_params(7) == [shares.SHARE_NAMESPACE, shares.SHARE_NAMESPACE + 0xFFFF, 7]
        with shares.held(7, 1) as mine:
            assert mine is False
        assert collection_shares.running(7) == 0  # the collections' share is another row of locks
    assert shares.running(7) == 0
