"""No statement loses its text for good: texts missed because the entry was evicted before they
could be read are read again when the statement is back, and "not visible to this role" stays apart
from "evicted"."""

import contextlib
import random
import threading
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from collectors.settings import instance
from collectors.statements import pgss
from collectors.statements.deltas import restarted_rows
from collectors.texts import texts
from history import store
from history.entries import N_COUNTERS, N_GAUGES, Entries
from history.models import Statement, TextStatus
from tests.world import APP_DB, collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
STORM_TABLES = 300  # distinct statements, three times pg_stat_statements.max of the evict cluster


def _lookup(ids: list[int], missing: dict[int, str]) -> store.StatementLookup:
    return store.StatementLookup(np.array(ids, np.int64), missing)


def _entries(n: int, calls: list[int] | None = None) -> Entries:
    counters = np.zeros((n, N_COUNTERS), np.int64)
    counters[:, 0] = calls or [5] * n
    return Entries(
        keys=np.arange(n * 4, dtype=np.int64).reshape(n, 4),
        counters=counters,
        gauges=np.zeros((n, N_GAUGES)),
        stats_since_us=np.zeros(n, np.int64),
        minmax_stats_since_us=np.zeros(n, np.int64),
    )


def _reading(n: int, sent: int, prev_index: list[int], calls: list[int] | None = None) -> pgss.PgssReading:
    entries = _entries(n, calls)
    return pgss.PgssReading(entries=entries, prev_index=np.array(prev_index, np.int64), hidden=0, total=n, sent=sent)


def test_rows_to_read_are_unseen_keys_put_off_texts_and_a_bounded_number_of_retries(monkeypatch):
    # rows 0-1 unchanged (not sent), 2-8 sent; row 7 never seen
    lookup = _lookup(
        [10, 11, 12, 13, 14, 15, 16, -1, 18],
        {
            10: TextStatus.EVICTED,  # not sent: perhaps gone already, not asked
            11: TextStatus.PENDING,  # put off by an earlier snapshot: asked first, sent or not
            12: TextStatus.EVICTED,
            13: TextStatus.NOT_VISIBLE,
            14: TextStatus.UNAVAILABLE,  # still the same entry: pg_stat_statements has no text for it
            15: TextStatus.UNAVAILABLE,  # a new entry (it left the state and came back): asked again
            18: TextStatus.UNAVAILABLE,  # evicted and created again between the snapshots: asked again
        },
    )
    prev = _entries(9)
    # Row 8's entry counts from zero again (fewer calls than before): the same key, a new entry.
    reading = _reading(9, sent=7, prev_index=[0, 1, 2, 3, 4, -1, 6, -1, 8], calls=[5, 5, 6, 6, 6, 6, 6, 6, 2])
    restarted = restarted_rows(prev, reading.entries, reading.prev_index)
    assert restarted.tolist() == [False, False, False, False, False, True, False, True, True]
    # Most wanted first: keys never seen, texts put off, then retries.
    assert texts.rows_to_read(reading.sent_rows, lookup, restarted).tolist() == [7, 1, 2, 3, 5, 8]
    monkeypatch.setattr(texts, "RETRIES_PER_SNAPSHOT", 1)
    assert texts.rows_to_read(reading.sent_rows, lookup, restarted).tolist() == [
        7,
        1,
        2,
    ]  # only retries are bounded here


@pytest.mark.parametrize(
    ("read", "status"),
    [
        (texts.TextRead(present=True, visible=True, text="SELECT 1"), TextStatus.STORED),
        (texts.TextRead(present=False, visible=True, text=None), TextStatus.EVICTED),
        (texts.TextRead(present=False, visible=False, text=None), TextStatus.NOT_VISIBLE),
        (texts.TextRead(present=True, visible=True, text=None), TextStatus.UNAVAILABLE),
    ],
)
def test_statement_text_says_why_there_is_none(read, status):
    text = texts.statement_text(read, max_bytes=100)
    assert text.status == status
    assert (text.query is not None) == (status == TextStatus.STORED)


def _queryid(conn: psycopg.Connection, statement: str) -> int:
    plan = conn.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {statement}").fetchone()[0]
    return plan[0]["Query Identifier"]


def _storm(c, statements: list[str], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    with psycopg.connect(c.dsn(APP_DB), autocommit=True, prepare_threshold=None) as conn:
        while not stop.is_set():
            conn.execute(rng.choice(statements))


def _storm_tables(c) -> list[str]:
    """STORM_TABLES distinct statements (a table each), three times pg_stat_statements.max of the evict cluster."""
    run(c, "".join(f"DROP TABLE IF EXISTS storm_{i}; CREATE TABLE storm_{i} (id int);" for i in range(STORM_TABLES)))
    return [f"SELECT count(*) FROM storm_{i}" for i in range(STORM_TABLES)]


def _storm_evicts_before_texts(c, monkeypatch) -> None:
    """The storm's evictions, between the counters' read and the texts': the storm tables' entries removed just
    before every read of texts."""
    read_texts = texts.read_texts

    def remove_then_read(*args, **kwargs):
        run(
            c,
            "SELECT pg_stat_statements_reset(0, 0, queryid) FROM pg_stat_statements "
            "WHERE query LIKE 'SELECT count(*) FROM storm_%'",
        )
        return read_texts(*args, **kwargs)

    monkeypatch.setattr(texts, "read_texts", remove_then_read)


@contextlib.contextmanager
def _storming(c, statements: list[str]) -> Iterator[None]:
    """Four clients running the statements at random for the duration of the block."""
    stop = threading.Event()
    clients = [threading.Thread(target=_storm, args=(c, statements, stop, seed)) for seed in range(4)]
    for t in clients:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in clients:
            t.join()


def _burst_between_counters_and_texts(monkeypatch, c, statements: list[str]) -> None:
    """Between the counters' read and the texts' read, a burst that evicts most of what was just read."""
    read_texts = texts.read_texts

    def read_texts_after_a_burst(*args, **kwargs):
        run(c, ";".join(random.sample(statements, 150)))
        return read_texts(*args, **kwargs)

    monkeypatch.setattr(texts, "read_texts", read_texts_after_a_burst)


def test_texts_of_entries_evicted_before_their_text_was_read_are_read_again(evict_cluster, monkeypatch):
    c = evict_cluster
    statements = _storm_tables(c)
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        conn.execute("SET pg_stat_statements.track = 'none'")  # EXPLAIN would add entries of its own
        queryid = {_queryid(conn, s): s for s in statements}
    server = register(c)
    collect(server)

    # A storm of distinct statements from several clients while collecting; and between the counters'
    # read and the texts' read, a burst that evicts most of what was just read. The counters are read the
    # cheap way, as on a calm server (while churning, new keys' texts come in the counters' scan: the test
    # below).
    read_texts, read_entries = texts.read_texts, pgss.read_entries
    monkeypatch.setattr(pgss, "read_entries", lambda *args, texts_of_new=None, **kwargs: read_entries(*args, **kwargs))
    _burst_between_counters_and_texts(monkeypatch, c, statements)
    with _storming(c, statements):
        for _ in range(4):
            collect(server)
    monkeypatch.setattr(texts, "read_texts", read_texts)

    storm = Statement.objects.filter(server=server, queryid__in=list(queryid), toplevel=True)
    evicted = list(storm.filter(text_status=TextStatus.EVICTED).values_list("queryid", flat=True))
    assert evicted, "the storm evicted no entry before its text was read"
    assert not storm.exclude(text_status__in=[TextStatus.STORED, TextStatus.EVICTED]).exists()
    stored = list(storm.filter(text_status=TextStatus.STORED).values_list("queryid", flat=True))

    # The statements still executed afterwards: some that lost their text, some that kept it.
    # Executed often enough to outweigh the storm's leftovers when entries are evicted (least used first).
    hot = [queryid[q] for q in evicted[:25] + stored[:5]]
    for _ in range(3):
        run(c, ";".join(hot * 50))
        collect(server)
    with psycopg.connect(c.dsn(APP_DB)) as conn:
        present = {
            q
            for (q,) in conn.execute(
                "SELECT queryid FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM storm_%'"
            )
        }
    hot_ids = {q for q, s in queryid.items() if s in hot}
    assert hot_ids <= present
    hot_statements = storm.filter(queryid__in=hot_ids)
    assert hot_statements.count() == len(hot_ids)
    for s in hot_statements:
        assert s.text_status == TextStatus.STORED, (s.queryid, s.text_status)
        assert s.query == queryid[s.queryid]


def test_under_a_storm_new_keys_have_their_texts_from_the_counters_scan(evict_cluster, monkeypatch):
    """pg_stat_statements.max = 100 and 300 distinct statements from four clients: every snapshot sees new keys.
    From the second one on (the server churns) their texts come in the same scan as their counters, so the
    burst that evicts entries between the counters' read and the texts' read takes no text away: no statement
    seen during the storm is left "evicted before its text could be read"."""
    c = evict_cluster
    statements = _storm_tables(c)
    run(c, "SELECT pg_stat_statements_reset()")
    server = register(c)
    collect(server)
    _burst_between_counters_and_texts(monkeypatch, c, statements)
    with _storming(c, statements):
        first = collect(server)  # the server was calm before: the cheap read, its new keys' texts may be lost
        results = [collect(server) for _ in range(5)]
    assert all(r.new_entries > 0 for r in results), "a storm: new keys at every snapshot"
    storm = Statement.objects.filter(
        server=server, query__startswith="SELECT count(*) FROM storm_"
    ) | Statement.objects.filter(server=server, first_seen_at__gt=first.taken_at, text_status=TextStatus.EVICTED)
    later = storm.filter(first_seen_at__gt=first.taken_at)
    assert later.count() >= 50, later.count()
    assert list(later.exclude(text_status=TextStatus.STORED).values_list("queryid", "text_status")) == []


def _plain_role(c, role: str) -> None:
    c.execute(f"DROP ROLE IF EXISTS {role}")
    c.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")


def test_a_role_without_pg_read_all_stats_reads_other_roles_texts_as_not_visible(pg_clusters):
    c = pg_clusters[17]
    role = "texts_plain"
    _plain_role(c, role)
    run(c, "DROP TABLE IF EXISTS texts_items; CREATE TABLE texts_items (id int)")
    run(c, "GRANT SELECT ON texts_items TO PUBLIC")
    run(c, "SELECT count(*) FROM texts_items")  # the superuser's entry
    with psycopg.connect(c.dsn(APP_DB, role, "pw"), autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM texts_items WHERE id > 0")  # the role's own entry
        meta = instance.read_meta(conn)
        cmap = pgss.column_map(conn, -17, meta)
        assert not meta.reads_all_stats
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT userid::int8, dbid::int8, queryid, toplevel::int FROM pg_stat_statements "
            "WHERE query LIKE 'SELECT count(*) FROM texts_items%%' ORDER BY userid = %s",
            (meta.role_oid,),
        ).fetchall()
    (others, own) = rows
    gone = (meta.role_oid, own[1], 1234567, 1)  # the role's own key, no longer there
    with psycopg.connect(c.dsn(APP_DB, role, "pw"), autocommit=True) as conn:
        got = texts.read_texts(conn, meta, cmap, np.array([others, own, gone], np.int64), max_chars=1000)
    status = {k: texts.statement_text(v, 1000).status for k, v in got.by_key.items()}
    assert status == {others: TextStatus.NOT_VISIBLE, own: TextStatus.STORED, gone: TextStatus.EVICTED}


def test_visibility_lost_between_the_counters_and_the_texts_is_not_visible_not_evicted(pg_clusters, monkeypatch):
    """pg_read_all_stats revoked in the middle of a snapshot: the new statements of other roles are
    stored as not visible; once the role sees them again, their texts are read."""
    c = pg_clusters[16]
    role = "texts_revoked"
    _plain_role(c, role)
    c.execute(f"GRANT pg_read_all_stats TO {role}")
    run(c, "DROP TABLE IF EXISTS texts_revoked_items; CREATE TABLE texts_revoked_items (id int)")
    server = register(c, user=role, password="pw")
    collect(server)
    statements = [f"SELECT {f} FROM texts_revoked_items" for f in ("count(*)", "max(id)", "min(id)")]
    run(c, ";".join(statements))

    read_texts = texts.read_texts

    def revoke_then_read(*args, **kwargs):
        c.execute(f"REVOKE pg_read_all_stats FROM {role}")
        return read_texts(*args, **kwargs)

    monkeypatch.setattr(texts, "read_texts", revoke_then_read)
    collect(server)
    monkeypatch.setattr(texts, "read_texts", read_texts)
    with psycopg.connect(c.dsn(APP_DB)) as conn:
        ids = [
            q for (q,) in conn.execute("SELECT queryid FROM pg_stat_statements WHERE query = ANY(%s)", (statements,))
        ]
    assert len(ids) == 3
    hidden = Statement.objects.filter(server=server, queryid__in=ids)
    assert hidden.count() == 3
    assert set(hidden.values_list("text_status", flat=True)) == {TextStatus.NOT_VISIBLE}
    assert not hidden.filter(query__isnull=False).exists()
    assert not Statement.objects.filter(server=server, text_status=TextStatus.EVICTED).exists()

    c.execute(f"GRANT pg_read_all_stats TO {role}")
    run(c, ";".join(statements))
    collect(server)
    items = Statement.objects.filter(server=server, query__in=statements)
    assert items.count() == 3
    assert set(items.values_list("text_status", flat=True)) == {TextStatus.STORED}


def test_a_flood_of_big_new_texts_is_read_over_several_snapshots_within_the_budget(pg_clusters, settings):
    """Twenty new statements with 100 kB texts and a budget of about four cut texts a snapshot: each snapshot
    reads at most its budget (plus one text), the others are stored as pending and read first by the next
    snapshots, whose counters are booked all along; none is left without its text."""
    max_bytes, budget = 10_000, 50_000
    settings.COLLECTOR = {
        **settings.COLLECTOR,
        "QUERY_TEXT_MAX_BYTES": max_bytes,
        "TEXT_BYTES_PER_SNAPSHOT": budget,
        "ACTIVITY_SAMPLES": 0,
    }
    c = pg_clusters[18]
    server = register(c)
    collect(server)
    pad = "p" * 100_000
    flood = [f"SELECT {', '.join(['7'] * (k + 1))} /* flood {pad} */" for k in range(20)]
    for text in flood:
        run(c, text)
    queryids = [
        q for (q,) in c.execute("SELECT queryid FROM pg_stat_statements WHERE query LIKE '%flood pppp%'", dbname=APP_DB)
    ]
    assert len(queryids) == 20
    cut = texts.server_cut(max_bytes)
    stored_counts = []
    for _ in range(8):
        result = collect(server)
        statuses = list(
            Statement.objects.filter(server=server, queryid__in=queryids).values_list("text_status", flat=True)
        )
        stored_counts.append(statuses.count(TextStatus.STORED))
        if len(stored_counts) == 1:
            assert len(statuses) == 20, "every new statement has its row (its counters are booked) from the start"
            assert any("query texts put off to the next snapshots" in n for n in result.notes), result.notes
        if TextStatus.PENDING not in statuses:
            break
    # About budget / cut texts a snapshot (the last call may take one more), never all twenty at once.
    per_snapshot = budget // cut + 1
    assert stored_counts[0] <= per_snapshot < 20
    assert all(b - a <= per_snapshot for a, b in zip(stored_counts, stored_counts[1:], strict=False)), stored_counts
    assert stored_counts[-1] == 20, stored_counts
    assert all(s.query_truncated for s in Statement.objects.filter(server=server, query__contains="flood"))


def test_while_a_server_churns_known_statements_still_without_text_get_it_in_the_counters_scan(
    pg_clusters, monkeypatch
):
    """Defect 3 of issue 35: under a deallocation storm, an entry evicted and created again between two
    snapshots is the first to be evicted again, so a statement that lost its text could lose it at every retry
    read after the counters. While the server churns, its text comes in the counters' scan, as a new key's does:
    here the entries are removed between the counters' read and the texts' read at every snapshot, and the
    statements get their texts all the same."""
    c = pg_clusters[16]
    run(c, "DROP TABLE IF EXISTS wants_text; CREATE TABLE wants_text (id int)")
    statements = [f"SELECT {f} FROM wants_text" for f in ("count(*)", "max(id)", "min(id)")]
    run(c, "SELECT pg_stat_statements_reset()")
    server = register(c)
    collect(server)

    def remove_then_read(*args, **kwargs):  # the storm's evictions, between the counters' read and the texts'
        run(
            c,
            "SELECT pg_stat_statements_reset(0, 0, queryid) FROM pg_stat_statements WHERE query = ANY(%s)",
            params=(statements,),
        )
        return read_texts(*args, **kwargs)

    read_texts, read_entries = texts.read_texts, pgss.read_entries
    monkeypatch.setattr(texts, "read_texts", remove_then_read)
    # First seen by the cheap read, as on a calm server: their texts are asked for after the counters, and lost.
    monkeypatch.setattr(pgss, "read_entries", lambda *args, texts_of_new=None, **kwargs: read_entries(*args, **kwargs))
    run(c, ";".join(statements))
    assert collect(server).new_entries >= 3
    lost = list(
        Statement.objects.filter(server=server, query=None, text_status=TextStatus.EVICTED).values_list(
            "queryid", flat=True
        )
    )
    assert len(lost) == 3
    # Back, and removed again before every read of texts: churning now (new keys at the last snapshot), the
    # counters' scan brings their texts.
    monkeypatch.setattr(pgss, "read_entries", read_entries)
    run(c, ";".join(statements * 2))
    collect(server)
    got = Statement.objects.filter(server=server, queryid__in=lost)
    assert sorted(got.values_list("text_status", "query")) == sorted((TextStatus.STORED, s) for s in statements)


def test_entries_evicted_since_the_last_snapshot_mean_churning_though_it_saw_no_new_key(evict_cluster, monkeypatch):
    """Defect 3 of issue 35, as it happened under the demo's storm: a snapshot that saw no new key (a storm's
    lull) sent the next snapshot's new keys to the read after the counters, where the storm evicted some of them
    before their text was read, and once the storm ended they were never sent again. Entries evicted since the
    last snapshot (pg_stat_statements_info.dealloc moved) mean churning as new keys do: their texts come in the
    scan."""
    c = evict_cluster
    statements = _storm_tables(c)
    run(c, "SELECT pg_stat_statements_reset()")
    server = register(c)
    collect(server)
    for _ in range(6):  # the console's own statements seen: a snapshot with no new key
        if collect(server).new_entries == 0:
            break
    else:
        pytest.fail("every snapshot saw new keys")
    burst = random.Random(7).sample(statements, 150)  # more than pg_stat_statements.max: entries evicted
    run(c, ";".join(burst))

    _storm_evicts_before_texts(c, monkeypatch)
    result = collect(server)
    assert result.new_entries >= 50 and result.dealloc_delta, (result.new_entries, result.dealloc_delta)
    burst_seen = Statement.objects.filter(server=server, first_seen_at__gte=result.taken_at)
    assert burst_seen.count() >= 50
    assert list(burst_seen.exclude(text_status=TextStatus.STORED).values_list("queryid", "text_status")) == []


def test_a_first_snapshot_of_a_server_already_churning_reads_its_keys_texts_with_their_counters(
    evict_cluster, monkeypatch
):
    """Seen in the production storm test on a fast machine: the history of a server began while it was already
    churning, the first snapshot (a baseline: no previous one to say it churns) asked for its keys' texts after the
    counters, the storm evicted some in between, and the storm ended before they came back. A baseline brings
    its keys' texts in the counters' scan."""
    c = evict_cluster
    statements = _storm_tables(c)
    run(c, "SELECT pg_stat_statements_reset()")
    run(c, ";".join(random.Random(8).sample(statements, 60)))
    storm = [
        q
        for (q,) in c.execute(
            "SELECT queryid FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM storm_%'", dbname=APP_DB
        )
    ]
    assert len(storm) == 60

    _storm_evicts_before_texts(c, monkeypatch)
    server = register(c)
    assert collect(server).kind == "baseline"
    seen = Statement.objects.filter(server=server, queryid__in=storm)
    assert seen.count() == 60
    assert list(seen.exclude(text_status=TextStatus.STORED).values_list("queryid", "text_status")) == []


def test_a_server_sending_more_text_than_asked_for_is_cut_here_too(pg_clusters, monkeypatch):
    """The texts' SQL cuts each text on the server (left()); a server that sends more anyway (here: the SQL made to
    add to it) has it cut to the characters asked for by the console too, and marked cut."""
    c = pg_clusters[16]
    run(c, "DROP TABLE IF EXISTS texts_long; CREATE TABLE texts_long (id int)")
    run(c, "SELECT count(*) FROM texts_long WHERE id > 0")
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        meta = instance.read_meta(conn)
        cmap = pgss.column_map(conn, -16, meta)
        (key,) = conn.execute(
            "SELECT userid::int8, dbid::int8, queryid, toplevel::int FROM pg_stat_statements "
            "WHERE query LIKE 'SELECT count(*) FROM texts_long%%'"
        ).fetchall()
        honest = texts.read_texts(conn, meta, cmap, np.array([key], np.int64), max_chars=1000)
        monkeypatch.setattr(
            texts,
            "_texts_query",
            lambda meta, cmap: texts.texts_sql(meta.extension_schema, cmap.has_toplevel).replace(
                "left(s.query, %s)", "s.query || repeat('x', %s)"
            ),
        )
        lying = texts.read_texts(conn, meta, cmap, np.array([key], np.int64), max_chars=10)
    assert honest.by_key[key].text.startswith("SELECT count(*) FROM texts_long") and not honest.by_key[key].cut
    assert lying.by_key[key] == texts.TextRead(True, True, honest.by_key[key].text[:10], cut=True)
