"""A monitored server that stops answering mid-snapshot frees its worker and lock in time, with a clear
status, without touching the other servers; network limits are set on every monitoring socket."""

import os
import socket
import threading
import time

import pytest
from django.db import connection

from collectors import connection as monitored
from collectors.connection_check import server_check
from collectors.errors import ServerSilent
from collectors.services import LOCK_NAMESPACE, CollectionResult, server_collect
from inventory.endpoint import Endpoint
from inventory.models import Server
from tests.conftest import MONITOR_PASSWORD, MONITOR_USER
from tests.tcp_proxy import TcpProxy
from tests.world import APP_DB, collect, history_counts, register

pytestmark = pytest.mark.django_db(transaction=True)

REPLY_TIMEOUT_S = 3.0
CONNECT_TIMEOUT_S = 2  # libpq's minimum


@pytest.fixture
def short_limits(settings):
    settings.COLLECTOR = {
        **settings.COLLECTOR,
        "REPLY_TIMEOUT_S": REPLY_TIMEOUT_S,
        "CONNECT_TIMEOUT_S": CONNECT_TIMEOUT_S,
        "ACTIVITY_SAMPLES": 0,
    }
    yield
    monitored.close_all()  # kept connections must not outlive the proxy they go through


class _Collection(threading.Thread):
    """server_collect in a thread of its own, hence its own history-store session, as on another worker."""

    def __init__(self, server: Server):
        super().__init__(daemon=True)
        self.server_id = server.pk
        self.result: CollectionResult | None = None
        self.error: BaseException | None = None
        self.elapsed_s: float | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.result = server_collect(server_id=self.server_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc
        finally:
            self.elapsed_s = time.monotonic() - started
            connection.close()

    def outcome(self, timeout_s: float = 30) -> CollectionResult:
        self.join(timeout_s)
        assert not self.is_alive(), f"the collection still runs after {timeout_s} s"
        if self.error is not None:
            raise self.error
        return self.result


def _lock_held(server: Server) -> bool:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s "
            "AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [LOCK_NAMESPACE, server.pk],
        )
        return cur.fetchone()[0] > 0


def test_server_silent_mid_snapshot_fails_in_time_and_recovers(pg_clusters, short_limits):
    with TcpProxy(pg_clusters[17].port) as proxy:
        silent = register(pg_clusters[17], name="behind-proxy")
        # In clear (sslmode=disable): the proxy reads the protocol to know when to go silent.
        Server.objects.filter(pk=silent.pk).update(port=proxy.port, sslmode="disable")
        other = register(pg_clusters[16], name="other")
        collect(silent)  # baseline; its connection is kept, through the proxy
        collect(other)
        stored = history_counts(silent)

        # The host dies just as the counters are requested: the query never arrives, nothing is closed.
        proxy.go_silent_on(b"pg_stat_statements(false)")
        stuck = _Collection(silent)
        stuck.start()
        assert proxy.silenced.wait(10), "the snapshot never requested the counters"

        # Meanwhile another server is collected as usual, by another worker thread.
        result = collect(other)
        assert result.kind == "delta"
        assert stuck.is_alive(), "the silent server's collection should still be waiting"

        result = stuck.outcome()
        assert (result.kind, result.error_code) == ("failed", "timeout"), result.summary()
        # Freed after the reply timeout, far within the server's collection interval.
        assert stuck.elapsed_s < REPLY_TIMEOUT_S + 2, stuck.elapsed_s
        assert silent.interval_s > 10 * REPLY_TIMEOUT_S
        silent.refresh_from_db()
        assert silent.last_error_class == "timeout"
        for words in (
            "the server stopped answering during the snapshot",
            "while reading pg_stat_statements",
            f"no reply for {REPLY_TIMEOUT_S:g} s",
        ):
            assert words in silent.last_error_message, silent.last_error_message
        assert silent.consecutive_failures == 1
        assert history_counts(silent) == stored, "a failed collection stored something"
        assert not _lock_held(silent), "the advisory lock outlived the failed collection"

        # The next collection, on another session, finds the lock free (not "busy") and a host that
        # still does not answer, now at connection time.
        again = _Collection(silent)
        again.start()
        result = again.outcome()
        assert (result.kind, result.error_code) == ("failed", "unreachable"), result.summary()
        assert again.elapsed_s < CONNECT_TIMEOUT_S + 2, again.elapsed_s

        proxy.forward_again()
        result = collect(silent)
        assert result.kind == "delta"
        silent.refresh_from_db()
        assert (silent.last_error_class, silent.last_error_message, silent.consecutive_failures) == ("", "", 0)


SNAPSHOT_TIMEOUT_S = 4.0


def test_a_server_trickling_its_reply_is_given_up_at_the_snapshot_deadline(pg_clusters, short_limits, settings):
    """One byte a second is never silence (the reply timeout is 3 s): only the snapshot's deadline frees
    the worker, with status timeout, while another server is collected as usual; the check has one too."""
    settings.COLLECTOR = {**settings.COLLECTOR, "SNAPSHOT_TIMEOUT_S": SNAPSHOT_TIMEOUT_S}
    with TcpProxy(pg_clusters[17].port) as proxy:
        slow = register(pg_clusters[17], name="trickling")
        Server.objects.filter(pk=slow.pk).update(port=proxy.port, sslmode="disable")  # the proxy reads the protocol
        other = register(pg_clusters[16], name="other")
        collect(slow)
        collect(other)
        stored = history_counts(slow)

        proxy.trickle_on(b"pg_stat_statements(false)", every_s=1.0)
        stuck = _Collection(slow)
        stuck.start()
        assert collect(other).kind == "delta"
        result = stuck.outcome()
        assert (result.kind, result.error_code) == ("failed", "timeout"), result.summary()
        assert SNAPSHOT_TIMEOUT_S <= stuck.elapsed_s < SNAPSHOT_TIMEOUT_S + 2, stuck.elapsed_s
        slow.refresh_from_db()
        assert slow.last_error_class == "timeout"
        for words in (
            f"not done within its limit of {SNAPSHOT_TIMEOUT_S:g} s",
            "while reading pg_stat_statements",
            "answers, but too slowly",
        ):
            assert words in slow.last_error_message, slow.last_error_message
        assert history_counts(slow) == stored, "a snapshot given up stored something"
        assert not _lock_held(slow), "the advisory lock outlived the snapshot given up"

        # "Test connection" is bounded the same way.
        proxy.trickle_on(b"server_version_num", every_s=1.0)
        started = time.monotonic()
        report = server_check(
            endpoint=Endpoint(host="127.0.0.1", port=proxy.port, database=APP_DB, user=MONITOR_USER, sslmode="disable"),
            password=MONITOR_PASSWORD,
        )
        assert time.monotonic() - started < SNAPSHOT_TIMEOUT_S + 2
        assert any(f"not done within {SNAPSHOT_TIMEOUT_S:g} s" in f.text for f in report.findings), report.findings

        proxy.forward_again()
        assert collect(slow).kind == "delta"  # a fresh connection: the given-up one was discarded
        slow.refresh_from_db()
        assert (slow.last_error_class, slow.consecutive_failures) == ("", 0)


def test_silence_is_counted_per_connection_and_sticks(pg_clusters, short_limits):
    """Once a connection went silent every later use fails at once, the same way, until discarded."""
    c = pg_clusters[16]
    with TcpProxy(c.port) as proxy:
        target = monitored.Target(
            server_id=0,
            endpoint=Endpoint(host="127.0.0.1", port=proxy.port, database=APP_DB, user=MONITOR_USER, sslmode="disable"),
            password=MONITOR_PASSWORD,
        )
        conn = monitored.connect(target)
        try:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            proxy.go_silent()
            started = time.monotonic()
            with pytest.raises(ServerSilent):
                conn.execute("SELECT 2")
            assert REPLY_TIMEOUT_S <= time.monotonic() - started < REPLY_TIMEOUT_S + 1
            started = time.monotonic()
            with pytest.raises(ServerSilent):
                conn.execute("SELECT 3")
            assert time.monotonic() - started < 0.5
        finally:
            monitored.discard(target, conn)


def test_monitoring_sockets_carry_keepalives_and_tcp_user_timeout(pg_clusters, settings):
    settings.COLLECTOR = {
        **settings.COLLECTOR,
        "STATEMENT_TIMEOUT_MS": 8000,
        "REPLY_TIMEOUT_S": None,
        "TCP_USER_TIMEOUT_MS": None,
        "KEEPALIVES_IDLE_S": 7,
        "KEEPALIVES_INTERVAL_S": 3,
        "KEEPALIVES_COUNT": 4,
    }
    # Unset limits follow statement_timeout (+5 s), capped by the server's collection interval.
    assert monitored.limits().reply_timeout_s == 13.0
    assert monitored.limits(interval_s=10).reply_timeout_s == 10.0
    assert monitored.limits(interval_s=10).tcp_user_timeout_ms == 15_000
    # A whole snapshot: 30 s unless set, and within 80% of the server's interval.
    assert (monitored.limits().snapshot_s, monitored.limits(interval_s=10).snapshot_s) == (30.0, 8.0)

    c = pg_clusters[18]
    target = monitored.Target(
        server_id=0,
        endpoint=Endpoint(host="127.0.0.1", port=c.port, database=APP_DB, user=MONITOR_USER, sslmode="disable"),
        password=MONITOR_PASSWORD,
    )
    conn = monitored.connect(target)
    try:
        assert conn.reply_timeout_s == 13.0
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 7
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 4
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 18_000
    finally:
        monitored.discard(target, conn)


# Run in a process of its own whose lookups go to a name server that answers after 4 s (tests/slow_dns.py): a
# connection to a monitored server of that name, with a connection's time of COLLECTOR_CONNECT_TIMEOUT_S (2 s), and
# a snapshot's worth left (within_s 1 s): what each said, and how long it took, as JSON.
_DIALS = """
import json, sys, time
import django
django.setup()
from inventory.endpoint import Endpoint
from collectors import connection as monitored
from collectors.errors import CollectionError
target = monitored.Target(server_id=1, endpoint=Endpoint(host=sys.argv[1], port=5432, database="app", user="m",
                          sslmode="disable"), password=None)
out = []
for within_s in (None, 1.0):
    started = time.monotonic()
    try:
        monitored.connect(target, within_s=within_s)
        out.append({"error": None})
    except CollectionError as exc:
        out.append({"error": exc.message, "code": exc.code})
    out[-1]["took_s"] = time.monotonic() - started
print(json.dumps(out))
"""


def test_a_monitored_servers_name_that_resolves_slowly_holds_no_worker_past_its_deadline(tmp_path):
    """The name's lookup is bounded by the connection's time (or what is left of the snapshot's, less): a resolver
    that answers late, or never, holds a collection, a plan or a check no longer than their deadline. Before, the
    lookup came before any deadline: a resolver taking a minute held the worker's thread a minute."""
    import json
    import subprocess
    from pathlib import Path

    from tests.slow_dns import slow_names

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "COLLECTOR_CONNECT_TIMEOUT_S": str(CONNECT_TIMEOUT_S), "MONITOR_ALLOW_LOOPBACK": "true"}
    with slow_names(4.0, tmp_path) as dns:
        done = subprocess.run(
            dns.within([str(root / ".venv" / "bin" / "python"), "-c", _DIALS, dns.name("db")]),
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    by_connection, by_snapshot = json.loads(done.stdout)
    late = "cannot connect to m@db.pgconsole.test:5432/app: the host db.pgconsole.test did not resolve within {} s"
    assert by_connection["error"] == late.format(CONNECT_TIMEOUT_S) and by_connection["code"] == "unreachable"
    assert CONNECT_TIMEOUT_S <= by_connection["took_s"] < CONNECT_TIMEOUT_S + 0.5, by_connection
    assert by_snapshot["error"] == late.format(1) and 1 <= by_snapshot["took_s"] < 1.5, by_snapshot
    assert dns.asked(dns.name("db")) == 2
