"""collectors/settings/instance.py: what read_meta finds on real servers, 13 and 18, as the monitoring role."""

import psycopg
import pytest

from collectors.settings import instance
from collectors.statements import lineage
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER


@pytest.mark.parametrize("major", [13, 18])
def test_read_meta_reads_the_version_the_extension_and_its_settings(pg_clusters, major):
    c = pg_clusters[major]
    with psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD), autocommit=True) as conn:
        meta = instance.read_meta(conn, lineage.FUNCTIONS)
        truth = conn.execute(
            "SELECT current_setting('server_version_num')::int, current_setting('pg_stat_statements.max'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'), "
            "(SELECT oid::int8 FROM pg_roles WHERE rolname = current_user), "
            "extract(epoch FROM pg_postmaster_start_time())"
        ).fetchone()
    assert (meta.server_version_num, meta.setting("max"), meta.extension_version, meta.role_oid) == truth[:4]
    assert meta.server_version_num // 10000 == major and meta.database == APP_DB
    assert instance.timestamp(meta.postmaster_start_us).timestamp() == pytest.approx(float(truth[4]), abs=1e-5)
    assert meta.flag("track_utility") in (True, False) and meta.flag("no_such_setting") is None
    assert meta.executable <= set(lineage.FUNCTIONS) and meta.has_info_view == (major >= 14)
    assert instance.timestamp(None) is None
