"""Each database's freeze ages over a window (the vacuum reading's, collectors/vacuum/): the levels as read, and the
rate at which the server consumes transaction and multixact IDs, from two readings' difference."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from history.public import TABLES
from readtier import db

_AGES_SQL = (
    "SELECT database, taken_at, xid_age, mxid_age, allows_connections, freeze_max_age, multixact_freeze_max_age "
    f"FROM {TABLES.VACUUM_DATABASE.name} WHERE server_id = %s AND taken_at >= %s AND taken_at < %s "
    "ORDER BY database, taken_at"
)


@dataclass(frozen=True)
class AgePoint:
    taken_at: datetime
    xid_age: int
    mxid_age: int


@dataclass
class DatabaseAges:
    """One database's freeze ages in the window, oldest first, and the limits of its last reading."""

    database: str
    allows_connections: bool
    freeze_max_age: int
    multixact_freeze_max_age: int
    points: list[AgePoint] = field(default_factory=list)

    @property
    def last(self) -> AgePoint:
        return self.points[-1]

    @property
    def share_of_freeze_max_age(self) -> float:
        """The last transaction ID age as a share of autovacuum_freeze_max_age (1: anti-wraparound vacuums due)."""
        return self.last.xid_age / self.freeze_max_age

    def xids_per_hour(self) -> float | None:
        """Transaction IDs consumed per hour between the window's first and last readings, while datfrozenxid held
        (None with fewer than two readings, or when a vacuum froze the database in between: the age went down)."""
        first, last = self.points[0], self.points[-1]
        hours = (last.taken_at - first.taken_at).total_seconds() / 3600
        if hours <= 0 or any(b.xid_age < a.xid_age for a, b in zip(self.points, self.points[1:], strict=False)):
            return None
        return (last.xid_age - first.xid_age) / hours


def database_ages(*, server_id: int, start: datetime, end: datetime) -> list[DatabaseAges]:
    """Every database the vacuum reading read in [start, end), by name: one query."""
    out: dict[str, DatabaseAges] = {}
    for name, taken_at, xid_age, mxid_age, allows, freeze_max, multixact_max in db.fetchall(
        _AGES_SQL, (server_id, start, end)
    ):
        ages = out.get(name)
        if ages is None:
            ages = out[name] = DatabaseAges(name, allows, freeze_max, multixact_max)
        ages.allows_connections, ages.freeze_max_age, ages.multixact_freeze_max_age = allows, freeze_max, multixact_max
        ages.points.append(AgePoint(taken_at, xid_age, mxid_age))
    return list(out.values())
