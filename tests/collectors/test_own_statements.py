"""The console's own statements are told apart by their mark and their role together (history.own).

A server monitored as a role its application connects as too (as `postgres` often is in small shops): every
statement the console sends (snapshots, texts, lineage, the connection check, the wait sampler's looks) reaches
pg_stat_statements ending in its mark `/* pgconsole <token> */`, on PostgreSQL 13 to 18; the application's
statement of that role, run three times, is listed by the selector, the mail's digest and the audit export, and
the console's are not (hidden by role alone, the application's went with them: defect 1 of issue 35). A user of
another role who ends statements with the mark, the plain one or the token copied from the console's texts, hides
nothing from the lists nor from the plan rounds (issue 52). The page and the API: tests/console/views/test_top.py
and tests/console/api/test_statements.py; the rule itself: tests/history/test_own.py."""

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db.models import Value
from django.db.models.functions import Concat, Left, Length
from django.utils import timezone

from collectors.connection_check import server_check
from collectors.plans.auto import due_statements
from collectors.waits import sampler
from console.services import server_delete
from exports.audit import server_audit
from history.models import ServerState, Statement
from history.own import LEGACY_MARK, own_mark
from inventory.models import Server
from readtier import Page, StatementFilters, Window, top_statements
from reports.digest import server_digest
from reports.weeks import ReportWeek
from tests.conftest import MONITORED_MAJORS
from tests.world import APP_DB, collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "shared-role-password"
APPLICATION = "SELECT count(*) FROM pg_class WHERE relname = $1"
_roles = itertools.count()


@pytest.fixture
def shared(pg_clusters, request):
    """(cluster, role): a role that the console monitors as and the application runs as; dropped afterwards."""
    cluster = pg_clusters[request.param]
    role = f"shared_app_{next(_roles)}"
    run(cluster, f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}' IN ROLE pg_monitor")
    try:
        yield cluster, role
    finally:
        run(cluster, f"DROP ROLE {role}")


def _application(cluster, role: str, times: int = 3) -> None:
    with psycopg.connect(cluster.dsn(APP_DB, role, PASSWORD), autocommit=True, prepare_threshold=None) as conn:
        for _ in range(times):
            conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", ("pg_proc",))


def _entries_of(cluster, role: str) -> list[str]:
    """The texts of every pg_stat_statements entry of the role, read as the superuser (ground truth)."""
    with psycopg.connect(cluster.dsn(APP_DB), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = %s)",
            (role,),
        ).fetchall()
    return [r[0] for r in rows]


def _sample_once(server: Server) -> bool:
    """The wait sampler's looks at the server for a second, in-process, as manage.py sample_waits runs them;
    False where the server has pg_wait_sampling's profile instead (read with the snapshot: not sampled)."""
    Server.objects.filter(pk=server.pk).update(interval_s=5)  # a look every 0.5 s
    jobs = [j for j in sampler.jobs() if j.server_id == server.pk]
    if not jobs:
        return False
    (job,) = jobs

    async def looks():
        s = sampler.Sampler(django_settings.REDIS_URL)
        s.apply([job])
        await asyncio.sleep(1.2)
        # Stopped as manage.py sample_waits stops (bounded: a look cancelled under way once held an unbounded
        # gather of the tasks here for the test's 300 s).
        await s.close(within_s=5.0)

    asyncio.run(looks())
    assert sampler.take(server.pk)[1] is not None, "the sampler never looked"
    return True


@pytest.mark.parametrize("shared", MONITORED_MAJORS, indirect=True)
def test_every_statement_the_console_sends_is_marked(shared):
    cluster, role = shared
    server = register(cluster, name=f"shared-{cluster.major}", user=role, password=PASSWORD)
    try:
        collect(server)
        _application(cluster, role)
        collect(server)
        collect(server)  # reads the texts of the entries the last one found new, its own included
        assert server_check(endpoint=server.endpoint, password=PASSWORD).connected
        sampled = _sample_once(server)
        texts = _entries_of(cluster, role)
        theirs = [t for t in texts if "pg_class WHERE relname" in t and "pg_stat" not in t]
        ours = [t for t in texts if t not in theirs]
        assert theirs == [APPLICATION]  # the application's, unmarked
        mark = own_mark()
        assert ours and all(t.endswith(f"\n{mark}") for t in ours), [t[-80:] for t in ours if not t.endswith(mark)]
        assert any("pg_stat_statements" in t for t in ours)
        assert any("pg_stat_activity" in t for t in ours) or not sampled
    finally:
        server_delete(server=server)


@pytest.mark.parametrize("shared", [15], indirect=True)
def test_the_applications_statements_of_the_monitoring_role_are_listed_and_the_consoles_are_not(shared):
    cluster, role = shared
    server = register(cluster, name="shared-surfaces", user=role, password=PASSWORD)
    start = timezone.now() - timedelta(seconds=1)
    try:
        collect(server)
        collect(server)  # the console's first read, now an entry of its own
        _application(cluster, role)
        collect(server)
        collect(server)
        window = Window(start, timezone.now() + timedelta(seconds=1))
        every = top_statements(server_id=server.pk, window=window, page=Page(1, 500)).rows
        listed = top_statements(
            server_id=server.pk, window=window, page=Page(1, 500), filters=StatementFilters(hide_own=True)
        ).rows
        app = [s for s in every if s.query == APPLICATION and s.user == role]
        assert len(app) == 1 and app[0].calls == 3 and not app[0].own
        own = [s for s in every if s.own]
        assert own and all(s.user == role and s.query.endswith(own_mark()) for s in own)
        assert [s.statement_id for s in listed] == [s.statement_id for s in every if not s.own]
        assert app[0].statement_id in {s.statement_id for s in listed}

        # The mail's digest of the week so far, and the audit export: the application's, not the console's.
        now = datetime.now(UTC)
        year, week, _ = now.isocalendar()
        digest = server_digest(
            server=server,
            week=ReportWeek(year, week, "UTC", now + timedelta(seconds=1)),
            status="ok",
            error_message="",
            activity=[],
        )
        assert app[0].statement_id in {c.current.statement_id for c in digest.top}
        assert not any(c.current.own for c in digest.top)
        audit = server_audit(server=server, window=window)
        for order, rows in audit.top.items():
            assert not any(r.own for r in rows), order
        assert app[0].statement_id in {r.statement_id for r in audit.top["calls"]}
    finally:
        server_delete(server=server)


@pytest.fixture
def monitor_and_forger(pg_clusters):
    """(cluster, monitoring role, forger): a fresh monitoring role (its statements' entries are new, so their texts
    carry the token, not an older console's plain mark) and a role of the server's users that may read every
    role's texts (pg_read_all_stats, as pg_monitor gives it); both dropped afterwards."""
    cluster = pg_clusters[17]
    n = next(_roles)
    monitor, forger = f"own_monitor_{n}", f"own_forger_{n}"
    run(cluster, f"CREATE ROLE {monitor} LOGIN PASSWORD '{PASSWORD}' IN ROLE pg_monitor")
    run(cluster, f"CREATE ROLE {forger} LOGIN PASSWORD '{PASSWORD}' IN ROLE pg_read_all_stats")
    try:
        yield cluster, monitor, forger
    finally:
        run(cluster, f"DROP ROLE {monitor}, {forger}")


FORGED_PLAIN = "SELECT count(*) FROM generate_series($1, $2) AS g"
FORGED_TOKEN = "SELECT sum(g) FROM generate_series($1, $2) AS g"


def _forge(cluster, forger: str, monitor: str) -> str:
    """The forger's statements, each run three times: one ending with the plain mark, one with the console's token
    read off the console's own texts in pg_stat_statements. The mark copied."""
    with psycopg.connect(cluster.dsn(APP_DB, forger, PASSWORD), autocommit=True, prepare_threshold=None) as conn:
        texts = conn.execute(
            "SELECT query FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = %s)",
            (monitor,),
        ).fetchall()
        copied = {t.rsplit("\n", 1)[-1] for (t,) in texts if t.startswith("SELECT")}
        assert copied == {own_mark()}, copied  # what the role can read: the token is no secret from it
        (mark,) = copied
        for _ in range(3):
            for text, ending in ((FORGED_PLAIN, LEGACY_MARK), (FORGED_TOKEN, mark)):
                conn.execute(f"{text.replace('$1', '%s').replace('$2', '%s')}\n{ending}", (1, 200_000))
    return mark


def test_statements_another_role_ends_with_the_mark_stay_listed_and_the_consoles_do_not(monitor_and_forger):
    cluster, monitor, forger = monitor_and_forger
    server = register(cluster, name="forged-marks", user=monitor, password=PASSWORD)
    start = timezone.now() - timedelta(seconds=1)
    try:
        collect(server)
        collect(server)  # the console's first reads, entries now; their texts are read by the next one
        collect(server)
        mark = _forge(cluster, forger, monitor)
        collect(server)
        collect(server)  # the forged entries' texts
        state = ServerState.objects.get(server=server)
        assert state.role_oid is not None

        def lists(hide_own: bool) -> list:
            window = Window(start, timezone.now() + timedelta(seconds=1))
            filters = StatementFilters(hide_own=hide_own)
            return top_statements(server_id=server.pk, window=window, page=Page(1, 500), filters=filters).rows

        every = lists(hide_own=False)
        forged = [s for s in every if s.user == forger and "generate_series" in (s.query or "")]
        ours = [s for s in every if s.user == monitor]
        assert sorted(s.query for s in forged) == sorted([f"{FORGED_PLAIN}\n{LEGACY_MARK}", f"{FORGED_TOKEN}\n{mark}"])
        assert not any(s.own for s in forged) and all(s.calls == 3 for s in forged)
        # The console's real collections, run as the monitoring role and marked: its own.
        assert ours and all(s.own for s in ours if s.query is not None), [s.query for s in ours if not s.own]
        listed = {s.statement_id for s in lists(hide_own=True)}
        assert {s.statement_id for s in forged} <= listed
        assert not listed & {s.statement_id for s in ours if s.own}
        # The plan rounds rank as the pages do: the forged statements are among those to plan, the console's not.
        _, due = due_statements(server.pk)
        assert {s.statement_id for s in forged} <= set(due) and not set(due) & {s.statement_id for s in ours if s.own}

        # Texts an older console stored, ending with the plain mark: still the console's, by its role.
        Statement.objects.filter(server=server, userid=state.role_oid, query__endswith=mark).update(
            query=Concat(Left("query", Length("query") - len(mark)), Value(LEGACY_MARK))
        )
        again = lists(hide_own=False)
        assert {s.statement_id for s in again if s.own} == {s.statement_id for s in ours if s.own}
        assert all(s.query.endswith(f"\n{LEGACY_MARK}") for s in again if s.own)
        assert {s.statement_id for s in forged} <= {s.statement_id for s in lists(hide_own=True)}

        # The monitoring role not known: nothing is hidden (a statement of the console's listed costs a line).
        ServerState.objects.filter(server=server).update(role_oid=None)
        assert {s.statement_id for s in lists(hide_own=True)} == {s.statement_id for s in every}
    finally:
        server_delete(server=server)
