"""readtier.vacuum: each database's freeze ages over a window, and the rate of transaction IDs consumed, from the
vacuum reading's rows as the history store's writer stores them (at dates in 2011 no other test writes)."""

from datetime import UTC, datetime, timedelta

import pytest

from collectors.vacuum.reading import FreezeAgeRow
from history.public import TABLES, store_snapshot
from readtier import database_ages
from readtier.db import counting

pytestmark = pytest.mark.django_db
SERVER_ID = 990_013
T0 = datetime(2011, 8, 1, 12, 0, tzinfo=UTC)


def _store(at: datetime, rows: list[FreezeAgeRow]) -> None:
    store_snapshot(SERVER_ID, at, [TABLES.VACUUM_DATABASE], lambda w: w.append(TABLES.VACUUM_DATABASE, rows))


def _row(database: str, xid_age: int, *, freeze_max: int = 200_000_000) -> FreezeAgeRow:
    return FreezeAgeRow(database, xid_age, xid_age // 2, database != "template0", freeze_max, 400_000_000)


def test_the_ages_of_each_database_and_the_rate_they_grow_at():
    _store(T0, [_row("app", 1_000_000), _row("template0", 5_000_000)])
    _store(T0 + timedelta(minutes=30), [_row("app", 1_600_000), _row("template0", 5_600_000)])
    _store(T0 + timedelta(hours=2), [_row("app", 150), _row("template0", 7_400_000, freeze_max=100_000_000)])
    with counting() as c:
        ages = database_ages(server_id=SERVER_ID, start=T0, end=T0 + timedelta(hours=3))
    assert c.queries == 1
    assert [a.database for a in ages] == ["app", "template0"]
    app, template0 = ages
    assert [p.xid_age for p in template0.points] == [5_000_000, 5_600_000, 7_400_000]
    assert template0.xids_per_hour() == 1_200_000  # 2.4 million over two hours
    assert app.xids_per_hour() is None  # frozen in between: the age went down, no rate across it
    assert template0.freeze_max_age == 100_000_000  # the limit of its last reading
    assert template0.share_of_freeze_max_age == 0.074
    assert template0.allows_connections is False and app.allows_connections is True


def test_one_reading_has_no_rate_and_a_window_without_readings_nothing():
    _store(T0, [_row("app", 1_000)])
    (app,) = database_ages(server_id=SERVER_ID, start=T0, end=T0 + timedelta(minutes=1))
    assert app.xids_per_hour() is None and app.last.xid_age == 1_000
    assert database_ages(server_id=SERVER_ID, start=T0 + timedelta(minutes=1), end=T0 + timedelta(hours=1)) == []
