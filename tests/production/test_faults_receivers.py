"""A tenant's slow receivers beside another tenant's server, as compose runs the console: an organization admin
adds webhook channels through the API, all pointed at a receiver that answers its status line and then a byte
every 0.2 s, and sends each a test, twice. Compose's collection worker, its alerts worker and beat run as
separate processes. The other organization's server keeps its cadence (not an interval missed, every one as
long as before the receivers were asked); each delivery is over by ALERTS_TIMEOUT_S; a channel is never sent
two deliveries at once.

Before alerts had their own worker and a deadline for the whole request, eight such channels took the
collection worker's eight threads for as long as the receiver trickled: the other server got no snapshot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from alerts.models import Delivery
from history.models import Snapshot
from inventory.models import Server
from tests.alerts.receiver import receiver
from tests.api_world import build_api_world
from tests.processes import beat_argv, console_env, processes, wait_for
from tests.production.test_production_mode import compose, local
from tests.world import register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

INTERVAL_S = 5  # the product's shortest
CALM_S, SLOW_S = 10, 20  # the windows, as intervals of the healthy server: 2 and 4
CHANNELS = 8  # as many as the collection worker had threads
TIMEOUT_S = 2  # ALERTS_TIMEOUT_S


def _snapshot_times(server_id: int, since: datetime) -> list[datetime]:
    return list(
        Snapshot.objects.filter(server_id=server_id, taken_at__gte=since)
        .order_by("taken_at")
        .values_list("taken_at", flat=True)
    )


def _intervals(server_id: int, since: datetime, n: int, logs) -> None:
    wait_for(
        lambda: len(_snapshot_times(server_id, since)) >= n,
        3 * n * INTERVAL_S,
        what=f"{n} intervals of the healthy server",
        logs=logs,
    )


def test_a_tenants_trickling_receivers_leave_another_tenants_collections_on_time(pg_clusters, tmp_path):
    world = build_api_world()
    healthy = register(pg_clusters[15], org=world.other.name)
    Server.objects.filter(pk=healthy.pk).update(interval_s=INTERVAL_S)
    env = console_env(
        ALERTS_TIMEOUT_S=str(TIMEOUT_S),
        ALERTS_RETRY_BASE_S="1",
        ALERTS_MAX_ATTEMPTS="2",
        DISPATCH_TICK_S="1",
        ADVISOR_INTERVAL_S="3600",
    )
    with receiver("trickle") as r, processes(tmp_path, env) as procs:
        procs.start("worker", local(compose()["worker"]["command"], port=0, folder=tmp_path))
        procs.start("alerts", local(compose()["alerts"]["command"], port=0, folder=tmp_path))
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: len(_snapshot_times(healthy.pk, datetime(2000, 1, 1, tzinfo=UTC))) >= 2, 60, what="a baseline")
        calm_from = datetime.now().astimezone()
        _intervals(healthy.pk, calm_from, CALM_S // INTERVAL_S, procs.logs)
        calm_to = datetime.now().astimezone()

        admin = world.client("admin")
        url = f"/api/v1/organizations/{world.acme.pk}/alert-channels/"
        for i in range(CHANNELS):
            made = admin.post(
                url, {"name": f"slow-{i}", "kind": "webhook", "target": f"{r.url}/{i}"}, content_type="application/json"
            )
            assert made.status_code == 201, made.content
            for _ in range(2):
                sent = admin.post(f"/api/v1/alert-channels/{made.json()['id']}/test/")
                assert sent.status_code == 202, sent.content
        slow_from = datetime.now().astimezone()
        _intervals(healthy.pk, slow_from, SLOW_S // INTERVAL_S, procs.logs)
        slow_to = datetime.now().astimezone()
        deliveries = Delivery.objects.filter(channel__organization=world.acme)
        wait_for(
            lambda: set(deliveries.values_list("status", flat=True)) == {"failed"},
            60,
            what="every delivery out of attempts",
            logs=procs.logs,
        )
        worker_log = procs.started[0].text()

    calm = [t for t in _snapshot_times(healthy.pk, calm_from) if t < calm_to]
    slow = [t for t in _snapshot_times(healthy.pk, slow_from) if t < slow_to]
    for name, times in (("calm", calm), ("slow receivers", slow)):
        gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
        assert gaps and max(gaps) < 1.5 * INTERVAL_S, (name, gaps)
    assert len(slow) >= SLOW_S // INTERVAL_S - 1, len(slow)
    # Each attempt over by the deadline, each channel one at a time, every attempt made.
    assert {d.last_error for d in deliveries} == {f"no answer from 127.0.0.1 within {TIMEOUT_S:g} s"}
    assert set(deliveries.values_list("attempts", flat=True)) == {2}
    assert len(r.requests) == CHANNELS * 2 * 2
    assert set(r.most_in_flight.values()) == {1}, r.most_in_flight
    assert "Task alerts.tasks.deliver[" not in worker_log  # the collection worker never sent one
    assert "Task readings.tasks.collect_server[" in worker_log
