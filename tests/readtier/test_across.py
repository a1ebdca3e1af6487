"""Statements across the servers of an organization (readtier/across.py): each server's list merged
in every order, filtered, paged and limited, against each server's own top statements."""

from __future__ import annotations

from datetime import timedelta

import pytest

from readtier import Page, StatementFilters, Window, db, top_statements
from readtier.across import MAX_PAGES, SORT_KEYS, statement_names_across, statements_across

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("order", ["total", "calls", "mean", "plan", "wal"])
def test_statements_across_servers_merge_each_servers_list(configured_history, second_server, order):
    configured, _, now = configured_history
    ids = [configured.pk, second_server.pk]
    window = Window(now - timedelta(hours=6), now)
    everything = []
    for sid in ids:
        top = top_statements(server_id=sid, window=window, order=order, page=Page(1, 500))
        everything += [(sid, s) for s in top.rows]

    def key(item):
        value = getattr(item[1], SORT_KEYS[order])
        return (value is None, -(value or 0), item[0], item[1].statement_id)

    everything.sort(key=key)
    for number in (1, 2, 3):
        with db.counting() as c:
            got = statements_across(server_ids=ids, window=window, order=order, page=Page(number, 20))
        assert c.queries <= 6 * len(ids)
        assert [(r.server_id, r.statement) for r in got.rows] == everything[(number - 1) * 20 : number * 20]
        assert got.total_count == len(everything)
    if order == "plan":  # planning not tracked on the second server: its statements come last
        assert [sid for sid, _ in everything] == sorted((sid for sid, _ in everything), key=ids.index)
    else:
        assert {sid for sid, _ in everything[:40]} == set(ids)  # both servers are in the first pages
    # track_planning on (configured, since 10 hours) and off (second): tracked somewhere, not everywhere.
    assert got.planning_tracked and not got.planning_everywhere


def test_statements_across_filters_and_limits(configured_history, second_server):
    configured, _, now = configured_history
    ids = [configured.pk, second_server.pk]
    window = Window(now - timedelta(hours=6), now)
    got = statements_across(server_ids=ids, window=window, filters=StatementFilters(database="db1"))
    assert got.rows and all(r.statement.database == "db1" for r in got.rows)
    expected = sum(
        top_statements(server_id=s, window=window, filters=StatementFilters(database="db1")).total_count for s in ids
    )
    assert got.total_count == expected
    with pytest.raises(ValueError, match="first 500"):
        statements_across(server_ids=ids, window=window, page=Page(MAX_PAGES + 1, 50))
    with pytest.raises(ValueError, match="unknown order"):
        statements_across(server_ids=ids, window=window, order="nonsense")
    assert statements_across(server_ids=[], window=window).rows == []
    databases, users = statement_names_across(server_ids=ids)
    assert databases == ["db0", "db1"] and users == ["app_user0", "app_user1", "app_user2"]
