"""Session fixtures: private PostgreSQL clusters to monitor (see devenv/).

* ``pg_clusters``   dict major -> Cluster for 13, 14, 15, 16, 17, 18 (fresh,
                    started in parallel at first use, stopped at session end)
* ``pg12_cluster``  PostgreSQL 12, same setup (started only when asked for)
* ``evict_cluster`` PostgreSQL 14 with pg_stat_statements.max=100 (lazily)
* ``monitor_dsn``   monitor_dsn(cluster, dbname="app") -> DSN of the monitor role
* ``cluster_lock``  held for the session by any user of the fixed test clusters, so
                    that concurrent pytest sessions wait instead of clobbering them
* ``check_worker``  a real Celery worker serving the "checks" queue ("test connection"), for a module

Every monitored cluster has a database ``app`` with the extension
pg_stat_statements (on 15 also pg_wait_sampling) and a role ``monitor``
(password ``monitor-pw``, member of pg_monitor) that must authenticate with
SCRAM; everything else is trust.  Connect as the monitor with
``monitor_dsn(cluster)`` or ``cluster.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD)``.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from devenv.binaries import library_available
from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, monitored_setup, start_many, stop_many
from devenv.ports import TEST_EVICT_PORT, port_for_test
from tests import distribution, flush, slots
from tests.api_world import api_world  # noqa: F401 - the API's fixture, for its tests and the modules' own
from tests.known_history import known_history  # noqa: F401 - the weekly reports' and the exports' fixture
from tests.reports.weekly_world import readers, smtp  # noqa: F401 - the weekly report's, in two trees
from tests.static_world import collected_static  # noqa: F401 - the image's static files, collected once a run

#: The time per test folder at the end of every run (tests/timing.py).
pytest_plugins = ["tests.timing"]
#: A transactional test's flush empties the tables that hold rows, not all 38 (tests/flush.py).
flush.install()

MONITORED_MAJORS = (13, 14, 15, 16, 17, 18)
APP_DB = "app"
MONITOR_USER = "monitor"
MONITOR_PASSWORD = "monitor-pw"
# Before initdb's trust lines: over TCP every role but the superuser postgres (the tests' own) authenticates with
# its password through SCRAM, as on a production server; MD5_USER (made by the tests that need it) is asked for
# an MD5 hash, as a server that never moved to SCRAM asks.
MD5_USER = "check_md5"
MONITOR_HBA = [
    f"host all {MD5_USER} 127.0.0.1/32 md5",
    "host all postgres 127.0.0.1/32 trust",
    "host all all 127.0.0.1/32 scram-sha-256",
]


def _preload(major: int) -> list[str]:
    preload = ["pg_stat_statements"]
    # pg_wait_sampling comes from Debian's postgresql-15-pg-wait-sampling.
    if major == 15 and library_available(15, "pg_wait_sampling"):
        preload.append("pg_wait_sampling")
    return preload


def _extensions(major: int) -> list[str]:
    """Extensions created beside the preloaded ones: hypopg on 15 (Debian's postgresql-15-hypopg), for index
    advice costed by the planner; the other majors have none, for the estimated path."""
    return ["hypopg"] if major == 15 and library_available(15, "hypopg") else []


def setup_monitored(extensions: list[str]):
    """ClusterSpec.setup: database app with ``extensions``, role monitor (SCRAM password)."""
    return monitored_setup(
        dbname=APP_DB, monitor_user=MONITOR_USER, monitor_password=MONITOR_PASSWORD, extensions=extensions
    )


def monitored_spec(
    major: int, *, name: str | None = None, port: int | None = None, settings: dict[str, str] | None = None
) -> ClusterSpec:
    """The spec of a fresh monitored test cluster of ``major``, in this worker's folder (tests/slots.py); its port
    this worker's test port of ``major`` unless given."""
    preload = _preload(major)
    return ClusterSpec(
        name=name or f"test-pg{major}",
        major=major,
        port=port or slots.port(port_for_test(major)),
        base=slots.cluster_dir(),
        settings={"pg_stat_statements.track": "all", **(settings or {})},
        preload=preload,
        hba=MONITOR_HBA,
        fresh=True,
        setup=setup_monitored(preload + _extensions(major)),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked slow (they wait on real processes and clocks) first, in their order, then the others in
    theirs: on several pytest workers (`make test`, files handed out in this order) the long waits start at once and
    overlap with everything else, and the run ends on short files instead of a long wait on one worker."""
    _unique_node_ids(items)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        distribution.tag_shared_worlds(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Whole files to each worker, the readers of a shared world together (tests/distribution.py)."""
    return distribution.FilesAndWorlds(config, log)


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """Every test by an id of its own: pytest-xdist hands tests out by node id and runs one test of several that
    share it, silently. Schemathesis 4.32 names its items by API operation (`test_x[GET /api/v1/...]`) but
    pytest 9.2 makes a test's id of its original name and parameters only, so its 42 items share one id: each
    takes its name as its id. Any other duplicate stops the run."""
    by_id: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_id.setdefault(item.nodeid, []).append(item)
    for same in by_id.values():
        if len(same) > 1 and len({item.name for item in same}) == len(same):
            for item in same:
                item._id = item.parent.id.child(item.name)  # what pytest before 9.2 made of it
    twice = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if twice:
        raise pytest.UsageError(f"tests that share a node id (pytest-xdist would run one of each): {twice[:5]}")


@pytest.fixture(scope="session", autouse=True)
def _fresh_page_rates() -> None:
    """Page rate counters (console/throttling.py) and /metrics' figures (console/views/metrics.py) are kept per user
    id: a run's ids start again at 1, so what a previous run left in the tests' Redis database within the hour (or
    the figures' minute) would count against this one's, or answer for it."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in ("*page-rate:*", "*metrics:*"):
        for key in client.scan_iter(match=pattern):
            client.delete(key)


@pytest.fixture(scope="session")
def cluster_lock() -> Iterator[None]:
    """Held for the whole session by whoever uses the test clusters.

    The test clusters have fixed ports and datadirs and are re-created fresh,
    so a second pytest session would wipe the first one's clusters: it waits
    for the lock instead (and fails clearly after a while).
    """
    # Machine-wide, not in this checkout's .run: the ports are the machine's, so a session of another
    # checkout (a CI clone beside a work tree) would otherwise re-create the clusters under this one. One per
    # pytest worker, as each has clusters of its own.
    path = slots.lock_path()
    with open(path, "a+") as f:
        # Several sessions may queue for the clusters (TEST_CLUSTER_LOCK_WAIT_S, default 240 s).
        deadline = time.monotonic() + float(os.environ.get("TEST_CLUSTER_LOCK_WAIT_S", "240"))
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    f.seek(0)
                    holder = f.read().strip() or "?"
                    pytest.fail(
                        f"another pytest session (pid {holder}) holds {path}; the test clusters are in use",
                        pytrace=False,
                    )
                time.sleep(0.5)
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        yield


@pytest.fixture(scope="session")
def pg_clusters(cluster_lock) -> Iterator[dict[int, Cluster]]:
    """major -> running Cluster, for 13 ... 18."""
    started = start_many([monitored_spec(m) for m in MONITORED_MAJORS])
    try:
        yield {c.major: c for c in started.values()}
    finally:
        stop_many(started.values())


@pytest.fixture(scope="session")
def pg12_cluster(cluster_lock) -> Iterator[Cluster]:
    c = start_many([monitored_spec(12)])["test-pg12"]
    try:
        yield c
    finally:
        stop_many([c])


@pytest.fixture(scope="session")
def evict_cluster(cluster_lock) -> Iterator[Cluster]:
    """PostgreSQL 14 with pg_stat_statements.max=100 (the minimum): entries get evicted."""
    port, settings = slots.port(TEST_EVICT_PORT), {"pg_stat_statements.max": "100"}
    spec = monitored_spec(14, name="test-evict-pg14", port=port, settings=settings)
    c = start_many([spec])[spec.name]
    try:
        yield c
    finally:
        stop_many([c])


@pytest.fixture(scope="session")
def monitor_dsn():
    """monitor_dsn(cluster, dbname="app") -> libpq URI of the monitor role."""

    def dsn(c: Cluster, dbname: str = APP_DB) -> str:
        return c.dsn(dbname, MONITOR_USER, MONITOR_PASSWORD)

    return dsn


@pytest.fixture(scope="module")
def check_worker(django_db_setup, tmp_path_factory):
    """A real Celery worker on the "checks" queue, threaded as docker-compose.yml's collection worker serves it,
    on the tests' Redis database: it runs the "test connection" checks the module's pages and API calls queue.
    Yields its processes (their logs explain a check that never ended)."""
    import redis
    from django.conf import settings as django_settings

    from tests.processes import database_url, processes, wait_ready, worker_argv

    redis.Redis.from_url(django_settings.REDIS_URL).delete("checks")  # checks queued earlier with no worker
    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "CREDENTIALS_KEY": django_settings.CREDENTIALS_KEY,
    }
    with processes(tmp_path_factory.mktemp("check-worker"), env) as procs:
        wait_ready(procs.start("checks", [*worker_argv(name="checks"), "--queues", "checks"]))
        yield procs
