"""Each organization's share of the collection workers, and of the plans worker (collectors.shares, on
history.shares, whose slots tests/history/test_shares.py holds): a job over it put off, an organization's own limit.
The collections' share under a real worker, beat and slow servers: tests/production/test_faults_fleet.py; the
plans' under a real plans worker: tests/collectors/test_tasks.py."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from collectors import shares, tasks
from collectors.services import server_collect
from history.models import FailedCollection
from inventory.models import Organization
from tests.history.test_shares import Holder as StoreHolder
from tests.world import collect, register

pytestmark = pytest.mark.django_db(transaction=True)


def Holder(organization_id: int, limit: int, namespace: int = shares.SHARE_NAMESPACE) -> StoreHolder:  # noqa: N802
    """A job of its own holding a slot of the collections' share (or `namespace`'s) until told (a context)."""
    return StoreHolder(namespace, organization_id, limit)


def test_a_collection_over_its_organizations_share_is_put_off_not_failed(pg_clusters, settings):
    settings.ORG_MAX_COLLECTING = 1
    server = register(pg_clusters[15])
    with Holder(server.organization_id, 1):
        result = server_collect(server_id=server.pk)
    assert (result.ok, result.kind, result.error_code) == (False, "over_share", "over_share")
    assert "its share (ORG_MAX_COLLECTING)" in result.error
    server.refresh_from_db()
    assert server.last_attempt_at is None and server.consecutive_failures == 0
    assert not FailedCollection.objects.filter(server=server).exists()
    assert collect(server).kind == "baseline"  # the slot let go: collected


def test_an_organizations_own_limit_wins_over_the_setting(settings):
    org = Organization.objects.create(name="tenant")
    assert org.collecting_limit() == 0, "no limit by default: one organization's fleet may use every worker"
    settings.ORG_MAX_COLLECTING = 6
    assert org.collecting_limit() == 6
    org.max_collecting = 0
    assert org.collecting_limit() == 0  # no limit for this one
    org.max_collecting = 2
    assert org.collecting_limit() == 2


def test_an_organizations_own_plans_limit_wins_over_the_setting(settings):
    org = Organization.objects.create(name="tenant")
    assert org.planning_limit() == 0, "no limit by default, as the collections'"
    settings.ORG_MAX_PLANNING = 3
    assert org.planning_limit() == 3
    org.max_planning = 0
    assert org.planning_limit() == 0
    org.max_planning = 1
    assert (org.planning_limit(), org.collecting_limit()) == (1, 0)


@pytest.mark.parametrize(
    ("in_s", "form"),
    [(-1.0, "aware"), (0.5, "naive string"), (0.9, "aware string")],
    ids=["past", "naive-string", "sooner-than-a-put-off"],
)
def test_a_collection_put_off_past_its_servers_next_one_is_skipped_and_said(in_s, form, caplog):
    """Celery hands the task its message's expiry as a string or a datetime; a put-off waits a second at least."""
    expires = datetime.now(UTC) + timedelta(seconds=in_s)
    if form == "naive string":
        expires = expires.replace(tzinfo=None).isoformat()
    elif form == "aware string":
        expires = expires.isoformat()
    task = SimpleNamespace(request=SimpleNamespace(expires=expires, id="t-1"))
    assert tasks._put_off(task, 42, tracked=False) is False
    assert "collection of server 42 skipped: its organization's share" in caplog.text


def _task(expires, put_off: int = 0) -> SimpleNamespace:
    """What collectors.tasks reads of a running task: its message's expiry and id, and how to send it again."""
    sent: list = []
    return SimpleNamespace(
        request=SimpleNamespace(expires=expires, id="t-2"),
        apply_async=lambda *a, **k: sent.append((a, k)),
        sent=sent,
    )


def test_a_plan_job_over_its_share_is_put_off_longer_each_time_up_to_a_bound():
    expires = datetime.now(UTC) + timedelta(minutes=10)
    waits = []
    for put_off in range(8):
        task = _task(expires)
        assert tasks._plan_put_off(task, (42,), {"put_off": put_off}, "plan round of server 42") is True
        ((args, kwargs),) = task.sent
        assert args == ((42,), {"put_off": put_off + 1}) and kwargs["task_id"] == "t-2" and kwargs["expires"] == expires
        waits.append(kwargs["countdown"])
    first, most = tasks.PLAN_PUT_OFF_S
    assert first * 0.5 <= waits[0] <= first * 1.5
    assert all(most * 0.5 <= w <= most * 1.5 for w in waits[5:]), waits


def test_a_plan_job_put_off_past_its_expiry_is_skipped_and_said_and_whoever_asked_is_told(caplog):
    task = _task((datetime.now(UTC) + timedelta(seconds=0.2)).isoformat())
    assert tasks._plan_put_off(task, (42,), {"put_off": 0}, "plan round of server 42") is False
    assert not task.sent
    assert "plan round of server 42 skipped: its organization's share of the plans worker" in caplog.text
    # An EXPLAIN asked for (tracked): its status says it did not run, and why.
    task = _task(datetime.now(UTC) - timedelta(seconds=1))
    tasks.track("t-2", 42, "running")
    done = tasks._plan_over_share(task, 42, 7, 0, True, 3, "the plans worker was running 1 plan job of x")
    assert done == {"code": "over_share", "put_off": False}
    state = tasks.tracked("t-2")
    assert state["status"] == "failed" and state["result"]["error_code"] == "over_share"
    assert state["result"]["reason"].endswith("stayed in use until the request expired: ask again later")
