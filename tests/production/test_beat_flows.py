"""Every entry of the beat schedule (console/schedule.py), run as production runs it: a real beat process, a
real threaded worker, real Redis, the test database outside any test transaction, mail to a real SMTP server.

The module's fixture drives the system and the tests judge what it did. Beat runs three times. First fresh,
with short ticks: collections, the advisor, and a collection asked for through the API. Then started again on a
schedule file whose entries last ran two hours ago (a beat back after a stop), so every entry is due at once:
rollups, the weekly report of a due organization, the exports' tidy and the partitions run in the worker. A
third start on an aged schedule proves that a week is never sent twice."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from accounts.tokens import token_create
from advisor.gather import NO_SNAPSHOT
from advisor.models import Evaluation
from console.schedule import beat_schedule
from console.services import server_delete
from devenv.cluster import Cluster
from exports.models import AuditExport
from history import partitions
from history.tables import TABLES
from inventory.models import Membership, Organization, Server
from readtier.parts import core_totals
from reports.models import ReportOptIn, ReportSchedule, WeeklySend
from reports.selectors import reports_due
from reports.weeks import ReportWeek, last_complete_week
from tests.history_world import build, raw_rows
from tests.processes import Processes, age_beat_schedule, beat_argv, database_url, processes, wait_until, worker_argv
from tests.reports.weekly_world import PNG, Inbox, SmtpServer, cids, free_port, mail_parts
from tests.world import register, run, server_entry, snapshots

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # reads only: what the processes committed
INTERVAL_S = 2
READER = "manager@beat.example"
ORG = "beat-acme"
QUERIES = 7  # times the workload's statement runs between two collections
WEEKLY_TASK = "reports.tasks.send_due_reports"
RETENTION_DAYS = 400  # the worker's raw and hourly retention here


@dataclass
class World:
    procs: Processes
    smtp: SmtpServer
    org: Organization
    cluster: Cluster  # a real PostgreSQL 15 ...
    live: Server  # ... registered and collected every 2 s
    week: ReportWeek  # the last complete week: the report's
    week_server: Server  # synthetic history over that week (the report's charts), not collected
    expired: AuditExport  # built 31 days ago: its file goes
    expired_path: Path
    lost: AuditExport  # queued 11 minutes ago, its broker message lost: sent again
    old_partition: str  # of raw snapshots, past retention: dropped
    seen: dict = field(default_factory=dict)  # what the fixture saw while it drove the system

    def logs(self) -> str:
        return self.procs.logs()

    def worker_log(self) -> str:
        return self.procs.started[0].text()


@contextmanager
def _quarantine(*, servers: set[int], organization: int) -> Iterator[None]:
    """What earlier tests left in the database (a session's known history: servers, organizations whose week is
    unclaimed) would be collected and reported here too: switched off for this module, then restored."""
    others = list(Server.objects.filter(enabled=True).exclude(pk__in=servers).values_list("pk", flat=True))
    Server.objects.filter(pk__in=others).update(enabled=False)
    foreign = Organization.objects.exclude(pk=organization)
    saved = {s.organization_id: s.enabled for s in ReportSchedule.objects.filter(organization__in=foreign)}
    ReportSchedule.objects.filter(organization_id__in=saved).update(enabled=False)
    created = [ReportSchedule.objects.create(organization=o, enabled=False) for o in foreign.exclude(pk__in=saved)]
    try:
        yield
    finally:
        Server.objects.filter(pk__in=others).update(enabled=True)
        for organization_id, enabled in saved.items():
            ReportSchedule.objects.filter(organization_id=organization_id).update(enabled=enabled)
        ReportSchedule.objects.filter(pk__in=[s.pk for s in created]).delete()


def _cleanup(organizations_before: set[int]) -> None:
    """Whatever this module made: its organizations with their servers (and their history), its user."""
    for organization in Organization.objects.exclude(pk__in=organizations_before):
        for server in Server.objects.filter(organization=organization):
            server_delete(server=server)
        organization.delete()
    get_user_model().objects.filter(username="beat-dba").delete()


def _due_organization(dba) -> Organization:
    """An organization whose weekly report is due now (its day and hour are now's, in UTC)."""
    org = Organization.objects.create(name=ORG)
    now = timezone.now()
    ReportSchedule.objects.create(organization=org, weekday=now.weekday(), hour=now.hour, time_zone="UTC")
    Membership.objects.create(organization=org, user=dba, role=Membership.Role.DBA)
    ReportOptIn.objects.create(organization=org, user=dba)
    return org


def _exports(org: Organization, server: Server, dba, root: Path, week: ReportWeek):
    """(an export built 31 days ago, its file, one queued 11 minutes ago whose broker message was lost)."""
    common = {
        "organization": org,
        "requested_by": dba,
        "server_ids": [server.pk],
        "formats": ["json"],
        "window_start": week.window.start,
        "window_end": week.window.end,
    }
    expired = AuditExport.objects.create(**common, status="done", progress=100, sha256="0" * 64)
    name = f"{org.pk}/{expired.pk}/old/audit.zip"  # in its own folder, as a build writes it
    path = root / name
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    AuditExport.objects.filter(pk=expired.pk).update(file_name=name, finished_at=timezone.now() - timedelta(days=31))
    lost = AuditExport.objects.create(**common)
    AuditExport.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(minutes=11))
    return expired, path, lost


def _booked(w: World, queryid: int) -> int:
    return sum((s.deltas_of(queryid) or {}).get("calls", 0) for s in snapshots(w.live))


def _hours(server: Server) -> tuple[datetime, datetime]:
    """The whole UTC hours holding the server's snapshots."""
    taken = [t for t, _, _ in raw_rows(server.pk, datetime(2000, 1, 1, tzinfo=UTC), timezone.now() + timedelta(1))]
    first = min(taken, default=timezone.now()).replace(minute=0, second=0, microsecond=0)
    last = max(taken, default=timezone.now()).replace(minute=0, second=0, microsecond=0)
    return first, last + timedelta(hours=1)


def _done(w: World, task: str) -> int:
    """How many times the worker finished `task` (its log line of a task that succeeded)."""
    return len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] succeeded", w.worker_log()))


def _exists(table: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        return cur.fetchone()[0]


def _first_beat(w: World) -> None:
    """Collections, the advisor, and "collect now" through the API."""
    seen = w.seen
    seen["baseline_s"] = wait_until(lambda: len(snapshots(w.live)) >= 1, 60)
    run(w.cluster, "SELECT count(*) FROM beat_items", QUERIES)
    entry = server_entry(w.cluster, "SELECT count(*) FROM beat_items%")
    seen["delta_s"] = wait_until(lambda: _booked(w, entry["queryid"]) >= QUERIES, 60)
    seen["calls"] = entry["calls"], _booked(w, entry["queryid"])

    def evaluated() -> bool:
        run_ = Evaluation.objects.filter(server=w.live, error="").first()
        return run_ is not None and run_.notes != [NO_SNAPSHOT]

    seen["advised_s"] = wait_until(evaluated, 60)
    _, token = token_create(user=get_user_model().objects.get(username="beat-dba"), name="beat-test")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    before = len(snapshots(w.live))
    response = client.post(f"/api/v1/servers/{w.live.pk}/collect/")
    seen["collect_now"] = response.status_code, response.json()
    if response.status_code == 202:
        url = response.json()["status_url"]
        wait_until(lambda: client.get(url).json()["status"] in ("succeeded", "failed"), 60)
        seen["collect_now_done"] = client.get(url).json(), len(snapshots(w.live)) - before


def _beat_back(w: World, schedule: Path, index: int) -> list[str]:
    """Stop beat, age its schedule file by two hours, start it again; the entries it holds."""
    beat = [p for p in w.procs.started if p.name == "beat"][-1]
    w.seen[f"beat_{index}_exit"] = beat.stop()
    entries = age_beat_schedule(schedule, by=timedelta(hours=2))
    w.procs.start("beat", beat_argv(schedule))
    return entries


def _second_beat(w: World, schedule: Path) -> None:
    """Every entry at once: rollups, the weekly report, the exports' tidy, the partitions."""
    seen = w.seen
    # No more collections of the live server: its rolled-up hours must equal its snapshots, to the unit.
    Server.objects.filter(pk=w.live.pk).update(enabled=False)
    wait_until(lambda: not Server.objects.get(pk=w.live.pk).enabled, 5)
    seen["rolled_up_before"] = core_totals(w.live.pk, _hours(w.live)).snapshots
    seen["entries"] = _beat_back(w, schedule, 1)
    beat = w.procs.started[-1]
    seen["sent"] = {}
    for name, entry in beat_schedule().items():
        line = f"Sending due task {name} ({entry['task']})"
        seen["sent"][name] = wait_until(lambda line=line: line in beat.text(), 30)
    seen["rolled_up_s"] = wait_until(
        lambda: core_totals(w.live.pk, _hours(w.live)).snapshots == len(raw_rows(w.live.pk, *_hours(w.live))), 60
    )
    seen["mailed_s"] = wait_until(lambda: w.smtp.inbox.count(READER) >= 1, 90)

    def status(export: AuditExport) -> str:
        return AuditExport.objects.get(pk=export.pk).status

    seen["tidied_s"] = wait_until(lambda: status(w.expired) == "expired" and status(w.lost) == "done", 90)
    ahead = partitions.partition_name(TABLES.SNAPSHOT.name, timezone.now() + timedelta(days=partitions.AHEAD["day"]))
    seen["ahead"] = ahead
    seen["partitions_s"] = wait_until(lambda: not _exists(w.old_partition) and _exists(ahead), 60)


def _third_beat(w: World, schedule: Path) -> None:
    seen = w.seen
    seen["weekly_runs_before"] = wait_until(lambda: _done(w, WEEKLY_TASK) >= 1, 60) is not None
    _beat_back(w, schedule, 2)
    seen["weekly_ran_again_s"] = wait_until(lambda: _done(w, WEEKLY_TASK) >= 2, 60)


@pytest.fixture(scope="module")
def world(pg_clusters, django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("beat-flows")
    exports = tmp / "exports"
    smtp = SmtpServer(Inbox(), free_port())
    smtp.start()
    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # the broker of the API's "collect now" too
    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CREDENTIALS_KEY": settings.CREDENTIALS_KEY,
        "DISPATCH_TICK_S": "1",
        "ADVISOR_INTERVAL_S": "3",
        "COLLECTOR_ACTIVITY_SAMPLES": "2",
        "COLLECTOR_ACTIVITY_SPAN_S": "0.1",
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
        "EMAIL_TIMEOUT": "5",
        "DEFAULT_FROM_EMAIL": "pgconsole <reports@beat.example>",
        "CONSOLE_URL": "https://console.beat.example",
        "EXPORT_ROOT": str(exports),
        # Its partition maintenance drops what is past retention: only the old partition made for it, never the
        # weeks-old histories other tests of the session write.
        "HISTORY_RAW_RETENTION_DAYS": str(RETENTION_DAYS),
        "HISTORY_HOURLY_RETENTION_DAYS": str(RETENTION_DAYS),
    }
    cluster = pg_clusters[15]
    with ExitStack() as stack:
        stack.enter_context(django_db_blocker.unblock())
        stack.enter_context(override_settings(EXPORT_ROOT=exports))
        stack.callback(smtp.stop)
        stack.callback(_cleanup, set(Organization.objects.values_list("pk", flat=True)))
        dba = get_user_model().objects.create_user("beat-dba", email=READER)
        org = _due_organization(dba)
        week = last_complete_week(timezone.now(), time_zone="UTC")
        start, end = week.window.start, week.window.end
        week_server = build("beat-week", n=8, start=start, end=end, step=timedelta(hours=1), seed=3)
        Server.objects.filter(pk=week_server.pk).update(organization=org, enabled=False)
        run(cluster, "DROP TABLE IF EXISTS beat_items; CREATE TABLE beat_items (id int)")
        live = register(cluster, name="beat-live", org=ORG)
        Server.objects.filter(pk=live.pk).update(interval_s=INTERVAL_S)
        expired, expired_path, lost = _exports(org, week_server, dba, exports, week)
        old = timezone.now() - timedelta(days=RETENTION_DAYS + 3)
        stack.callback(partitions.forget_cache)  # this process knew the partition the worker dropped
        partitions.ensure(TABLES.SNAPSHOT.name, old)
        stack.enter_context(_quarantine(servers={live.pk}, organization=org.pk))
        assert [d.organization_id for d in reports_due(now=timezone.now())] == [org.pk], "only ours is due"
        procs = stack.enter_context(processes(tmp, env))
        w = World(
            procs,
            smtp,
            org,
            cluster,
            live,
            week,
            week_server,
            expired,
            expired_path,
            lost,
            partitions.partition_name(TABLES.SNAPSHOT.name, old),
        )
        procs.start("worker", worker_argv(concurrency=4))
        schedule = tmp / "beat-schedule"
        procs.start("beat", beat_argv(schedule))
        _first_beat(w)
        _second_beat(w, schedule)
        _third_beat(w, schedule)
        yield w


def test_beat_dispatches_collections_and_the_worker_stores_exact_deltas(world):
    w = world
    assert w.seen["baseline_s"] is not None and w.seen["delta_s"] is not None, w.logs()
    # What pg_stat_statements counted, and what the history booked over the live server's intervals.
    assert w.seen["calls"] == (QUERIES, QUERIES)
    live = Server.objects.get(pk=w.live.pk)
    assert live.last_success_at is not None and live.consecutive_failures == 0


def test_the_advisor_evaluates_every_enabled_server(world):
    w = world
    assert w.seen["advised_s"] is not None, w.logs()
    assert not Evaluation.objects.filter(server=w.week_server).exists()  # disabled: not evaluated


def test_collect_now_from_the_api_runs_in_the_worker(world):
    w = world
    status, body = w.seen["collect_now"]
    assert status == 202, body
    done, new_snapshots = w.seen["collect_now_done"]
    assert done["status"] == "succeeded" and done["result"]["ok"] is True, done
    assert new_snapshots >= 1


def test_beat_back_after_a_stop_runs_every_entry_that_is_due(world):
    w = world
    assert w.seen["beat_1_exit"] == 0  # a clean stop, its schedule saved
    assert w.seen["entries"] == sorted(beat_schedule())
    late = [name for name, took in w.seen["sent"].items() if took is None]
    assert not late, f"beat never sent {late}\n{w.logs()}"


def test_rollups_build_the_read_tier_from_the_snapshots(world):
    w = world
    assert w.seen["rolled_up_before"] == 0
    assert w.seen["rolled_up_s"] is not None, w.logs()
    hours = _hours(w.live)
    raw = sum(figures for _, _, statements in raw_rows(w.live.pk, *hours) for figures in statements.values())
    assert (core_totals(w.live.pk, hours).values == raw).all()
    assert raw[0] >= QUERIES  # calls, the first figure


def test_the_weekly_report_of_the_due_organization_is_mailed(world):
    w = world
    assert w.seen["mailed_s"] is not None, w.logs()
    assert w.smtp.inbox.count() == w.smtp.inbox.count(READER) == 1
    message = w.smtp.inbox.to(READER)[0]
    assert ORG in message["Subject"], message["Subject"]
    parts = mail_parts(message)
    assert "beat-week" in parts.text and "beat-week" in parts.html
    assert parts.images and set(parts.images) == cids(parts.html)
    assert all(png.startswith(PNG) and len(png) > 2000 for png in parts.images.values())
    send = WeeklySend.objects.get(organization=w.org, kind=WeeklySend.Kind.WEEKLY)
    assert (send.week, send.status) == (w.week.label, WeeklySend.Status.SENT)


def test_the_exports_tidy_expires_old_bundles_and_sends_lost_builds_again(world):
    w = world
    assert w.seen["tidied_s"] is not None, w.logs()
    assert not w.expired_path.exists() and not w.expired_path.parent.parent.exists()
    lost = AuditExport.objects.get(pk=w.lost.pk)
    assert (Path(settings.EXPORT_ROOT) / lost.file_name).is_file()
    assert f"audit export {lost.pk} not built yet: sent to a worker again" in w.worker_log()


def test_partitions_are_created_ahead_and_dropped_past_retention(world):
    w = world
    assert w.seen["partitions_s"] is not None, w.logs()
    assert not _exists(w.old_partition) and _exists(w.seen["ahead"])


def test_beat_started_again_never_sends_a_week_twice(world):
    w = world
    assert w.seen["weekly_runs_before"] and w.seen["weekly_ran_again_s"] is not None, w.logs()
    assert w.smtp.inbox.count(READER) == 1
    assert WeeklySend.objects.filter(organization=w.org).count() == 1
    assert "Traceback" not in w.worker_log(), w.worker_log()
