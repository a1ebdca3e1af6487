"""collectors/sampler.py in-process, with real Redis and real monitored servers (manage.py sample_waits runs it as
its own process: tests/collectors/management/commands/test_sample_waits.py). The module must: list as jobs the
enabled servers without a pg_wait_sampling profile, each looked at ACTIVITY_SAMPLES times per interval; sample
every applied job from one event loop, restart a job whose settings changed and stop one no longer wanted; let a
snapshot `take` the counts of a server once (then nothing is left); say it is `running` only while a sampler's
heartbeat lives; and keep sampling a server while another one never answers."""

import asyncio
import dataclasses
import socket
import threading
import time
from contextlib import contextmanager

import psycopg
import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from psycopg.conninfo import conninfo_to_dict

from collectors.connection import sampler_application_name
from collectors.waits import sampler
from history.models import ServerState
from inventory.models import Server
from tests.world import APP_DB, register

pytestmark = pytest.mark.django_db(transaction=True)
SLEEPER = "sampler-module-sleeper"


@pytest.fixture(autouse=True)
def clean_redis(settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "ACTIVITY_SAMPLES": 10, "CONNECT_TIMEOUT_S": 1}
    client = sampler._redis()
    client.delete(sampler.ALIVE_KEY, *client.keys("pgconsole:waits:*"))
    yield
    client.delete(sampler.ALIVE_KEY)


@contextmanager
def asleep(cluster, seconds: float):
    """A session of SLEEPER in pg_sleep for `seconds`; yields its query id once it is seen asleep with it.

    pg_stat_activity reads the wait event live but the rest of a row from a snapshot of the backend's status, so a
    look just as the statement starts can show PgSleep beside the query id of 0 (shown as NULL) that binding the
    statement set; the executor reports the real one a moment later. Waiting for both keeps that instant out."""

    def sleep():
        with psycopg.connect(cluster.dsn(APP_DB), autocommit=True, application_name=SLEEPER) as conn:
            conn.execute("SELECT pg_sleep(%s)", (seconds,))

    sleeper = threading.Thread(target=sleep)
    sleeper.start()
    with psycopg.connect(cluster.dsn(APP_DB), autocommit=True) as conn:
        for _ in range(50):
            seen = conn.execute(
                "SELECT query_id FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event = 'PgSleep' AND query_id IS NOT NULL",
                (SLEEPER,),
            ).fetchone()
            if seen:
                break
            time.sleep(0.1)
    try:
        assert seen, "the sleeper never slept"
        yield seen[0]
    finally:
        sleeper.join()


async def stop(s: sampler.Sampler) -> None:
    tasks = [task for _, task in s.tasks.values()]
    s.apply([])
    await asyncio.gather(*tasks, return_exceptions=True)
    await s.redis.aclose()


def test_jobs_are_the_enabled_servers_without_a_wait_profile_each_with_its_period(pg_clusters):
    c = pg_clusters[16]
    sampled, disabled, profiled, slow = (register(c) for _ in range(4))
    Server.objects.filter(pk__in=[sampled.pk, disabled.pk, profiled.pk]).update(interval_s=20)
    Server.objects.filter(pk=disabled.pk).update(enabled=False)
    ServerState.objects.create(server=profiled, taken_at=timezone.now(), wait_profile={})
    ours = {sampled.pk, disabled.pk, profiled.pk, slow.pk}  # servers other tests committed are not this one's
    jobs = [j for j in sampler.jobs() if j.server_id in ours]
    assert [(j.server_id, j.interval_s, j.period_s) for j in jobs] == [(sampled.pk, 20, 2.0), (slow.pk, 60, 6.0)]
    assert {conninfo_to_dict(j.conninfo)["application_name"] for j in jobs} == {sampler_application_name()}


def test_applied_jobs_are_sampled_taken_once_restarted_when_changed_and_stopped_when_unwanted(pg_clusters):
    c = pg_clusters[16]
    server = register(c)
    Server.objects.filter(pk=server.pk).update(interval_s=5)  # a look every 0.5 s
    (job,) = sampler.jobs()

    async def scenario():
        s = sampler.Sampler(django_settings.REDIS_URL)
        s.apply([job])
        first = s.tasks[server.pk][1]
        s.apply([job])
        assert s.tasks[server.pk][1] is first  # an unchanged job keeps sampling where it was
        await asyncio.sleep(2.6)
        taken = sampler.take(server.pk), sampler.take(server.pk)
        s.apply([dataclasses.replace(job, interval_s=10)])
        restarted = s.tasks[server.pk][1]
        s.apply([])
        await asyncio.gather(first, restarted, return_exceptions=True)
        assert first.cancelled() and restarted.cancelled() and s.tasks == {}
        await asyncio.sleep(1.2)  # two looks' time: none taken by a stopped job
        await stop(s)
        return taken

    with asleep(c, 5) as query_id:
        (alive, reading), again = asyncio.run(scenario())
    assert alive is False  # no sampler's heartbeat: Sampler.run was never started
    assert reading.source == "pg_stat_activity" and 4 <= reading.n_samples <= 6, reading
    assert reading.counts == {("Timeout", "PgSleep", query_id): reading.n_samples}  # one session, asleep in every look
    assert again == (False, None)
    assert sampler.take(server.pk) == (False, None)


def test_running_is_true_only_while_a_sampler_publishes_its_heartbeat():
    async def scenario():
        assert not sampler.running()
        halt = asyncio.Event()
        served = asyncio.create_task(sampler.Sampler(django_settings.REDIS_URL).run(halt, jobs_source=list))
        for _ in range(50):
            if await asyncio.to_thread(sampler.running):
                break
            await asyncio.sleep(0.1)
        seen = sampler.running(), sampler.take(1)[0], sampler._redis().ttl(sampler.ALIVE_KEY)
        halt.set()
        await served
        return seen

    alive, taken_alive, ttl = asyncio.run(scenario())
    assert alive and taken_alive
    assert 0 < ttl <= sampler.HEARTBEAT_TTL_S  # a sampler killed without stopping is gone once it expires
    assert not sampler.running()  # stopped, it says so at once


def test_a_server_that_never_answers_does_not_hold_back_the_sampling_of_another(pg_clusters):
    c = pg_clusters[16]
    good, silent = register(c), register(c)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # connections complete, nothing ever answers them
        Server.objects.filter(pk__in=[good.pk, silent.pk]).update(interval_s=5)
        Server.objects.filter(pk=silent.pk).update(port=listener.getsockname()[1])
        jobs = sampler.jobs()

        async def scenario():
            s = sampler.Sampler(django_settings.REDIS_URL)
            s.apply(jobs)
            await asyncio.sleep(3.6)
            failing = set(s.failing)
            await stop(s)
            return failing

        with asleep(c, 5) as query_id:
            failing = asyncio.run(scenario())
    assert failing == {silent.pk}
    assert sampler.take(silent.pk) == (False, None)
    _, reading = sampler.take(good.pk)
    assert 6 <= reading.n_samples <= 8, reading  # a look every 0.5 s for 3.6 s, as if alone
    assert reading.counts == {("Timeout", "PgSleep", query_id): reading.n_samples}


def test_a_thousand_servers_looks_reach_redis_whole_over_a_few_connections():
    """Defect 4 of issue 35: 1,000 servers looking at once held a connection each (Redis refused them past the
    pool's limit, and the looks were lost). Now their looks go in a few transactions over at most
    REDIS_CONNECTIONS connections, and each server's counts arrive whole."""
    jobs = [sampler.Job(server_id=90_000_000 + i, conninfo="", interval_s=60) for i in range(1000)]
    rows = [("Lock", "relation", 7, 2), ("IO", "DataFileRead", None, 1)]

    async def everyone_looks_twice():
        s = sampler.Sampler(django_settings.REDIS_URL)
        for _ in range(2):
            await asyncio.gather(*(s.record(job, rows) for job in jobs))
        clients = [c for c in sampler._redis().client_list() if c.get("name") == sampler.CLIENT_NAME]
        writes, samples = s.writes, s.samples
        await s.close(5)
        return len(clients), writes, samples

    connections, writes, samples = asyncio.run(everyone_looks_twice())
    assert samples == 2000 and writes <= 4, (samples, writes)
    assert 1 <= connections <= sampler.REDIS_CONNECTIONS
    for job in jobs:
        alive, reading = sampler.take(job.server_id)
        assert reading.n_samples == 2 and reading.counts == {
            ("Lock", "relation", 7): 4,
            ("IO", "DataFileRead", None): 2,
        }, job.server_id


def test_a_sampler_whose_servers_read_hangs_still_stops_within_its_bound():
    """The history store gone under an open connection: the servers' read never returns. The sampler keeps its
    heartbeat and stops within STOP_S of being told, leaving the hung read behind."""
    release = threading.Event()

    def hangs():
        release.wait(60)
        return []

    async def scenario():
        s = sampler.Sampler(django_settings.REDIS_URL)
        stop = asyncio.Event()
        running = asyncio.create_task(s.run(stop, jobs_source=hangs))
        await asyncio.sleep(1.0)
        alive = sampler.running()
        stop.set()
        told = time.monotonic()
        await asyncio.wait_for(running, sampler.STOP_S + 2)
        return alive, time.monotonic() - told

    try:
        alive, stopping_s = asyncio.run(scenario())
    finally:
        release.set()
    assert alive and stopping_s < 1.0, stopping_s
    assert not sampler.running()
