"""Benchmark 9: what the schema reading (collectors/schema/) costs the monitored server, a collection and the history.

On the bench's monitored PostgreSQL 17, databases of 1,000 and 12,000 tables (a primary key, one more index and
a few rows each, analyzed):

1. Each database's reading as a collection sends it (collectors.schema.catalog.read_database, as the monitoring
   role, on a connection of its own in a read-only transaction), REPS times: the server's own execution time of
   its statements (pg_stat_statements' total_exec_time for the monitoring role in that database, reset before
   each) and the wall time on the console. The baseline in the same run, on the same connection: the bare views
   a DBA or a peer tool reads (`SELECT * FROM pg_stat_user_tables` and `pg_stat_user_indexes`), and the views with
   `pg_table_size` (sizes with TOAST and maps, which the reading leaves out).
2. Whole collections of a server registered through the product, the schema reading due (its interval 0)
   against not due, alternating, while only the 1,000-table database exists besides the application's; then
   one with the 12,000-table database too: the reading kept the 10,000 largest tables, said so, and stayed
   within its time (no timeout of the collection).
   The Indexes page's read of that server (its largest 100 tables and indexes) against the whole overview the
   advisor reads, alternated.
3. What one reading stores with every table of the 1,000-table database written between two readings: the
   delta row's bytes, and the state rows'.
4. The index advice of one server on Debian's PostgreSQL 15 with hypopg: 20 statements filtering four tables of
   60,000 rows (15 on selective columns, 5 on a status of three values), each planned by the plans reading, which
   judges and costs its candidate indexes in the same session; the time those judgements take (the worker's
   wall time inside collectors.plans.hypothetical.statement_candidates), the baseline being the plans' own
   EXPLAINs in the same calls, and the evaluation that turns them into advice (server_advise).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import connection

from bench import env
from bench.schema_report import Advice, Collections, DatabaseCost, SchemaRun
from collectors import connection as monitored
from collectors.plans import hypothetical, service
from collectors.schema import catalog
from collectors.services import server_collect
from console.views.indexes import SHOWN
from history.models import ServerState
from history.tables import TABLES
from inventory.connection import parse_dsn
from inventory.services import server_create
from readtier import Window, schema_overview

REPS = 7
SMALL, LARGE = 1_000, 12_000
BARE_TABLES = "SELECT * FROM pg_stat_user_tables"
BARE_INDEXES = "SELECT * FROM pg_stat_user_indexes"
SIZED = "SELECT *, pg_table_size(relid) FROM pg_stat_user_tables"


def _create(cluster, dbname: str, n: int, log) -> float:
    t0 = time.perf_counter()
    cluster.execute(f"DROP DATABASE IF EXISTS {dbname}")
    cluster.execute(f"CREATE DATABASE {dbname}")
    for start in range(1, n + 1, 500):  # 500 tables a transaction: within the lock table
        cluster.execute(
            f"DO $$ BEGIN FOR i IN {start}..{min(start + 499, n)} LOOP "
            "EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, v int, note text)', i); "
            "EXECUTE format('CREATE INDEX ON t%s (v)', i); "
            "EXECUTE format('INSERT INTO t%s SELECT g, g, ''n'' FROM generate_series(1, 20) g', i); "
            "END LOOP; END $$",
            dbname=dbname,
        )
    cluster.execute("ANALYZE", dbname=dbname)
    took = time.perf_counter() - t0
    log(f"  {dbname}: {n:,} tables created in {took:.0f}s")
    return took


def _server_ms(cluster, dbname: str) -> float:
    """The monitoring role's statements' execution time in `dbname` since the last reset, as the server counts."""
    (ms,) = cluster.execute(
        "SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
        "WHERE d.datname = %s AND s.userid = (SELECT oid FROM pg_roles WHERE rolname = %s)",
        dbname=env.APP_DB,
        params=(dbname, env.MONITOR_USER),
    )[0]
    return float(ms)


def _reset(cluster) -> None:
    cluster.execute("SELECT pg_stat_statements_reset()", dbname=env.APP_DB)


def _measure(cluster, target, dbname: str, what, *, reps: int) -> tuple[list[float], list[float], object]:
    """`what(conn)` `reps` times on one connection to `dbname` as the monitoring role, each in its own read-only
    transaction: (server ms, wall ms, the last result)."""
    there = replace(target, endpoint=replace(target.endpoint, database=dbname))
    conn = monitored.connect(there)
    server_ms, wall_ms, got = [], [], None
    try:
        for _ in range(reps):
            _reset(cluster)
            t0 = time.perf_counter()
            with monitored.read_only(conn, 30.0):
                got = what(conn)
            wall_ms.append((time.perf_counter() - t0) * 1000)
            server_ms.append(_server_ms(cluster, dbname))
    finally:
        conn.close()
    return server_ms, wall_ms, got


def _database_cost(cluster, target, dbname: str, n: int, *, reps: int) -> DatabaseCost:
    sql = catalog.SQL.at(int(cluster.execute("SHOW server_version_num")[0][0]))
    database = catalog.Database(dbname, False, True, None)
    cfg = settings.COLLECTOR

    def reading(conn):
        return catalog.read_database(
            conn, sql, database, max_tables=cfg["SCHEMA_MAX_TABLES"], max_indexes=cfg["SCHEMA_MAX_INDEXES"]
        )

    server, wall, read = _measure(cluster, target, dbname, reading, reps=reps)
    known = {i.relid: i.name for i in read.indexes}  # between two daily descriptions: every index known

    def steady(conn):
        return catalog.read_database(
            conn,
            sql,
            database,
            max_tables=cfg["SCHEMA_MAX_TABLES"],
            max_indexes=cfg["SCHEMA_MAX_INDEXES"],
            known=known,
        )

    steady_server, steady_wall, _ = _measure(cluster, target, dbname, steady, reps=reps)
    bare_server, bare_wall, _ = _measure(
        cluster,
        target,
        dbname,
        lambda c: (c.execute(BARE_TABLES).fetchall(), c.execute(BARE_INDEXES).fetchall()),
        reps=reps,
    )
    sized_server, sized_wall, _ = _measure(cluster, target, dbname, lambda c: c.execute(SIZED).fetchall(), reps=reps)
    return DatabaseCost(
        database=dbname,
        tables=n,
        tables_read=len(read.tables),
        indexes_read=len(read.indexes),
        server_ms=server,
        wall_ms=wall,
        steady_server_ms=steady_server,
        steady_wall_ms=steady_wall,
        bare_server_ms=bare_server,
        bare_wall_ms=bare_wall,
        sized_server_ms=sized_server,
        sized_wall_ms=sized_wall,
    )


def _collect(server_id: int, *, due: bool) -> tuple[float, object]:
    interval = 0 if due else 10**9
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": interval}
    result = server_collect(server_id=server_id)
    if not result.ok:
        raise RuntimeError(f"bench collection failed: {result.summary()}")
    return result.duration_ms, result


ADVICE_TABLES = 4
ADVICE_ROWS = 60_000


def _overview_ms(server_id: int, *, reps: int) -> tuple[list[float], list[float], int]:
    """The Indexes page's read of the server over a day (its largest SHOWN rows) and the whole overview, alternated:
    console ms per call, and the tables held."""
    window = Window.last(timedelta(days=1))
    page_ms, whole_ms, held = [], [], 0
    for _ in range(reps):
        started = time.perf_counter()
        held = schema_overview(server_id=server_id, window=window, limit=SHOWN).tables_total
        page_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        schema_overview(server_id=server_id, window=window)
        whole_ms.append((time.perf_counter() - started) * 1000)
    return page_ms, whole_ms, held


def _advice_statements() -> list[tuple[str, tuple]]:
    """20 statements: on each table, customers, regions, days and codes (selective) and its status (not)."""
    found = []
    for t in range(1, ADVICE_TABLES + 1):
        found += [
            (f"SELECT * FROM adv_{t} WHERE customer = %s AND status = %s", (t, "new")),
            (f"SELECT count(*) FROM adv_{t} WHERE region = %s AND created_at > now() - %s::interval", (t, "1 day")),
            (f"SELECT id FROM adv_{t} WHERE code = %s", (f"c{t}",)),
            (f"SELECT sum(amount) FROM adv_{t} WHERE customer = %s AND region = %s", (t, t)),
            (f"SELECT count(*) FROM adv_{t} WHERE status = %s", ("paid",)),
        ]
    return found


def _advice(cluster, *, log) -> Advice:
    from advisor.selectors import recommendations
    from advisor.services import server_advise

    for t in range(1, ADVICE_TABLES + 1):
        cluster.execute(
            f"DROP TABLE IF EXISTS adv_{t}; CREATE TABLE adv_{t} (id int PRIMARY KEY, customer int, region int, "
            "status text, code text, amount numeric, created_at timestamptz); "
            f"INSERT INTO adv_{t} SELECT g, g % 3000, g % 700, (ARRAY['new','paid','sent'])[g % 3 + 1], 'c' || g, "
            f"g % 100, now() - (g % 1000) * interval '1 hour' FROM generate_series(1, {ADVICE_ROWS}) g; "
            f"ANALYZE adv_{t}; GRANT SELECT ON adv_{t} TO {env.MONITOR_USER}",
            dbname=env.APP_DB,
        )
    server = server_create(
        name="bench-advice",
        connection=parse_dsn(cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD)),
        organization_name="bench",
    )
    server_collect(server_id=server.pk)
    statements = _advice_statements()
    # Each run often enough that an index saves more than the rule's least (a second a day): ~1.5 s of scans each.
    with psycopg_connect(cluster) as conn:
        for text, params in statements:
            for _ in range(250):
                conn.execute(text, params)
    server_collect(server_id=server.pk)
    judged_ms: list[float] = []
    plan_ms: list[float] = []
    original = hypothetical.statement_candidates

    def timed(*a, **kw):
        t0 = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            judged_ms.append((time.perf_counter() - t0) * 1000)

    service.hypothetical.statement_candidates = timed
    try:
        ours = [s for s in server.statements.all() if s.query and s.query.startswith("SELECT") and "adv_" in s.query]
        for statement in ours:
            t0 = time.perf_counter()
            service.statement_plan(server_id=server.pk, statement_id=statement.pk)
            plan_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        service.hypothetical.statement_candidates = original
    t0 = time.perf_counter()
    server_advise(server_id=server.pk)
    advise_ms = (time.perf_counter() - t0) * 1000
    recs = [r for r in recommendations(server_ids=[server.pk]) if r.rule == "missing_index"]
    from history.models import IndexCandidate

    cands = list(IndexCandidate.objects.filter(server_id=server.pk))
    log(
        f"  advice: {len(ours)} statements planned, candidates judged in {sum(judged_ms):.0f} ms all told; "
        f"{len(recs)} missing-index recommendations"
    )
    return Advice(
        statements=len(ours),
        judged_ms=judged_ms,
        plan_call_ms=plan_ms,
        advise_ms=advise_ms,
        verified=sum(1 for c in cands if c.columns and c.method == hypothetical.VERIFIED),
        refused=sum(1 for c in cands if not c.columns),
        recommendations=[r.title for r in recs],
    )


def psycopg_connect(cluster):
    import psycopg

    return psycopg.connect(cluster.dsn(env.APP_DB), autocommit=True)


def run(cluster, advice_cluster=None, *, quick: bool = False, log=print) -> SchemaRun:
    started = time.perf_counter()
    reps = 3 if quick else REPS
    large = 2_000 if quick else LARGE
    saved = settings.COLLECTOR
    small_db, large_db = "schema_1k", "schema_large"
    cluster.execute(f"DROP DATABASE IF EXISTS {large_db}")
    created = {small_db: _create(cluster, small_db, SMALL, log)}
    server = server_create(
        name="bench-schema",
        connection=parse_dsn(cluster.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD)),
        organization_name="bench",
    )
    target = monitored.monitoring_target(server)
    try:
        small = _database_cost(cluster, target, small_db, SMALL, reps=reps)
        log(f"  {small_db}: server {statistics.median(small.server_ms):.1f} ms median per reading")
        _collect(server.pk, due=True)  # the first reading of each database: a baseline, not measured
        due_ms, not_due_ms = [], []
        for _ in range(reps):
            due_ms.append(_collect(server.pk, due=True)[0])
            not_due_ms.append(_collect(server.pk, due=False)[0])
        log(
            f"  collections: {statistics.median(due_ms):.0f} ms with the reading, "
            f"{statistics.median(not_due_ms):.0f} without"
        )
        # Every table of the 1,000 written between two readings: the largest delta row one reading stores.
        cluster.execute(
            f"DO $$ BEGIN FOR i IN 1..{SMALL} LOOP EXECUTE format('UPDATE t%s SET v = v + 1 WHERE id = 1', i); "
            "END LOOP; END $$",
            dbname=small_db,
        )
        time.sleep(1.0)  # the backends' counts flushed to the shared statistics
        _collect(server.pk, due=True)
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT pg_column_size(d.*), cardinality(d.table_ids) FROM {TABLES.SCHEMA_DELTA.name} d "
                "WHERE server_id = %s AND database = %s ORDER BY taken_at DESC LIMIT 1",
                [server.pk, small_db],
            )
            delta_bytes, delta_tables = cur.fetchone()
            cur.execute(
                f"SELECT (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {TABLES.SCHEMA_TABLE.name} t "
                "WHERE server_id = %s), "
                f"(SELECT coalesce(sum(pg_column_size(i.*)), 0) FROM {TABLES.SCHEMA_INDEX.name} i "
                "WHERE server_id = %s)",
                [server.pk, server.pk],
            )
            table_state_bytes, index_state_bytes = cur.fetchone()

        created[large_db] = _create(cluster, large_db, large, log)
        big = _database_cost(cluster, target, large_db, large, reps=reps)
        log(f"  {large_db}: server {statistics.median(big.server_ms):.1f} ms median per reading")
        capped_ms, result = _collect(server.pk, due=True)  # its first reading: the largest 10,000 kept
        status = ServerState.objects.get(server_id=server.pk).readings["schema"]
        steady_ms = [_collect(server.pk, due=True)[0] for _ in range(reps)]  # the readings after it
        steady_status = ServerState.objects.get(server_id=server.pk).readings["schema"]
        log(f"  the first collection with it {capped_ms:.0f} ms, the next ones {statistics.median(steady_ms):.0f} ms")
        page_ms, whole_ms, held = _overview_ms(server.pk, reps=reps)
        page, whole = statistics.median(page_ms), statistics.median(whole_ms)
        log(f"  the Indexes page's read {page:.0f} ms, the whole overview {whole:.0f} ms")
        collections = Collections(
            due_ms=due_ms,
            not_due_ms=not_due_ms,
            capped_ms=capped_ms,
            capped_status=status,
            capped_notes=list(result.notes),
            capped_steady_ms=steady_ms,
            capped_steady_spent_ms=steady_status.get("spent_ms", 0.0),
            delta_bytes=delta_bytes,
            delta_tables=delta_tables,
            table_state_bytes=table_state_bytes,
            index_state_bytes=index_state_bytes,
            page_ms=page_ms,
            whole_ms=whole_ms,
            page_tables_total=held,
        )
        advice = _advice(advice_cluster, log=log) if advice_cluster is not None else None
    finally:
        settings.COLLECTOR = saved
    return SchemaRun(
        advice=advice,
        small=small,
        large=big,
        collections=collections,
        created_s=created,
        schema_settings={k: v for k, v in saved.items() if k.startswith("SCHEMA_")},
        elapsed_s=time.perf_counter() - started,
    )
