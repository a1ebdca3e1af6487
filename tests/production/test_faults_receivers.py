"""A tenant's slow receivers beside another tenant's server, as compose runs the console: an organization admin
adds webhook channels through the API, all pointed at a receiver that answers its status line and then a byte
every 0.2 s, and sends each a test, twice. Compose's collection worker, its alerts worker and beat run as
separate processes. The other organization's server keeps its cadence (not an interval missed, every one as
long as before the receivers were asked); each delivery is over by ALERTS_TIMEOUT_S; a channel is never sent
two deliveries at once.

Before alerts had their own worker and a deadline for the whole request, eight such channels took the
collection worker's eight threads for as long as the receiver trickled: the other server got no snapshot.

And beside another tenant's alerts: the slow tenant's receivers trickle and two of its names take 30 s to
resolve (a real name server, tests/slow_dns.py), under compose's alerts worker, its rules worker and
beat. The slow tenant holds its share of the alerts worker's threads (ALERTS_ORG_MAX_SENDING) and no more, its
other deliveries deferred and said, none lost; each of its attempts, the name's lookup included, is over by
ALERTS_TIMEOUT_S; the other tenant's deliveries go out at once, and every evaluation of the rules runs on time
(none dropped for its expiry)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from alerts import shares
from alerts.models import Alert, Channel, Delivery, Rule
from history.models import Snapshot
from inventory.models import Organization, Server
from tests.alerts.receiver import receiver
from tests.api_world import build_api_world
from tests.processes import beat_argv, console_env, processes, succeeded, wait_for, wait_ready
from tests.production.test_production_mode import compose, local
from tests.slow_dns import slow_names
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
        ALERTS_ORG_MAX_SENDING=str(CHANNELS),  # every thread of the alerts worker to the one tenant: even so
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
    assert "Task collectors.tasks.collect_server[" in worker_log


SHARE = 2  # ALERTS_ORG_MAX_SENDING: the slow tenant's share of the alerts worker's 8 threads
TRICKLING, SLOW_NAMES = 14, 2  # the slow tenant's channels: receivers that trickle, names that resolve in 30 s
SLOW_TIMEOUT_S = 4  # ALERTS_TIMEOUT_S
ON_TIME_S = 1.5  # the other tenant's deliveries, from made to sent (half the time a slow receiver holds a thread)


@contextlib.contextmanager
def _sampling(work: Callable[[], None], every_s: float) -> Iterator[None]:
    """`work()` every `every_s` seconds in a thread of its own (its own session), for the duration of the block."""
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(every_s):
                work()
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def _channel(client, organization: Organization, name: str, target: str) -> int:
    made = client.post(
        f"/api/v1/organizations/{organization.pk}/alert-channels/",
        {"name": name, "kind": "webhook", "target": target},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    return made.json()["id"]


def _test(client, channel_id: int) -> None:
    sent = client.post(f"/api/v1/alert-channels/{channel_id}/test/")
    assert sent.status_code == 202, sent.content


def test_a_tenants_slow_receivers_and_names_take_its_share_and_another_tenants_alerts_stay_on_time(tmp_path):
    """Sixteen channels of one tenant, each sent a test: fourteen at a receiver that trickles, two at names whose
    lookup takes 30 s. With the share the other tenant's alert and tests went out within 0.04 s of being made.
    Without it (ALERTS_ORG_MAX_SENDING=0) they waited 4 to 6 s; and with the evaluations on the deliveries'
    queue as before, 6 of some 10 evaluations were dropped for their expiry, the alert opened 2.8 s late and
    sent 3.8 s after that (one run each, on a loaded 2-core machine)."""
    world = build_api_world()
    slow_org, calm_org = world.acme, world.other
    down = Server.objects.create(organization=calm_org, name="db1", host="192.0.2.1", user="monitor")
    rule = Rule.objects.create(organization=calm_org, name="down", kind="server_down", hold_minutes=0)
    env = console_env(
        ALERTS_TIMEOUT_S=str(SLOW_TIMEOUT_S),
        ALERTS_ORG_MAX_SENDING=str(SHARE),
        ALERTS_MAX_ATTEMPTS="1",
        ALERTS_EVALUATE_S="1",
        DISPATCH_TICK_S="3600",
        ADVISOR_INTERVAL_S="3600",
    )
    running: list[int] = []
    said: set[int] = set()  # the slow tenant's deliveries seen waiting for its share, the reason on their record

    def sample() -> None:
        running.append(shares.running(slow_org.pk))
        waiting = Delivery.objects.filter(channel__organization=slow_org, last_error__startswith="waiting: ")
        said.update(waiting.values_list("pk", flat=True))

    with (
        receiver("trickle") as slow,
        receiver(200) as calm,
        slow_names(30.0, tmp_path) as dns,
        processes(tmp_path, env) as procs,
    ):
        admin, their_admin = world.client("admin"), world.client("outsider")
        targets = [f"{slow.url}/{i}" for i in range(TRICKLING)]
        targets += [f"http://{dns.name(f'slow-{i}')}:{slow.port}/hook" for i in range(SLOW_NAMES)]
        slow_ids = [_channel(admin, slow_org, f"slow-{i}", target) for i, target in enumerate(targets)]
        calm_tests = _channel(their_admin, calm_org, "tests", calm.url + "/tests")
        rule.channels.set([Channel.objects.get(pk=_channel(their_admin, calm_org, "on call", calm.url + "/alerts"))])
        rules = procs.start("alert-rules", local(compose()["alert-rules"]["command"], port=0, folder=tmp_path))
        sending = procs.start("alerts", dns.within(local(compose()["alerts"]["command"], port=0, folder=tmp_path)))
        wait_ready(rules)
        wait_ready(sending)
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: succeeded(rules, "alerts.tasks.evaluate_alerts"), 60, what="beat evaluating", logs=procs.logs)
        with _sampling(sample, 0.1):
            for channel_id in slow_ids:
                _test(admin, channel_id)
            wait_for(
                lambda: max(running, default=0) >= SHARE, 30, what="the slow tenant's share taken", logs=procs.logs
            )
            # The other tenant's server goes down, and its admin tests a channel three times meanwhile.
            down_at = timezone.now()
            Server.objects.filter(pk=down.pk).update(
                consecutive_failures=4, last_attempt_at=down_at, last_success_at=down_at - timedelta(minutes=30)
            )
            for _ in range(3):
                _test(their_admin, calm_tests)
                time.sleep(1)
            theirs = Delivery.objects.filter(channel__organization=calm_org)
            wait_for(
                lambda: list(theirs.values_list("status", flat=True)) == ["sent"] * 4,
                30,
                what="the other tenant's alert and tests sent",
                logs=procs.logs,
            )
            slows = Delivery.objects.filter(channel__organization=slow_org)
            wait_for(
                lambda: slows.count() == len(slow_ids) and set(slows.values_list("status", flat=True)) == {"failed"},
                120,
                what="every delivery of the slow tenant tried",
                logs=procs.logs,
            )
        rules_log, sending_log = rules.text(), sending.text()

    # The other tenant: its alert opened at the next evaluation, and every one of its deliveries sent at once.
    alert = Alert.objects.get(rule=rule)
    assert (alert.opened_at - down_at).total_seconds() < 3, alert.opened_at
    late = {(d.event, d.pk): (d.sent_at - d.created_at).total_seconds() for d in theirs}
    assert sorted(event for event, _ in late) == ["open", "test", "test", "test"], late
    assert max(late.values()) < ON_TIME_S, late
    # Every evaluation on time: none dropped for its expiry, an evaluation of both tenants each second.
    ticks = succeeded(rules, "alerts.tasks.evaluate_alerts")
    assert "Discarding revoked task" not in rules_log and ticks >= 10, ticks
    assert succeeded(rules, "alerts.tasks.evaluate_alert_group") >= 2 * (ticks - 1)
    assert "Task alerts.tasks.deliver[" not in rules_log and "Task alerts.tasks.evaluate_" not in sending_log
    # The slow tenant: its share in use and never more, the others deferred and said, each delivery tried (none
    # lost) and given up at the deadline, the name's lookup included.
    assert max(running) == SHARE, running
    assert slow.most_at_once <= SHARE, slow.most_at_once
    assert len(said) >= len(slow_ids) - SHARE, said
    errors = dict(slows.values_list("channel__name", "last_error"))
    assert set(slows.values_list("attempts", flat=True)) == {1}
    for i in range(TRICKLING):
        assert errors[f"slow-{i}"] == f"no answer from 127.0.0.1 within {SLOW_TIMEOUT_S} s", errors
    for i in range(SLOW_NAMES):
        name = dns.name(f"slow-{i}")
        assert errors[f"slow-{TRICKLING + i}"] == f"the host {name} did not resolve within {SLOW_TIMEOUT_S} s"
        assert dns.asked(name) == 1
