"""advisor.tasks: advise_fleet queues one advise_server per enabled server, each expiring after the advisor's
interval, and advise_server evaluates one server and reports what changed (or that the server is gone). The file
reads the queued messages off the broker (no worker runs), and runs the tasks in this process."""

from datetime import UTC, datetime, timedelta

import pytest

from advisor import advice as found
from advisor.gather import NO_SNAPSHOT
from advisor.models import Evaluation, Recommendation
from advisor.services import recommendations_apply
from advisor.tasks import advise_fleet, advise_server
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import server_create
from tests.broker import emptied
from tests.reports.weekly_world import eager_tasks

pytestmark = pytest.mark.django_db
QUEUE = "advisor"  # console/settings.py routes advisor.tasks.* there


@pytest.fixture
def fleet():
    dsn = "postgresql://monitor:pw@127.0.0.1:1/app"
    on = [server_create(name=f"adv-on-{n}", connection=parse_dsn(dsn), organization_name="adv-tasks") for n in (1, 2)]
    off = server_create(name="adv-off", connection=parse_dsn(dsn), organization_name="adv-tasks")
    Server.objects.filter(pk=off.pk).update(enabled=False)
    return on, off


@pytest.fixture
def broker():
    with emptied(QUEUE) as queue:
        yield queue


def test_the_fleet_task_queues_one_expiring_task_per_enabled_server(fleet, broker, settings):
    settings.ADVISOR_INTERVAL_S = 120
    on, off = fleet
    enabled = set(Server.objects.filter(enabled=True).values_list("pk", flat=True))
    before = datetime.now(UTC)
    assert advise_fleet() == len(enabled)
    queued = broker.waiting()
    assert sorted(q.args[0] for q in queued) == sorted(enabled)
    assert {s.pk for s in on} <= enabled and off.pk not in enabled
    assert {q.task for q in queued} == {"advisor.tasks.advise_server"}
    for expires in (q.expires for q in queued):
        assert before + timedelta(seconds=120) <= expires <= datetime.now(UTC) + timedelta(seconds=120)


def test_run_eagerly_the_fleet_task_evaluates_the_enabled_servers_only(fleet):
    on, off = fleet
    with eager_tasks():
        advise_fleet()
    assert {e.server_id: e.notes for e in Evaluation.objects.filter(server__in=[*on, off])} == {
        s.pk: [NO_SNAPSHOT] for s in on
    }


def test_a_server_without_snapshots_is_evaluated_with_nothing_to_change(fleet):
    server = fleet[0][0]
    assert advise_server(server.pk) == {"server_id": server.pk, "opened": 0, "reopened": 0, "cleared": 0, "error": ""}
    assert Evaluation.objects.get(server=server).error == ""


def test_the_result_counts_what_the_evaluation_changed(fleet):
    server = fleet[0][0]
    long_ago = datetime.now(UTC) - timedelta(hours=3)  # the default clear_after is 2 hours
    stale = found.Advice("pgss_max", "warning", server.name, "server", "too small", "evictions")
    recommendations_apply(server=server, found_now=[stale], now=long_ago, clear_after=timedelta(hours=2))
    out = advise_server(server.pk)
    assert (out["opened"], out["reopened"], out["cleared"], out["error"]) == (0, 0, 1, "")
    assert Recommendation.objects.get(server=server).status == "resolved"


def test_a_server_deleted_before_its_turn_is_reported_not_raised(fleet):
    server = fleet[0][0]
    gone = server.pk
    Server.objects.filter(pk=gone).delete()
    assert advise_server(gone) == {"server_id": gone, "error": "deleted"}
    assert not Evaluation.objects.filter(server_id=gone).exists()
