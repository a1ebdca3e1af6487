"""Wait events: pg_wait_sampling profile deltas (PostgreSQL 15) and sampled pg_stat_activity,
both stored as session-seconds per (event type, event, query id)."""

import html
import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse

from history.models import ServerState
from inventory.models import Membership
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def _sleep_in_background(cluster, seconds: float) -> threading.Thread:
    t = threading.Thread(target=run, args=(cluster, "SELECT pg_sleep(%s)"), kwargs={"params": (seconds,)})
    t.start()
    time.sleep(0.3)  # let it start sleeping
    return t


def _collect_while_sleeping(cluster, server, seconds: float):
    sleeper = _sleep_in_background(cluster, seconds)
    try:
        return collect(server)
    finally:
        sleeper.join()


def _waits(server):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT w.event_type, w.event, w.query_id, w.samples, w.session_s, s.waits_source, s.waits_samples, "
            "s.interval_s FROM collectors_wait_event w JOIN collectors_snapshot s "
            "ON s.server_id = w.server_id AND s.taken_at = w.taken_at WHERE w.server_id = %s",
            [server.pk],
        )
        return cur.fetchall()


def test_pg_wait_sampling_profile_deltas(pg_clusters):
    c = pg_clusters[15]
    assert c.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_wait_sampling'", dbname="app")
    server = register(c)
    collect(server)  # baseline: remembers the cumulative profile, stores no waits
    assert _waits(server) == []
    _sleep_in_background(c, 1.5).join()
    collect(server)
    queryid = server_entry(c, "SELECT pg_sleep%")["queryid"]
    rows = [r for r in _waits(server) if r[1] == "PgSleep"]
    assert rows, _waits(server)
    assert {r[5] for r in rows} == {"pg_wait_sampling"}
    assert any(r[2] == queryid for r in rows)
    slept = sum(r[4] for r in rows)
    assert 1.0 <= slept <= 2.5  # ~1.5 s of one session in PgSleep, from 10 ms samples
    # Nothing counted twice: a second interval without sleeping adds no PgSleep time.
    collect(server)
    assert sum(r[4] for r in _waits(server) if r[1] == "PgSleep") == pytest.approx(slept)


def test_sampled_pg_stat_activity(pg_clusters, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "ACTIVITY_SAMPLES": 5, "ACTIVITY_SPAN_S": 0.5}
    c = pg_clusters[16]
    server = register(c)
    collect(server)
    result = _collect_while_sleeping(c, server, 3)
    queryid = server_entry(c, "SELECT pg_sleep%")["queryid"]
    rows = [r for r in _waits(server) if r[1] == "PgSleep" and r[2] == queryid]
    assert len(rows) == 1
    event_type, _, _, samples, session_s, source, n_samples, interval_s = rows[0]
    assert (event_type, source, n_samples, samples) == ("Timeout", "pg_stat_activity", 5, 5)
    assert session_s == pytest.approx(interval_s)  # one session, seen in every sample
    assert result.interval_s == pytest.approx(interval_s)


def test_postgres_13_has_no_query_id_in_activity(pg_clusters, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "ACTIVITY_SAMPLES": 3, "ACTIVITY_SPAN_S": 0.2}
    c = pg_clusters[13]
    server = register(c)
    collect(server)
    _collect_while_sleeping(c, server, 1.5)
    rows = [r for r in _waits(server) if r[1] == "PgSleep"]
    assert len(rows) == 1 and rows[0][2] is None and rows[0][3] == 3


def test_a_profile_larger_than_its_cap_is_not_read_and_activity_is_sampled_instead(pg_clusters, settings, client):
    """pg_wait_sampling's profile past COLLECTOR_WAIT_PROFILE_MAX_ROWS (here 1 row) is not read, not even in part
    (a part would make wrong deltas): the interval's wait events come from looks at pg_stat_activity, said in a note
    and on the server page's waits chart, and no profile is kept for the next snapshot. Once the profile fits again,
    the page says nothing of it."""
    settings.COLLECTOR = {**settings.COLLECTOR, "WAIT_PROFILE_MAX_ROWS": 1, "ACTIVITY_SAMPLES": 3}
    c = pg_clusters[15]
    _sleep_in_background(c, 0.5).join()  # the profile holds a row or more of this backend
    server = register(c)
    collect(server)
    result = _collect_while_sleeping(c, server, 2)
    (note,) = [n for n in result.notes if "pg_wait_sampling unusable" in n]
    assert "more than 1 rows (COLLECTOR_WAIT_PROFILE_MAX_ROWS)" in note and "sampling pg_stat_activity" in note
    assert {r[5] for r in _waits(server)} == {"pg_stat_activity"}
    assert ServerState.objects.get(server_id=server.pk).wait_profile is None
    said = "pg_wait_sampling's profile holds more than 1 rows (COLLECTOR_WAIT_PROFILE_MAX_ROWS)"
    user = User.objects.create_user("vera", password="pw-vera-1")
    Membership.objects.create(user=user, organization=server.organization, role=Membership.Role.VIEWER)
    client.force_login(user)
    page = client.get(reverse("server", args=[server.pk])).content.decode()
    assert said in html.unescape(page) and "sampled pg_stat_activity instead" in html.unescape(page)

    settings.COLLECTOR = {**settings.COLLECTOR, "WAIT_PROFILE_MAX_ROWS": 1_000_000}
    collect(server)
    assert ServerState.objects.get(server_id=server.pk).wait_profile is not None
    assert said not in html.unescape(client.get(reverse("server", args=[server.pk])).content.decode())
