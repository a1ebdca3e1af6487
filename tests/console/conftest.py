"""Fixtures for the console's tests: servers with a collected history, and what each owns in the store."""

from collections.abc import Callable

import pytest
from django.db import connection

from history import tables
from history.tables import TABLES
from inventory.models import Server
from tests.world import collect, register, run


@pytest.fixture
def history_rows() -> Callable[[int], dict[str, int]]:
    """history_rows(server_id) -> rows that server owns in every table of history.tables.PER_SERVER."""

    def count(server_id: int) -> dict[str, int]:
        with connection.cursor() as cur:
            out = {}
            for table in tables.PER_SERVER:
                cur.execute(f'SELECT count(*) FROM "{table.name}" WHERE server_id = %s', [server_id])
                out[table.name] = cur.fetchone()[0]
        return out

    return count


@pytest.fixture
def collected_server(pg_clusters, history_rows, transactional_db) -> Callable[..., Server]:
    """collected_server(name, org="acme") -> a server of PostgreSQL 17 with a baseline and a delta stored.

    Its tests run with real transactions (transactional_db): a collection creates partitions, which a
    rolled-back test transaction would take away behind the collectors' cache of known partitions."""

    def make(name: str, org: str = "acme") -> Server:
        cluster = pg_clusters[17]
        server = register(cluster, name=name, org=org)
        collect(server)
        run(cluster, "SELECT count(*) FROM pg_class WHERE relpages > 3", times=3)
        collect(server)
        rows = history_rows(server.pk)
        assert rows[TABLES.SNAPSHOT.name] == 2 and rows[TABLES.STATEMENT.name] > 0, rows
        return server

    return make
