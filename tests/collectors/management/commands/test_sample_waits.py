"""The wait-event sampler as production runs it: its own process (`manage.py sample_waits`, compose's
`sampler`), real Redis, a real server with a session asleep. The snapshot takes the samples spread over its
interval without sleeping itself; with the sampler stopped, snapshots sample inline again."""

import contextlib
import socket
import threading
import time

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection

from collectors.waits import sampler
from inventory.models import Server
from tests.processes import BIN, database_url, processes, wait_for
from tests.world import APP_DB, collect, register, server_entry

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL_S = 5
SAMPLES = 10  # a look every 0.5 s


@pytest.fixture
def sampler_process(tmp_path, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "ACTIVITY_SAMPLES": SAMPLES, "ACTIVITY_SPAN_S": 1.0}
    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "CREDENTIALS_KEY": django_settings.CREDENTIALS_KEY,
        "DEBUG": "true",
        "COLLECTOR_ACTIVITY_SAMPLES": str(SAMPLES),
    }
    with processes(tmp_path, env) as procs:
        yield procs
    sampler._redis().delete(sampler.ALIVE_KEY)  # a killed sampler's heartbeat must not outlive the test


COLLECTOR_NAME = django_settings.COLLECTOR["APPLICATION_NAME"]


def _sleep(cluster, application_name: str) -> None:
    with psycopg.connect(cluster.dsn(APP_DB), autocommit=True, application_name=application_name) as conn:
        conn.execute("SELECT 1 FROM pg_sleep(8)")  # not test_waits' pg_sleep entry


def _waits(server: Server) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT w.event, w.query_id, w.samples, w.session_s, s.waits_source, s.waits_samples, s.interval_s "
            "FROM collectors_wait_event w JOIN collectors_snapshot s ON s.server_id = w.server_id "
            "AND s.taken_at = w.taken_at WHERE w.server_id = %s ORDER BY s.taken_at",
            [server.pk],
        )
        return cur.fetchall()


def test_the_sampler_feeds_snapshots_that_no_longer_sleep(pg_clusters, sampler_process):
    c = pg_clusters[16]
    server = register(c, name="sampled")
    Server.objects.filter(pk=server.pk).update(interval_s=INTERVAL_S)
    proc = sampler_process.start("sampler", [str(BIN / "python"), "manage.py", "sample_waits"])
    wait_for(sampler.running, 30, what="the sampler's heartbeat", logs=sampler_process.logs)

    # Two sessions asleep: the workload's, and one named as the console's collector (never counted); asleep
    # before the baseline, so that every look of the interval after it sees them, however long the baseline's
    # own writes take after its read.
    sleepers = [threading.Thread(target=_sleep, args=(c, name)) for name in ("app", COLLECTOR_NAME)]
    for sleeper in sleepers:
        sleeper.start()
    try:
        time.sleep(0.3)
        collect(server)  # baseline: what was sampled before it belongs to no interval
        time.sleep(4)
        result = collect(server)
    finally:
        for sleeper in sleepers:
            sleeper.join()
    # The snapshot took the sampler's counts: no thread held for a second of inline looks.
    assert result.duration_ms < 500, result.summary()
    queryid = server_entry(c, "SELECT $1 FROM pg_sleep%")["queryid"]
    rows = [r for r in _waits(server) if r[0] == "PgSleep" and r[1] == queryid]
    assert len(rows) == 1, _waits(server)
    _, _, samples, session_s, source, n_samples, interval_s = rows[0]
    assert source == "pg_stat_activity"
    # A look every 0.5 s over the interval since the baseline (4 s and the two snapshots' own time), spread over
    # it, not one second of inline looks.
    assert n_samples >= 6 and abs(n_samples - interval_s * SAMPLES / INTERVAL_S) <= 2, (n_samples, interval_s)
    # One session (the collector's is not the workload) slept through all of them but at most the first.
    assert n_samples - 1 <= samples <= n_samples
    assert session_s == pytest.approx(samples / n_samples * interval_s)

    # Stopped, it says so at once (no heartbeat left): the next snapshot looks inline again, ACTIVITY_SAMPLES times.
    assert proc.stop() == 0, sampler_process.logs()
    assert not sampler.running()
    later = collect(server)
    assert later.duration_ms >= 900, later.summary()  # the inline looks span ACTIVITY_SPAN_S (1 s)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT waits_source, waits_samples FROM collectors_snapshot WHERE server_id = %s "
            "ORDER BY taken_at DESC LIMIT 1",
            [server.pk],
        )
        assert cur.fetchone() == ("pg_stat_activity", SAMPLES)


class FreezingProxy:
    """A TCP proxy to the history store that, once frozen, passes nothing more either way and closes nothing:
    a store gone from under an open connection (a host down, a network cut), as the sampler saw it."""

    def __init__(self, port: int):
        self.upstream = ("127.0.0.1", port)
        self.frozen = threading.Event()
        self.swallowed = 0  # messages held back since frozen
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                if self.frozen.is_set():
                    self.swallowed += 1
                    time.sleep(3600)  # swallowed: never passed on, never answered
                b.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()


def test_sigterm_stops_the_sampler_while_the_history_store_hangs_under_it(pg_clusters, sampler_process):
    """Defect 4 of issue 35: with its history store gone under an open connection, the sampler ignored SIGTERM
    and SIGINT for minutes (the servers' read hung in a thread the loop and the exit waited for). It exits within
    sampler.STOP_S (and 0) instead."""
    proxy = FreezingProxy(int(connection.settings_dict["PORT"]))
    try:
        settings_dict = {**connection.settings_dict, "PORT": proxy.port}
        proc = sampler_process.start(
            "sampler",
            [str(BIN / "python"), "manage.py", "sample_waits"],
            DATABASE_URL=database_url(settings_dict),
            COLLECTOR_SAMPLER_REFRESH_S="0.5",
        )
        wait_for(sampler.running, 30, what="the sampler's heartbeat", logs=sampler_process.logs)
        proxy.frozen.set()
        wait_for(lambda: proxy.swallowed, 10, what="a read of the servers, hung", logs=sampler_process.logs)
        time.sleep(0.5)
        told = time.monotonic()
        assert proc.stop(timeout_s=sampler.STOP_S + 5) == 0, sampler_process.logs()
        assert time.monotonic() - told < sampler.STOP_S + 2
        assert "wait-event sampler stopped" in proc.text()
    finally:
        proxy.close()
