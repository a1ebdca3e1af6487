"""Private PostgreSQL clusters (several majors) and Redis for tests, benchmarks and the demo.

    from devenv import cluster, start_many, ClusterSpec, ensure_redis, port_for_test

Modules: ``binaries`` (fetching PostgreSQL), ``cluster`` (one cluster), ``fleet`` (many at
once), ``ports`` (the port map), ``history`` (the history store), ``redis``; see
``python -m devenv --help`` for the command line.
"""

from .binaries import MAJORS, NPM_VERSIONS, ensure_binaries, find_binaries, library_available
from .cluster import Cluster, cluster
from .errors import ClusterError
from .fleet import ClusterSpec, existing_clusters, start_many, start_one, stop_many
from .history import DEFAULT_DATABASE_URL, HISTORY_DB, HISTORY_MAJOR, HISTORY_NAME, up_history
from .paths import RUN_DIR
from .ports import (
    DEFAULT_REDIS_URL,
    DEMO_PORT_BASE,
    HISTORY_PORT,
    PORTS,
    TEST_EVICT_PORT,
    TEST_EXTRA_PORT_BASE,
    TEST_PORT_BASE,
    port_for_demo,
    port_for_extra_test,
    port_for_test,
)
from .redis import RedisError, ensure_redis, stop_redis

__all__ = [
    "DEFAULT_DATABASE_URL",
    "DEFAULT_REDIS_URL",
    "DEMO_PORT_BASE",
    "HISTORY_DB",
    "HISTORY_MAJOR",
    "HISTORY_NAME",
    "HISTORY_PORT",
    "MAJORS",
    "NPM_VERSIONS",
    "PORTS",
    "RUN_DIR",
    "TEST_EVICT_PORT",
    "TEST_EXTRA_PORT_BASE",
    "TEST_PORT_BASE",
    "Cluster",
    "ClusterError",
    "ClusterSpec",
    "RedisError",
    "cluster",
    "port_for_demo",
    "port_for_extra_test",
    "port_for_test",
    "library_available",
    "ensure_binaries",
    "ensure_redis",
    "existing_clusters",
    "find_binaries",
    "start_many",
    "start_one",
    "stop_many",
    "stop_redis",
    "up_history",
]
