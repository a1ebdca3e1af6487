"""collectors/settings/reading.py: the settings in force are stored with each snapshot, as the server shows them."""

import psycopg
import pytest
from django.db import connection

from collectors.settings.reading import READING
from collectors.unit import Failure
from history.models import ServerState
from tests.world import APP_DB, collect, register

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_snapshot_keeps_the_settings_it_saw(pg_clusters):
    c = pg_clusters[14]
    server = register(c)
    collect(server)
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        shown = conn.execute(
            "SELECT current_setting('server_version_num')::int, current_setting('pg_stat_statements.max')::int, "
            "current_setting('pg_stat_statements.track'), current_setting('pg_stat_statements.track_planning') = 'on', "
            "(SELECT oid::int8 FROM pg_roles WHERE rolname = 'monitor')"
        ).fetchone()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT server_version_num, entries_max, track, track_planning FROM collectors_snapshot "
            "WHERE server_id = %s",
            [server.pk],
        )
        assert cur.fetchone() == shown[:4]
    assert ServerState.objects.get(server=server).role_oid == shown[4]
    assert READING.failure is Failure.SNAPSHOT  # no snapshot without its frame
