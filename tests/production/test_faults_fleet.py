"""Hostile servers among healthy ones, collected by compose's collection worker and beat: one that trickles its
reply, one that goes silent in the middle of a snapshot, one that resets its statistics every second, one that
invents new statements all the time and one with huge query texts. Each gets its own status; the healthy
servers' lag against their due times stays what it was before the hostile ones were switched on, and none of
their intervals is missed."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import psycopg
import pytest

from collectors import shares
from collectors.scheduling import phase_s
from tests.conftest import APP_DB
from tests.processes import beat_argv, wait_for
from tests.production.fault_world import FaultWorld, gaps_s
from tests.production.test_production_mode import compose, local
from tests.tcp_proxy import TcpProxy

from .test_faults_worker import _dsn

pytestmark = pytest.mark.slow

INTERVAL_S = 5  # the product's shortest
CALM_S, HOSTILE_S = 30, 45  # the two windows, as intervals of every healthy server: 6 and 9
HUGE = 40  # statements of 1 MB text each


def _lags(world: FaultWorld, sid: int, since: datetime, until: datetime) -> tuple[list[float], list[float]]:
    """(lag of each snapshot taken in [since, until) behind its due time, gaps between them) in seconds."""
    snaps = [s for s in world.history.snapshots(sid) if since <= s.taken_at < until]
    phase = phase_s(sid, INTERVAL_S)
    lags = [(s.taken_at.timestamp() - phase) % INTERVAL_S for s in snaps]
    return lags, gaps_s(snaps)


def _intervals_of(world: FaultWorld, ids: list[int], since: datetime, n: int) -> None:
    """Waits until every server of `ids` has `n` snapshots since `since` (`n` intervals, when none is missed; one
    missed shows as a gap below)."""
    wait_for(
        lambda: all(len([s for s in world.history.snapshots(sid) if s.taken_at >= since]) >= n for sid in ids),
        3 * n * INTERVAL_S,
        what=f"{n} intervals of the healthy servers",
    )


def _enable(world: FaultWorld, ids: list[int], on: bool) -> None:
    world.history.sql("UPDATE console_server SET enabled = %s WHERE id = ANY(%s)", [on, ids])


@contextlib.contextmanager
def _looping(work, every_s: float) -> Iterator[None]:
    """`work(i)` every `every_s` seconds in a thread of its own, for the duration of the block."""
    stop = threading.Event()

    def loop() -> None:
        i = 0
        while not stop.wait(every_s):
            work(i)
            i += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def test_hostile_servers_get_their_own_status_and_leave_the_others_on_time(faults, pg_clusters, tmp_path):
    w = faults.world
    # Resets are seen whole from PostgreSQL 14 on (pg_stat_statements_info.stats_reset); 13 invents statements.
    resetting, inventing, huge = pg_clusters[14], pg_clusters[13], pg_clusters[17]
    for c in (resetting, inventing, huge):
        c.execute("SELECT pg_stat_statements_reset()", dbname=APP_DB)
    with TcpProxy(w.primary.port) as trickle, TcpProxy(w.primary.port) as silent:
        dsns = {
            **{f"healthy-{i}": _dsn(w.primary.port) for i in range(3)},
            # In clear (sslmode=disable): the proxies read the protocol to know when to trickle or go silent.
            "trickling": _dsn(trickle.port) + "?sslmode=disable",
            "silent": _dsn(silent.port) + "?sslmode=disable",
            "resetting": _dsn(resetting.port),
            "inventing": _dsn(inventing.port),
            "huge": _dsn(huge.port),
        }
        ids = w.register_many(dsns, interval_s=INTERVAL_S)
        healthy = [ids[f"healthy-{i}"] for i in range(3)]
        hostile = {name: ids[name] for name in ("trickling", "silent", "resetting", "inventing", "huge")}
        _enable(w, list(hostile.values()), False)
        # As compose runs them; texts budgeted small so that the huge ones spread over several snapshots.
        worker = local(compose()["worker"]["command"], port=0, folder=tmp_path)
        faults.procs.start("worker", worker, COLLECTOR_TEXT_BYTES_PER_SNAPSHOT="600000")
        faults.procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: all(len(w.history.snapshots(s)) >= 2 for s in healthy), 60, what="healthy servers' history")
        calm_from = datetime.now().astimezone()
        _intervals_of(w, healthy, calm_from, CALM_S // INTERVAL_S)
        calm_to = datetime.now().astimezone()

        # The hostile ones, switched on.
        trickle.trickle_on(b"pg_stat_statements(", every_s=1.0)
        silent.go_silent_on(b"pg_stat_statements(")
        pad = "p" * 1_000_000
        for k in range(HUGE):
            huge.execute(f"SELECT {', '.join(['7'] * (k + 1))} /* huge {pad} */", dbname=APP_DB)

        def reset(_: int) -> None:
            resetting.execute("SELECT count(*) FROM pg_class", dbname=APP_DB)
            resetting.execute("SELECT pg_stat_statements_reset()", dbname=APP_DB)

        def invent(i: int) -> None:
            with psycopg.connect(inventing.dsn(APP_DB), autocommit=True) as conn:
                for k in range(i * 20, i * 20 + 20):
                    conn.execute(f"SELECT {', '.join(['3'] * (k + 1))}")

        with _looping(reset, 1.0), _looping(invent, 1.0):
            _enable(w, list(hostile.values()), True)
            hostile_from = datetime.now().astimezone()
            _intervals_of(w, healthy, hostile_from, HOSTILE_S // INTERVAL_S)
            hostile_to = datetime.now().astimezone()
        _enable(w, list(hostile.values()) + healthy, False)

    # The healthy servers: not a missed interval, and their lag where it was.
    calm, stormy = [], []
    for sid in healthy:
        lags, gaps = _lags(w, sid, calm_from, calm_to)
        calm += lags
        assert max(gaps) < 1.5 * INTERVAL_S, (sid, "calm", gaps)
        lags, gaps = _lags(w, sid, hostile_from, hostile_to)
        stormy += lags
        assert max(gaps) < 1.5 * INTERVAL_S, (sid, "hostile", gaps, faults.logs())
        assert len(lags) >= HOSTILE_S // INTERVAL_S - 1, (sid, len(lags))
    p95 = {name: float(np.percentile(v, 95)) for name, v in (("calm", calm), ("hostile", stormy))}
    assert p95["hostile"] <= p95["calm"] + 0.5, p95

    # Each hostile server's own status, as its page shows it: its errors while it was hostile.
    status = {name: w.history.server(sid) for name, sid in hostile.items()}
    errors = {
        name: [(c, m) for at, c, m in w.history.errors(sid) if hostile_from <= at <= hostile_to]
        for name, sid in hostile.items()
    }
    # Trickling: given up at every snapshot's deadline, with the reason.
    assert len(errors["trickling"]) >= HOSTILE_S // INTERVAL_S - 2, errors["trickling"]
    assert {c for c, _ in errors["trickling"]} == {"timeout"}, errors["trickling"]
    assert all("answers, but too slowly" in m for _, m in errors["trickling"]), errors["trickling"]
    # Silent in the middle of a snapshot: that one given up, then the host does not answer new connections.
    first, *then = errors["silent"]
    assert first[0] == "timeout" and then, errors["silent"]
    assert all(c == "unreachable" and "connection timeout expired" in m for c, m in then), errors["silent"]
    for name in ("resetting", "inventing", "huge"):
        assert status[name]["consecutive_failures"] == 0 and status[name]["last_error_class"] == "", (name, status)
    resets = w.history.sql(
        "SELECT count(*) FILTER (WHERE full_reset), count(*) FROM collectors_snapshot WHERE server_id = %s "
        "AND kind = 'delta'",
        [hostile["resetting"]],
    )[0]
    assert resets[0] >= 3 and resets[0] >= resets[1] - 2, resets  # every interval spans a reset: each one seen
    new = w.history.sql(
        "SELECT new_entries FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' ORDER BY taken_at",
        [hostile["inventing"]],
    )
    assert len(new) >= 5 and all(n >= 20 for (n,) in new[1:]), new
    # Each huge text read (cut on the server) within the snapshots' text budget: none pending, none lost.
    texts = w.history.sql(
        "SELECT text_status, count(*) FROM collectors_statement WHERE server_id = %s "
        "AND (query LIKE '%%huge ppp%%' OR text_status <> 'stored') GROUP BY 1",
        [hostile["huge"]],
    )
    assert texts == [("stored", HUGE)], texts
    for c in (resetting, inventing, huge):
        c.execute("SELECT pg_stat_statements_reset()", dbname=APP_DB)


SLOW_SERVERS = 12  # of one organization, each holding a thread about half of its interval: 6 threads
THREADS, SHARE = 2, 1  # of the collection worker, and the slow organization's share of them


def test_an_organization_whose_servers_answer_slowly_takes_its_share_of_the_workers_and_no_more(faults, tmp_path):
    """Twelve servers of one organization trickle their replies, each holding a worker thread until it is given up:
    three times what the collection worker has threads (compose's command with 2 of them). With ORG_MAX_COLLECTING
    at 1, one of them is collected at a time, the rest put off, and a server of another organization misses no
    interval. (With no share, ORG_MAX_COLLECTING=0, the same servers held both threads and the other
    organization's server missed intervals: gaps of 7 to 15 s.)"""
    w = faults.world
    with contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(TcpProxy(w.primary.port)) for _ in range(SLOW_SERVERS)]
        slow = w.register_many(
            {f"slow-{i}": _dsn(p.port) + "?sslmode=disable" for i, p in enumerate(proxies)}, org="slow-tenant"
        )
        quiet = w.register("quiet", _dsn(w.primary.port), org="quiet-tenant")
        slow_org = w.history.sql("SELECT id FROM console_organization WHERE name = 'slow-tenant'")[0][0]
        _enable(w, list(slow.values()), False)
        worker = local(compose()["worker"]["command"], port=0, folder=tmp_path)
        worker[worker.index("--concurrency") + 1] = str(THREADS)
        collecting = faults.procs.start("worker", worker, ORG_MAX_COLLECTING=str(SHARE))
        faults.procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: len(w.history.snapshots(quiet)) >= 2, 60, what="the quiet server's history")

        for p in proxies:
            p.trickle_on(b"pg_stat_statements(", every_s=1.0)
        _enable(w, list(slow.values()), True)
        running: list[int] = []
        with _looping(lambda _: running.append(_running(w, slow_org)), 0.2):
            wait_for(lambda: max(running, default=0) >= SHARE, 30, what="the slow organization's share in use")
            since = datetime.now().astimezone()
            _intervals_of(w, [quiet], since, CALM_S // INTERVAL_S)
            until = datetime.now().astimezone()
        _enable(w, list(slow.values()) + [quiet], False)

    # The quiet server: not an interval missed (with no share its gaps were 7 to 15 s, at a 5 s interval).
    lags, gaps = _lags(w, quiet, since, until)
    assert max(gaps) < 1.5 * INTERVAL_S, (gaps, faults.logs())
    assert len(lags) >= CALM_S // INTERVAL_S - 1, lags
    assert max(running) == SHARE, running  # its share in use, never more
    # The slow servers: each given up at its deadline when collected, the others put off, then skipped when due.
    timeouts = [e for sid in slow.values() for at, e, _ in w.history.errors(sid) if since <= at <= until]
    assert len(timeouts) >= SHARE and set(timeouts) == {"timeout"}, timeouts
    log = collecting.text()
    assert "'kind': 'over_share'" in log and "its organization's share of the collection workers" in log


def _running(world: FaultWorld, organization_id: int) -> int:
    """How many of the organization's collections hold a slot of its share now (collectors.shares.running)."""
    return world.history.sql(shares.RUNNING_SQL, shares.running_params(organization_id))[0][0]
