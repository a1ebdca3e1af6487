"""The advisor's time limit really stops an evaluation, on compose's tasks worker (processes: Celery's time limits
hold there, not on threads): an evaluation held up on the history store (a lock the test keeps on the snapshots)
is stopped at ADVISOR_TIME_LIMIT_S, its query cancelled, the reason on the server's evaluation, and the same
worker evaluates the server whole once the lock is gone. Each evaluation is sent as beat's fleet task sends it,
from the worker: a task's time limits travel with its message, set by the sender's settings."""

from __future__ import annotations

import psycopg
import pytest

from advisor.models import Evaluation
from advisor.tasks import advise_fleet
from inventory.connection import parse_dsn
from inventory.services import server_create
from tests.processes import console_env, database_url, processes, wait_for
from tests.production.test_production_mode import compose, local

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
LIMIT_S = 2
WAITING = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"


def test_an_evaluation_past_its_time_limit_is_stopped_and_the_worker_goes_on(tmp_path):
    server = server_create(
        name="slow-advice", connection=parse_dsn("postgresql://monitor:pw@127.0.0.1:1/app"), organization_name="lim"
    )

    def _error() -> str | None:
        return Evaluation.objects.filter(server=server).values_list("error", flat=True).first()

    tasks = local(compose()["tasks"]["command"], port=0, folder=tmp_path)
    assert "prefork" in tasks
    dsn = database_url().replace("postgres://", "postgresql://", 1)
    with processes(tmp_path, console_env(ADVISOR_TIME_LIMIT_S=str(LIMIT_S))) as procs:
        with psycopg.connect(dsn) as holder:
            holder.execute("LOCK TABLE collectors_snapshot IN ACCESS EXCLUSIVE MODE")  # until the block ends
            procs.start("tasks", tasks)
            advise_fleet.delay()
            with psycopg.connect(dsn, autocommit=True) as watcher:
                wait_for(
                    lambda: watcher.execute(WAITING).fetchone()[0] >= 1,
                    60,
                    what="the evaluation waiting",
                    logs=procs.logs,
                )
                took = wait_for(lambda: _error(), 30, what="the evaluation stopped", logs=procs.logs)
                # Its query cancelled, not left waiting behind the lock.
                wait_for(lambda: watcher.execute(WAITING).fetchone()[0] == 0, 10, what="its query cancelled")
        assert took < LIMIT_S + 10, took
        assert _error() == (
            f"The evaluation ran past its time limit (ADVISOR_TIME_LIMIT_S = {LIMIT_S} s) and was stopped; the next "
            "run tries again."
        )
        Evaluation.objects.filter(server=server).delete()
        advise_fleet.delay()
        wait_for(lambda: _error() is not None, 60, what="the next evaluation", logs=procs.logs)
        log = procs.started[0].text()
    assert _error() == "", log[-3000:]
    assert "SoftTimeLimitExceeded" in log or "soft time limit" in log.lower(), log[-3000:]
