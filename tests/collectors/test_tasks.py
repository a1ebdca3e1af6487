"""End to end through a real Redis broker and real Celery worker and beat processes:
beat tick -> dispatcher -> collection task -> rows in the history store; and a real plans worker, whose threads
one organization's plan jobs share with the others' (ORG_MAX_PLANNING)."""

import time
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.utils import timezone

from advisor.gather import NO_SNAPSHOT
from advisor.models import Evaluation
from inventory.models import Server
from tests.processes import beat_argv, console_env, database_url, processes, wait_ready, worker_argv
from tests.world import collect, register, run, server_entry, snapshots

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
BROKER = "redis://127.0.0.1:6379/7"


@pytest.fixture
def celery_processes(tmp_path):
    env = console_env(
        REDIS_URL=BROKER,
        DISPATCH_TICK_S="1",
        ADVISOR_INTERVAL_S="3",
        COLLECTOR_ACTIVITY_SAMPLES="2",
        COLLECTOR_ACTIVITY_SPAN_S="0.1",
    )
    redis.Redis.from_url(BROKER).flushdb()
    with processes(tmp_path, env) as procs:
        procs.start("worker", worker_argv())
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        yield tmp_path


def _wait_for(predicate, timeout_s: float, logs) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    text = "\n".join(p.read_text()[-3000:] for p in Path(logs).rglob("*.log"))
    pytest.fail(f"timed out after {timeout_s}s; logs:\n{text}")


def test_beat_dispatches_and_the_worker_collects(pg_clusters, celery_processes):
    c = pg_clusters[17]
    run(c, "DROP TABLE IF EXISTS celery_items; CREATE TABLE celery_items (id int)")
    server = register(c, name="via-celery")
    Server.objects.filter(pk=server.pk).update(interval_s=5)
    broken = register(c, name="broken-via-celery", password="wrong")
    Server.objects.filter(pk=broken.pk).update(interval_s=5)

    _wait_for(lambda: len(snapshots(server)) >= 1, 60, celery_processes)
    run(c, "SELECT count(*) FROM celery_items", 4)
    queryid = server_entry(c, "SELECT count(*) FROM celery_items%")["queryid"]

    def calls() -> int:
        return sum((s.deltas_of(queryid) or {}).get("calls", 0) for s in snapshots(server))

    # The workload's calls land in the deltas after it (a delta taken while other statements ran may come first).
    _wait_for(lambda: calls() >= 4, 60, celery_processes)
    taken = len(snapshots(server))
    _wait_for(lambda: len(snapshots(server)) > taken, 60, celery_processes)
    assert calls() == 4  # and no later delta counts them again

    server.refresh_from_db()
    assert server.last_success_at is not None and server.consecutive_failures == 0
    assert server.next_collect_at is not None
    broken.refresh_from_db()
    assert broken.last_error_class == "auth_failed" and broken.consecutive_failures >= 1
    assert snapshots(broken) == []

    # The advisor's beat entry evaluates every enabled server through the worker, the failing one included.
    def evaluated() -> bool:
        runs = {e.server_id: e for e in Evaluation.objects.filter(server__in=[server, broken], error="")}
        return len(runs) == 2 and runs[server.pk].notes != [NO_SNAPSHOT]

    _wait_for(evaluated, 60, celery_processes)
    assert Evaluation.objects.get(server=broken).notes == [NO_SNAPSHOT]


class _Gate:
    """A TCP forwarder to the history store that can be closed and reopened, so that the worker
    really loses its database for a while."""

    def __init__(self, target_port: int):
        import socket

        self.target_port = target_port
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.server = None

    def open(self) -> None:
        import socket
        import threading

        self.server = socket.create_server(("127.0.0.1", self.port))

        def pipe(src, dst):
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                dst.close()

        def accept():
            while True:
                try:
                    client, _ = self.server.accept()
                except OSError:
                    return
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def test_collection_retries_until_the_history_store_is_back(pg_clusters, tmp_path):
    from collectors.tasks import collect_server

    db = connection.settings_dict
    gate = _Gate(int(db["PORT"]))
    # The worker reaches the history store through the gate.
    url = database_url({**db, "HOST": "127.0.0.1", "PORT": gate.port})
    server = register(pg_clusters[13], name="retry-me")
    redis.Redis.from_url(BROKER).flushdb()
    with processes(tmp_path, console_env(DATABASE_URL=url, REDIS_URL=BROKER)) as procs:
        worker = procs.start("worker", worker_argv(concurrency=1))
        log = worker.log
        # A loaded machine (the whole suite at once) can take most of a minute to start a worker: the retries are
        # timed from its start.
        wait_ready(worker, 120)
        try:
            from console.celery import app

            with app.connection_for_write(BROKER) as conn:
                collect_server.apply_async((server.pk,), expires=120, connection=conn)
            _wait_for(lambda: "retrying collection" in log.read_text(), 60, tmp_path / "..")
            assert snapshots(server) == []
            gate.open()  # the history store is back: a later retry stores the snapshot
            _wait_for(lambda: len(snapshots(server)) == 1, 60, tmp_path / "..")
        finally:
            gate.close()
    assert "history store unavailable" in log.read_text()
    server.refresh_from_db()
    assert server.last_success_at is not None


def _history_sessions() -> int:
    """Sessions ever opened on the test database (pg_stat_database.sessions, PostgreSQL 14+)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cur.fetchone()[0]


def test_the_worker_keeps_its_history_store_sessions_across_tasks(pg_clusters, celery_processes):
    """Celery's Django fixup closed every connection after every task: each collection (and each dispatcher
    tick) opened a new session on the history store, a cost per snapshot paid by the worker and the store."""
    server = register(pg_clusters[17], name="kept-session")
    Server.objects.filter(pk=server.pk).update(interval_s=2)
    _wait_for(lambda: len(snapshots(server)) >= 2, 60, celery_processes)  # both worker threads have worked
    before, taken = _history_sessions(), len(snapshots(server))
    _wait_for(lambda: len(snapshots(server)) >= taken + 4, 60, celery_processes)
    opened = _history_sessions() - before
    # Four collections and as many dispatcher ticks (every second) ran meanwhile: at most one new session per
    # worker thread that had not worked yet, none per task.
    assert opened <= 2, f"{opened} sessions opened for {len(snapshots(server)) - taken} collections"


BUSY_SERVERS, PLAN_THREADS = 4, 3  # one organization's silent servers, and the plans worker's threads


def test_one_organizations_plan_jobs_take_its_share_of_the_plans_worker_and_the_others_keep_their_pace(
    pg_clusters, tmp_path
):
    """ORG_MAX_PLANNING at 1 and a plans worker of 3 threads (compose's command, fewer threads). Four EXPLAINs are
    asked of servers of one organization that went silent (each would hold a thread until its connection's 2 s
    timeout), then one of another organization's healthy server. The silent organization's jobs run one at a time,
    the others put off, never lost (each ends in turn, with the server's reason), and the other organization's plan
    is read before the second of them starts. (With no share, three of them held the three threads and the other
    organization's plan waited for the first to time out.)"""
    import contextlib
    import threading

    from collectors import shares
    from collectors.tasks import plan_tracked, tracked
    from history.models import PlanAttempt, Statement
    from inventory.connection import parse_dsn
    from inventory.services import server_create
    from tests.processes import console_env, wait_ready
    from tests.tcp_proxy import TcpProxy
    from tests.world import collect

    calm_cluster = pg_clusters[16]
    calm = register(calm_cluster, name="calm-plans", org="calm-tenant")
    collect(calm)
    run(calm_cluster, "SELECT count(*) FROM pg_class WHERE relpages > %s", 2, params=(9,))
    collect(calm)
    like = "SELECT count(*) FROM pg_class WHERE relpages >%"
    calm_statement = calm.statements.get(queryid=server_entry(calm_cluster, like)["queryid"])
    broker = redis.Redis.from_url(console_env()["REDIS_URL"])
    broker.delete("plans")
    with contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(TcpProxy(calm_cluster.port)) for _ in range(BUSY_SERVERS)]
        busy = [
            server_create(
                name=f"silent-plans-{i}",
                connection=parse_dsn(f"postgresql://monitor:monitor-pw@127.0.0.1:{p.port}/app?sslmode=disable"),
                organization_name="busy-tenant",
            )
            for i, p in enumerate(proxies)
        ]
        busy_statements = [
            Statement.objects.create(
                server=s, userid=10, dbid=5, queryid=1000 + s.pk, first_seen_at=timezone.now(), query="SELECT $1"
            )
            for s in busy
        ]
        for p in proxies:
            p.go_silent()
        busy_org = busy[0].organization_id
        running: list[int] = []
        stop = threading.Event()

        def watch() -> None:  # the busy organization's slots in use, from outside the worker
            try:
                while not stop.wait(0.1):
                    running.append(shares.running(busy_org, namespace=shares.PLANS_NAMESPACE))
            finally:
                connection.close()

        env = console_env(ORG_MAX_PLANNING="1", COLLECTOR_CONNECT_TIMEOUT_S="2")
        with processes(tmp_path, env) as procs:
            worker = procs.start("plans", [*worker_argv(name="plans", concurrency=PLAN_THREADS), "--queues", "plans"])
            wait_ready(worker)
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            asked = [plan_tracked(s.pk, st.pk) for s, st in zip(busy, busy_statements, strict=True)]
            asked.append(plan_tracked(calm.pk, calm_statement.pk))
            _wait_for(lambda: all(tracked(t)["status"] in ("succeeded", "failed") for t in asked), 120, tmp_path)
            stop.set()
            watcher.join(10)
            log = worker.text()

    states = [tracked(t) for t in asked]
    assert states[-1]["status"] == "succeeded", states[-1]  # the calm organization's plan
    assert [s["result"]["error_code"] for s in states[:-1]] == ["server"] * BUSY_SERVERS, states
    assert max(running) == 1, running  # its share in use, never more
    assert "'code': 'over_share', 'put_off': True" in log  # put off, said
    busy_at = sorted(PlanAttempt.objects.filter(server__in=busy).values_list("at", flat=True))
    assert len(busy_at) == BUSY_SERVERS
    gaps = [(b - a).total_seconds() for a, b in zip(busy_at, busy_at[1:], strict=False)]
    assert min(gaps) >= 1.9, gaps  # one after the other, each held to its connection's timeout
    (calm_at,) = PlanAttempt.objects.filter(server=calm).values_list("at", flat=True)
    assert calm_at < busy_at[1], (calm_at, busy_at)


SECRET = "Qz7slackpath0000"
OLD_TEXT = f"SELECT 1 /* notify https://hooks.slack.com/services/T00/B00/{SECRET} */"


@pytest.mark.django_db
def test_texts_of_an_older_redaction_are_redacted_again_once(pg_clusters):
    """A statement collected from a real server records the redaction's version; one stored by an older version
    (its secret kept, as that version kept it) is redacted by beat's task, in batches, and once only."""
    from collectors import redact
    from collectors.tasks import redact_texts_again
    from history.models import Statement

    c = pg_clusters[15]
    run(c, "SELECT pg_stat_statements_reset()")
    run(c, "SELECT 'redact-again' /* plain */")
    server = register(c)
    collect(server)
    fresh = Statement.objects.filter(server=server, query__contains="plain").get()
    assert fresh.redacted_with == redact.VERSION  # what the collector stores records the version
    # As a version that did not know Slack's webhooks stored one: the secret kept, version 1.
    old = Statement.objects.filter(server=server).exclude(pk=fresh.pk).first()
    Statement.objects.filter(pk=old.pk).update(query=OLD_TEXT, redacted_with=1)

    assert redact_texts_again() >= 1
    old.refresh_from_db()
    assert SECRET not in old.query and "hooks.slack.com/services/<redacted>" in old.query
    assert old.redacted_with == redact.VERSION
    assert redact_texts_again() == 0  # done: the next run finds nothing
    fresh.refresh_from_db()
    assert fresh.query == "SELECT $1 /* plain */" and fresh.redacted_with == redact.VERSION
