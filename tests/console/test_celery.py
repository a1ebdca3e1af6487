"""console.celery: the Celery application configured from Django's CELERY_ settings, with every app's tasks and
console.schedule's beat schedule; around each task a worker runs, the database connection is dropped when broken
or past CONN_MAX_AGE and kept otherwise, never for a task run eagerly nor inside a transaction (not the task's); a
worker's and beat's every session on the history store stops a statement after WORKER_STATEMENT_TIMEOUT_MS (a
real worker's below)."""

import time

import psycopg
import pytest
import redis
from celery import signals
from django.conf import settings
from django.db import OperationalError, ProgrammingError, connection

from advisor.tasks import advise_server
from console.celery import app
from console.schedule import beat_schedule
from history.sessions import limit_statements
from history.tables import TABLES
from tests.processes import console_env, database_url, processes, wait_for, wait_ready, worker_argv
from tests.world import register, snapshots

# tests/collectors/test_tasks.py's Redis database (docs/development.md): both hold the test clusters' lock, so they
# never run at once.
BROKER = "redis://127.0.0.1:6379/7"


def around_a_worker_task():
    """What a worker sends around a task: the request of a task it received, not run eagerly."""
    assert advise_server.request.is_eager is False
    signals.task_prerun.send(sender=advise_server, task_id="t-1", task=advise_server, args=(1,), kwargs={})
    signals.task_postrun.send(sender=advise_server, task_id="t-1", task=advise_server, args=(1,), kwargs={})


@pytest.fixture
def aged():
    """Makes the open connection look past CONN_MAX_AGE; its age back afterwards (pytest-django runs the tests in
    a transaction first: the connection outlives them)."""
    connection.ensure_connection()
    saved = connection.close_at

    def age() -> None:
        connection.close_at = time.monotonic() - 1

    yield age
    if connection.connection is not None:
        connection.close_at = saved


def test_the_application_has_every_apps_tasks_the_django_settings_and_the_whole_beat_schedule():
    app.loader.import_default_modules()
    app.finalize()
    modules = {task.__module__ for task in app.tasks.values()}
    assert {f"{name}.tasks" for name in ("collectors", "history", "advisor", "reports", "exports", "alerts")} <= modules
    assert (app.conf.broker_url, app.conf.task_default_queue) == (
        settings.CELERY_BROKER_URL,
        settings.CELERY_TASK_DEFAULT_QUEUE,
    )
    assert app.conf.beat_schedule == beat_schedule()


@pytest.mark.django_db(transaction=True)
def test_a_young_connection_is_kept_and_an_aged_one_dropped(aged):
    connection.close()
    connection.ensure_connection()
    kept = connection.connection
    assert connection.close_at is not None and connection.close_at > time.monotonic()  # CONN_MAX_AGE in settings
    around_a_worker_task()
    assert connection.connection is kept
    aged()
    around_a_worker_task()
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_a_broken_connection_is_dropped_and_one_after_a_mere_error_kept():
    with pytest.raises(ProgrammingError), connection.cursor() as cursor:
        cursor.execute("SELECT no_such_column")
    kept = connection.connection
    around_a_worker_task()
    assert connection.connection is kept and connection.errors_occurred is False
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # the server ends the session
    around_a_worker_task()
    assert connection.connection is None
    with connection.cursor() as cursor:  # the next query opens a new session
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_an_eager_task_leaves_the_connection_alone_even_aged(aged):
    kept = connection.connection
    aged()
    assert advise_server.apply((0,)).get() == {"server_id": 0, "error": "deleted"}  # it ran, on that connection
    assert connection.connection is kept


@pytest.mark.django_db
def test_inside_a_transaction_the_connection_is_left_alone_even_aged(aged):
    assert connection.in_atomic_block  # the test's own transaction
    kept = connection.connection
    aged()
    around_a_worker_task()
    assert connection.connection is kept and connection.in_atomic_block


def _statement_timeout() -> str:
    with connection.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        return cur.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_beat_limits_its_history_store_sessions_as_a_worker_does(settings):
    """beat_init, which beat sends at its start as a worker sends worker_init (that one through a real worker
    below: sent in this process it would install Celery's worker fixup here)."""
    settings.WORKER_STATEMENT_TIMEOUT_MS = 4321
    try:
        signals.beat_init.send(sender=None)
        connection.close()
        assert _statement_timeout() == "4321ms"
    finally:
        limit_statements(None)
        connection.close()  # no later test inherits the limit


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_workers_statement_stuck_on_the_history_store_is_stopped_at_worker_statement_timeout_ms(
    pg_clusters, tmp_path
):
    """A real worker, as compose runs one: its collection waits on a lock another session holds on the history
    store's snapshots, for ever without a limit; past WORKER_STATEMENT_TIMEOUT_MS the history store stops the
    statement, the worker's thread is free, the collection is retried and stored once the lock is gone."""
    from collectors.tasks import collect_server

    server = register(pg_clusters[17], name="stuck-on-the-history")
    redis.Redis.from_url(BROKER).flushdb()
    with processes(tmp_path, console_env(REDIS_URL=BROKER, WORKER_STATEMENT_TIMEOUT_MS="1000")) as procs:
        worker = procs.start("worker", worker_argv(concurrency=1))
        wait_ready(worker)
        with psycopg.connect(database_url().replace("postgres://", "postgresql://", 1)) as holder:
            holder.execute(f"LOCK TABLE {TABLES.SNAPSHOT.name} IN ACCESS EXCLUSIVE MODE")  # until the block ends
            with app.connection_for_write(BROKER) as conn:
                collect_server.apply_async((server.pk,), expires=120, connection=conn)
            wait_for(
                lambda: "canceling statement due to statement timeout" in worker.text(),
                60,
                what="the worker's statement stopped",
                logs=worker.text,
            )
            assert "retrying collection" in worker.text() and worker.alive()
        wait_for(
            lambda: len(snapshots(server)) == 1,
            60,
            what="the collection stored once the lock is gone",
            logs=worker.text,
        )
