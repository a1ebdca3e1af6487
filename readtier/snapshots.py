"""A server's snapshots as the API lists them: newest first, with the settings each one read, its entry
counts and the deallocations of its interval (one query a page)."""

from __future__ import annotations

from dataclasses import dataclass

from history.public import SNAPSHOT_FACTS, TABLES, SnapshotFacts
from readtier import db
from readtier.statements import Page
from readtier.windows import Window


@dataclass(frozen=True)
class SnapshotPage:
    rows: list[SnapshotFacts]
    total_count: int


def snapshots(*, server_id: int, window: Window | None = None, page: Page = Page()) -> SnapshotPage:
    """The server's snapshots (in the window, if given), newest first, a page of them with the total."""
    where, params = "server_id = %(s)s", {"s": server_id, "limit": page.size, "offset": (page.number - 1) * page.size}
    if window is not None:
        where += " AND taken_at >= %(start)s AND taken_at < %(end)s"
        params |= {"start": window.start, "end": window.end}
    rows = db.fetchall(
        f"SELECT {', '.join(SNAPSHOT_FACTS)}, count(*) OVER () FROM {TABLES.SNAPSHOT.name} WHERE {where} "
        "ORDER BY taken_at DESC LIMIT %(limit)s OFFSET %(offset)s",
        params,
    )
    total = rows[0][-1] if rows else 0
    if not rows and page.number > 1:
        total = db.fetchone(f"SELECT count(*) FROM {TABLES.SNAPSHOT.name} WHERE {where}", params)[0]
    return SnapshotPage([SnapshotFacts(*r[:-1]) for r in rows], total)


def latest_snapshot(*, server_id: int) -> SnapshotFacts | None:
    found = snapshots(server_id=server_id, page=Page(1, 1)).rows
    return found[0] if found else None
