"""End to end through a real Redis broker and real Celery worker and beat processes:
beat tick -> dispatcher -> collection task -> rows in the history store."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection

from console.models import Server
from tests.world import register, run, server_entry, snapshots

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
BROKER = "redis://127.0.0.1:6379/7"


@pytest.fixture
def celery_processes(tmp_path):
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": BROKER,
        "DISPATCH_TICK_S": "1",
        "COLLECTOR_ACTIVITY_SAMPLES": "2",
        "COLLECTOR_ACTIVITY_SPAN_S": "0.1",
        "CREDENTIALS_KEY": django_settings.CREDENTIALS_KEY,
    }
    redis.Redis.from_url(BROKER).flushdb()
    celery = [sys.executable, "-m", "celery", "-A", "console"]
    procs = [
        subprocess.Popen([*celery, "worker", "--pool", "threads", "--concurrency", "2", "--loglevel", "info"],
                         cwd=ROOT, env=env, stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT),
        subprocess.Popen([*celery, "beat", "--schedule", str(tmp_path / "beat-schedule"), "--loglevel", "info"],
                         cwd=ROOT, env=env, stdout=open(tmp_path / "beat.log", "w"), stderr=subprocess.STDOUT),
    ]  # fmt: skip
    yield tmp_path
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


def _wait_for(predicate, timeout_s: float, logs) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    text = "\n".join((logs / f).read_text()[-3000:] for f in ("worker.log", "beat.log"))
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
    _wait_for(lambda: any(s.kind == "delta" and s.block is not None and len(s.block) for s in snapshots(server)),
              60, celery_processes)  # fmt: skip
    queryid = server_entry(c, "SELECT count(*) FROM celery_items%")["queryid"]
    calls = sum((s.deltas_of(queryid) or {}).get("calls", 0) for s in snapshots(server))
    assert calls == 4

    server.refresh_from_db()
    assert server.last_success_at is not None and server.consecutive_failures == 0
    assert server.next_collect_at is not None
    broken.refresh_from_db()
    assert broken.last_error_class == "auth_failed" and broken.consecutive_failures >= 1
    assert snapshots(broken) == []
