"""Demo workloads: each one reproduces a public case from ../shared/seeds on a monitored cluster.

Every workload is a plain function ``workload(dsn, stop, *, ..., counter=None)`` that creates its
tables if needed (idempotently), then runs until the ``threading.Event`` ``stop`` is set and returns
once all its client connections are closed. Rates are bounded (paced per client, no catch-up
bursts) so that a small machine stays usable; ``scale`` multiplies every rate.

* :func:`dealloc_storm` - seed 000 (Dalibo, "slow COMMIT"): 16 clients, each running its own
  ``BEGIN; SELECT 1 FROM t<k> ... (8 tables); COMMIT`` over 128 tables, i.e. 128 distinct
  statements; with ``pg_stat_statements.max = 100`` entries are evicted all the time
  (``pg_stat_statements_info.dealloc`` grows).
* :func:`planning_heavy` - seed 002 (track_planning): a join of 11 tables with many indexes,
  almost empty, so that planning costs far more than execution (visible only with
  ``pg_stat_statements.track_planning = on``).
* :func:`hot_prepared` - seed 002/003: one hot statement, prepared server-side
  (psycopg ``prepare=True``), executed from 8 clients: many calls of one queryid.
* :func:`two_phase` - seed 001 ("Speed up COMMIT PREPARED"): ``BEGIN; UPDATE ...;
  PREPARE TRANSACTION 'gid_<n>'; COMMIT PREPARED 'gid_<n>'`` with a distinct GID each time (each
  is a distinct pg_stat_statements entry before PostgreSQL 17).

Connection errors (e.g. the server restarting) are logged and retried after a pause; once
``stop`` is set, errors end the workload quietly.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

#: Seed 000: 128 tables, 16 clients, 8 tables per client.
STORM_TABLES = 128
STORM_CLIENTS = 16
#: Relations joined by the planning-heavy statement (below geqo_threshold = 12: exhaustive search).
PLANNING_TABLES = 11
PLANNING_INDEXES_PER_TABLE = 4
HOT_ROWS = 10_000
TPC_ROWS = 1_000
#: Prefix of the two-phase GIDs (leftovers with it are rolled back when the workload starts).
GID_PREFIX = "gid_"

_SETUP_LOCK = threading.Lock()


class Counter:
    """Thread-safe count of completed units (transactions or statements) of one workload."""

    def __init__(self, unit: str = "tx") -> None:
        self.unit = unit
        self._n = 0
        self._errors = 0
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._n += n

    def error(self) -> None:
        with self._lock:
            self._errors += 1

    @property
    def value(self) -> int:
        with self._lock:
            return self._n

    @property
    def errors(self) -> int:
        with self._lock:
            return self._errors


class _Pacer:
    """Sleep so that a loop runs at most ``rate`` times a second (no bursts after a stall)."""

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self.period = 1.0 / rate if rate > 0 else 0.0
        self.stop = stop
        # A random phase, so that many clients do not fire in lockstep.
        self.next = time.monotonic() + random.random() * self.period

    def wait(self) -> bool:
        """Wait for the next slot; False when ``stop`` was set meanwhile."""
        now = time.monotonic()
        if self.next < now - 1.0:
            self.next = now
        delay = self.next - now
        self.next += self.period
        if delay > 0:
            return not self.stop.wait(delay)
        return not self.stop.is_set()


def _connect(dsn: str, **kwargs) -> psycopg.Connection:
    kwargs.setdefault("autocommit", True)
    kwargs.setdefault("connect_timeout", 5)
    kwargs.setdefault("application_name", "pgconsole-demo")
    return psycopg.connect(dsn, **kwargs)


def _client_loop(
    name: str,
    dsn: str,
    stop: threading.Event,
    rate: float,
    step: Callable[[psycopg.Connection, int], int],
    counter: Counter | None,
    **connect_kwargs,
) -> None:
    """Connect, then call ``step(conn, i)`` at ``rate`` per second until ``stop``; reconnect on errors.

    ``step`` returns how many units it completed (added to ``counter``).
    """
    i = 0
    failures = 0
    while not stop.is_set():
        try:
            with _connect(dsn, **connect_kwargs) as conn:
                pacer = _Pacer(rate, stop)
                while pacer.wait():
                    n = step(conn, i)
                    i += 1
                    failures = 0
                    if counter is not None:
                        counter.add(n)
        except psycopg.Error as exc:
            if stop.is_set():
                return
            if counter is not None:
                counter.error()
            failures += 1
            # One line per failure streak start, then quiet retries (the server may be restarting).
            if failures == 1:
                log.warning(
                    "workload %s: %s: %s (retrying)",
                    name,
                    type(exc).__name__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                )
            stop.wait(min(5.0, 0.5 * failures))


def _run_clients(name: str, clients: int, target: Callable[[int], None]) -> None:
    """Run ``target(k)`` for k in range(clients) in threads and wait for all of them."""
    threads = [threading.Thread(target=target, args=(k,), name=f"{name}-{k}", daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _setup(dsn: str, statements: list[sql.Composable | str]) -> None:
    with _SETUP_LOCK, _connect(dsn, autocommit=False) as conn:
        # Serialize concurrent setups of the same database (several demo runs at once).
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pgconsole-demo-setup'))")
        for stmt in statements:
            conn.execute(stmt)
        conn.commit()


def _retry_setup(name: str, dsn: str, stop: threading.Event, statements: list) -> bool:
    """Run the setup statements, retrying while the server is unreachable; False if stopped."""
    failures = 0
    while not stop.is_set():
        try:
            _setup(dsn, statements)
            return True
        except psycopg.OperationalError as exc:
            failures += 1
            if failures == 1:
                log.warning("workload %s: setup failed: %s (retrying)", name, str(exc).strip())
            stop.wait(min(5.0, 0.5 * failures))
    return False


# --------------------------------------------------------------------------
# (a) Deallocation storm - seed 000
# --------------------------------------------------------------------------


def storm_setup_sql(tables: int = STORM_TABLES) -> list:
    out: list = []
    for k in range(1, tables + 1):
        t = sql.Identifier(f"t{k}")
        out.append(sql.SQL("CREATE TABLE IF NOT EXISTS {} (id int)").format(t))
        out.append(sql.SQL("INSERT INTO {} SELECT 1 WHERE NOT EXISTS (SELECT FROM {})").format(t, t))
    return out


def dealloc_storm(
    dsn: str,
    stop: threading.Event,
    *,
    clients: int = STORM_CLIENTS,
    tables: int = STORM_TABLES,
    tx_per_s: float = 3.0,
    scale: float = 1.0,
    counter: Counter | None = None,
) -> None:
    """Seed 000: ``clients`` connections, client k running ``BEGIN; SELECT 1 FROM t<..>; COMMIT``
    over its own slice of ``tables`` tables, ``tx_per_s`` transactions a second each.

    Every ``SELECT 1 FROM t<k>`` is a distinct statement even after normalization, so with
    ``pg_stat_statements.max`` below ``tables`` (+ BEGIN, COMMIT...) entries keep being evicted.
    """
    if not _retry_setup("dealloc-storm", dsn, stop, storm_setup_sql(tables)):
        return
    per_client = max(1, tables // clients)

    def client(k: int) -> None:
        mine = [
            sql.SQL("SELECT 1 FROM {}").format(sql.Identifier(f"t{1 + k * per_client + j}"))
            for j in range(per_client)
            if 1 + k * per_client + j <= tables
        ]

        def step(conn: psycopg.Connection, i: int) -> int:
            with conn.transaction():
                for stmt in mine:
                    conn.execute(stmt).fetchall()
            return 1

        _client_loop(f"dealloc-storm-{k}", dsn, stop, tx_per_s * scale, step, counter)

    _run_clients("dealloc-storm", clients, client)


# --------------------------------------------------------------------------
# (b) Planning-heavy statement - seed 002
# --------------------------------------------------------------------------


def planning_setup_sql(tables: int = PLANNING_TABLES, indexes: int = PLANNING_INDEXES_PER_TABLE) -> list:
    out: list = []
    for k in range(1, tables + 1):
        t = sql.Identifier(f"plan_{k}")
        out.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (id int PRIMARY KEY, ref int NOT NULL, a int, b int, "
                "c int, d int, note text)"
            ).format(t)
        )
        for j, cols in enumerate(["ref", "a, b", "b, c", "c, d", "d, a", "a, ref"][:indexes]):
            out.append(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                    sql.Identifier(f"plan_{k}_i{j}"), t, sql.SQL(cols)
                )
            )
        # A few rows (analyzed), so that execution is nearly free and planning dominates.
        out.append(
            sql.SQL(
                "INSERT INTO {} SELECT g, g, g % 7, g % 5, g % 3, g % 11, 'x' FROM generate_series(1, 20) g "
                "WHERE NOT EXISTS (SELECT FROM {})"
            ).format(t, t)
        )
        out.append(sql.SQL("ANALYZE {}").format(t))
    return out


def planning_query(tables: int = PLANNING_TABLES) -> sql.Composed:
    """A join of ``tables`` relations: a chain (``p<k>.ref = p<k-1>.id``) plus two conditions
    to the first one (``p5.a = p1.b``, ``p10.a = p1.b``), which multiply the join orders to
    consider. With 11 tables of 20 rows: ~40 ms of planning for < 1 ms of execution."""
    rels = [sql.Identifier(f"plan_{k}") for k in range(1, tables + 1)]
    alias = [sql.Identifier(f"p{k}") for k in range(1, tables + 1)]
    conds = []
    for k in range(1, tables):
        conds.append(sql.SQL("{}.ref = {}.id").format(alias[k], alias[k - 1]))
        if k % 5 == 0:
            conds.append(sql.SQL("{}.a = {}.b").format(alias[k], alias[0]))
    conds.append(sql.SQL("{}.c = %s").format(alias[0]))
    return sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
        sql.SQL(", ").join(sql.SQL("{} {}").format(r, a) for r, a in zip(rels, alias, strict=True)),
        sql.SQL(" AND ").join(conds),
    )


def planning_heavy(
    dsn: str,
    stop: threading.Event,
    *,
    clients: int = 2,
    q_per_s: float = 1.0,
    tables: int = PLANNING_TABLES,
    scale: float = 1.0,
    counter: Counter | None = None,
) -> None:
    """Seed 002: a many-table join whose planning time far exceeds its execution time
    (not prepared: planned on every call). Meant for a server with track_planning = on."""
    if not _retry_setup("planning-heavy", dsn, stop, planning_setup_sql(tables)):
        return
    query = planning_query(tables)

    def client(k: int) -> None:
        def step(conn: psycopg.Connection, i: int) -> int:
            conn.execute(query, (i % 3,), prepare=False).fetchall()
            return 1

        _client_loop(f"planning-heavy-{k}", dsn, stop, q_per_s * scale, step, counter)

    _run_clients("planning-heavy", clients, client)


# --------------------------------------------------------------------------
# (c) One hot prepared statement from many clients - seeds 002, 003
# --------------------------------------------------------------------------


def hot_setup_sql(rows: int = HOT_ROWS) -> list:
    return [
        "CREATE TABLE IF NOT EXISTS hot_accounts (aid int PRIMARY KEY, abalance int NOT NULL)",
        sql.SQL(
            "INSERT INTO hot_accounts SELECT g, 0 FROM generate_series(1, {}) g "
            "WHERE NOT EXISTS (SELECT FROM hot_accounts)"
        ).format(sql.Literal(rows)),
        "ANALYZE hot_accounts",
    ]


HOT_QUERY = "SELECT abalance FROM hot_accounts WHERE aid = %s"


def hot_prepared(
    dsn: str,
    stop: threading.Event,
    *,
    clients: int = 8,
    q_per_s: float = 25.0,
    scale: float = 1.0,
    counter: Counter | None = None,
) -> None:
    """One hot statement, prepared server-side (psycopg ``prepare=True``), from ``clients``
    connections at ``q_per_s`` each: the most-called queryid of the server."""
    if not _retry_setup("hot-prepared", dsn, stop, hot_setup_sql()):
        return

    def client(k: int) -> None:
        rnd = random.Random(k)

        def step(conn: psycopg.Connection, i: int) -> int:
            conn.execute(HOT_QUERY, (rnd.randint(1, HOT_ROWS),), prepare=True).fetchall()
            return 1

        _client_loop(f"hot-prepared-{k}", dsn, stop, q_per_s * scale, step, counter)

    _run_clients("hot-prepared", clients, client)


# --------------------------------------------------------------------------
# (d) Two-phase commit with distinct GIDs - seed 001
# --------------------------------------------------------------------------


def tpc_setup_sql(rows: int = TPC_ROWS) -> list:
    return [
        "CREATE TABLE IF NOT EXISTS tpc_accounts (id int PRIMARY KEY, balance bigint NOT NULL, md5 text)",
        sql.SQL(
            "INSERT INTO tpc_accounts SELECT g, 0, '' FROM generate_series(1, {}) g "
            "WHERE NOT EXISTS (SELECT FROM tpc_accounts)"
        ).format(sql.Literal(rows)),
    ]


def rollback_leftover_gids(dsn: str, prefix: str = GID_PREFIX) -> int:
    """ROLLBACK PREPARED the transactions with our GID prefix left over by an interrupted run
    (they would hold their row locks forever). Returns how many."""
    with _connect(dsn) as conn:
        gids = [
            r[0]
            for r in conn.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, %s)",
                (prefix,),
            ).fetchall()
        ]
        for gid in gids:
            conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
    return len(gids)


def two_phase(
    dsn: str,
    stop: threading.Event,
    *,
    clients: int = 1,
    tx_per_s: float = 5.0,
    scale: float = 1.0,
    counter: Counter | None = None,
) -> None:
    """Seed 001: ``BEGIN; UPDATE ...; PREPARE TRANSACTION 'gid_<n>'; COMMIT PREPARED 'gid_<n>'``,
    a new GID every time. Needs max_prepared_transactions > 0."""
    if not _retry_setup("two-phase", dsn, stop, tpc_setup_sql()):
        return
    try:
        n = rollback_leftover_gids(dsn)
        if n:
            log.warning("workload two-phase: rolled back %d prepared transactions left over", n)
    except psycopg.Error as exc:
        log.warning("workload two-phase: could not clean up prepared transactions: %s", exc)
    # Distinct across clients and runs (a leftover GID would make PREPARE fail).
    base = int(time.time() * 1000) % 10**9

    def client(k: int) -> None:
        rnd = random.Random(k)

        def step(conn: psycopg.Connection, i: int) -> int:
            gid = sql.Literal(f"{GID_PREFIX}{base + i * clients + k}")
            conn.execute("BEGIN")
            try:
                conn.execute(
                    "UPDATE tpc_accounts SET balance = balance + 1, md5 = md5(clock_timestamp()::text) WHERE id = %s",
                    (rnd.randint(1, TPC_ROWS),),
                )
                conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(gid))
            except BaseException:
                if not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                raise
            conn.execute(sql.SQL("COMMIT PREPARED {}").format(gid))
            return 1

        _client_loop(f"two-phase-{k}", dsn, stop, tx_per_s * scale, step, counter)

    _run_clients("two-phase", clients, client)
