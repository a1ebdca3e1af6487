"""The selectors' synthetic history (tests/history_world.py): a server of 60 statements with a snapshot every 10
minutes over two and a half days that cross a month boundary, with an outage of 3.5 hours, written through the
real collection path and rolled up by the real periodic rollup. Built once for the selectors' package
(conftest.py) and once for the tiers' tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from console.services import server_delete
from inventory.models import Server
from readtier import Page, Window, top_statements
from tests.history_world import build

START = datetime(2026, 10, 30, 21, 7, tzinfo=UTC)  # 2.5 days over the end of October
STEP = timedelta(minutes=10)
OUTAGE = (datetime(2026, 10, 31, 14, 0, tzinfo=UTC), datetime(2026, 10, 31, 17, 30, tzinfo=UTC))
END = datetime(2026, 11, 2, 5, 0, tzinfo=UTC)


@contextmanager
def synthetic_history(name: str) -> Iterator[Server]:
    server = build(name, n=60, start=START, end=END, step=STEP, outage=OUTAGE)
    try:
        yield server
    finally:
        server_delete(server=server)


def everything(server_id: int, window: Window, **kw):
    return top_statements(server_id=server_id, window=window, page=Page(1, 500), **kw)


def hot_statement(server_id: int, window: Window) -> int:
    return everything(server_id, window, order="calls").rows[0].statement_id
