"""A server's snapshots as the API lists them: newest first, with the settings each one read, its entry
counts and the deallocations of its interval (one query a page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from collectors import tables
from collectors.selectors import db
from collectors.selectors.statements import Page
from collectors.selectors.windows import Window

COLUMNS = (
    "taken_at",
    "prev_taken_at",
    "interval_s",
    "kind",
    "server_version_num",
    "extension_version",
    "entries",
    "entries_hidden",
    "entries_max",
    "changed",
    "new_entries",
    "gone_entries",
    "dealloc",
    "dealloc_delta",
    "stats_reset_at",
    "full_reset",
    "track",
    "track_utility",
    "track_planning",
    "save",
    "sample_rate",
    "waits_source",
    "waits_samples",
)


@dataclass(frozen=True)
class SnapshotRow:
    taken_at: datetime
    prev_taken_at: datetime | None
    interval_s: float | None
    kind: str  # baseline | delta | ... (collectors.history)
    server_version_num: int
    extension_version: str
    entries: int
    entries_hidden: int
    entries_max: int | None
    changed: int
    new_entries: int
    gone_entries: int
    dealloc: int | None  # pg_stat_statements_info.dealloc (14+)
    dealloc_delta: int | None
    stats_reset_at: datetime | None
    full_reset: bool
    track: str | None  # the settings it read; None: the GUC does not exist on that server
    track_utility: bool | None
    track_planning: bool | None
    save: bool | None
    sample_rate: float | None
    waits_source: str | None
    waits_samples: int | None

    @property
    def dealloc_per_s(self) -> float | None:
        if self.dealloc_delta is None or not self.interval_s:
            return None
        return self.dealloc_delta / self.interval_s


@dataclass(frozen=True)
class SnapshotPage:
    rows: list[SnapshotRow]
    total_count: int


def snapshots(*, server_id: int, window: Window | None = None, page: Page = Page()) -> SnapshotPage:
    """The server's snapshots (in the window, if given), newest first, a page of them with the total."""
    where, params = "server_id = %(s)s", {"s": server_id, "limit": page.size, "offset": (page.number - 1) * page.size}
    if window is not None:
        where += " AND taken_at >= %(start)s AND taken_at < %(end)s"
        params |= {"start": window.start, "end": window.end}
    rows = db.fetchall(
        f"SELECT {', '.join(COLUMNS)}, count(*) OVER () FROM {tables.SNAPSHOT.name} WHERE {where} "
        "ORDER BY taken_at DESC LIMIT %(limit)s OFFSET %(offset)s",
        params,
    )
    total = rows[0][-1] if rows else 0
    if not rows and page.number > 1:
        total = db.fetchone(f"SELECT count(*) FROM {tables.SNAPSHOT.name} WHERE {where}", params)[0]
    return SnapshotPage([SnapshotRow(*r[:-1]) for r in rows], total)


def latest_snapshot(*, server_id: int) -> SnapshotRow | None:
    found = snapshots(server_id=server_id, page=Page(1, 1)).rows
    return found[0] if found else None
