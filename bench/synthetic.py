"""A synthetic 5,000-entry monitored server, driven through the real writer path of server_collect.

Everything after the read of the monitored server is the project's own code: ``server_collect``
(advisory lock, status updates) -> the read's bookkeeping (lineage checks, statement lookup, which
texts to ask for) -> ``deltas.compute``, ``codec.encode``, the history writes (statements, snapshot
row, waits, statement state, server state) in one transaction. Only the monitored server's side is
replaced, at runtime in this process (nothing is edited): the monitored connection is not opened,
and pgss's reads (meta, info, entries, texts), the lineage read and the wait read answer from the
generator here (``reading_from``).

What is synthetic: the counters (distributions below), the query texts, the wait-event samples,
and the snapshot times (``meta.taken_at_us``, one minute apart), which are what the history
store keys and partitions on.

Per entry, drawn once: a probability of running in a given minute (heavy-tailed, lognormal with
sigma 1.5, rescaled so that on average 10% of entries change per minute; the hottest entries run
every minute, the long tail rarely), a call rate (calls in a minute when it runs: 1 + Poisson of a
lognormal mean, median 4), rows per call, shared blocks hit per call, a cost per call in
microseconds; a quarter of the entries write (WAL records, bytes, a few FPIs, dirtied blocks),
a fifth read some blocks from disk, 1% spill to temp files. Every other counter stays zero
(track_planning off, track_io_timing off, no JIT, no parallel workers, no local blocks), as on
a default PostgreSQL 17. ``uniform=True`` instead picks the 10% uniformly at random every minute
(the worst case for rollups: almost every entry appears in every hourly bucket).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import numpy as np

from collectors import connection as monitored
from collectors.schema import catalog as schema_catalog
from collectors.settings import instance
from collectors.statements import lineage, pgss
from collectors.statements.deltas import match_keys
from collectors.texts import texts
from collectors.vacuum import reading as vacuum
from collectors.waits import waits
from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES, GAUGE_NAMES
from history.entries import Entries

C = {name: j for j, name in enumerate(COUNTER_NAMES)}
G = {name: j for j, name in enumerate(GAUGE_NAMES)}
_FACT_GAUGE_IDX = [G[g] for g in FACT_GAUGE_NAMES]

_WORDS = (
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "JOIN",
    "LEFT",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "IN",
    "customer_id",
    "orders",
    "order_items",
    "o.created_at",
    "i.product_id",
    "p.price",
    "status",
    "=",
    "$1",
    "$2",
    "$3",
    "count(*)",
    "sum(i.quantity)",
    "coalesce(",
    ")",
    "(",
    ",",
    "<>",
    ">=",
    "IS NOT NULL",
    "accounts",
    "a.balance",
    "invoices",
    "tenant_id",
    "updated_at",
    "deleted_at",
    "UPDATE",
    "SET",
    "INSERT INTO",
    "VALUES",
    "RETURNING",
    "id",
    "products",
    "categories",
    "c.name",
    "lower(",
    "ILIKE",
)


def _text(rng: np.random.Generator, n_bytes: int, i: int) -> str:
    words = [_WORDS[w] for w in rng.integers(0, len(_WORDS), size=max(4, n_bytes // 6))]
    return f"/* q{i} */ " + " ".join(words)[:n_bytes]


class SyntheticServer:
    def __init__(
        self,
        n: int = 5000,
        change_fraction: float = 0.10,
        *,
        seed: int = 7,
        uniform: bool = False,
        start: datetime,
        step_s: int = 60,
        waits_per_minute: float = 6.0,
    ):
        self.n = n
        self.rng = rng = np.random.default_rng(seed)
        self.uniform = uniform
        self.change_fraction = change_fraction
        self.step_us = step_s * 1_000_000
        self.taken_at_us = int(start.timestamp() * 1_000_000)
        self.waits_per_minute = waits_per_minute

        n_users, n_dbs = 3, 2
        self.keys = np.column_stack(
            [
                10 + rng.integers(0, n_users, n),
                16384 + rng.integers(0, n_dbs, n),
                rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64),
                np.ones(n, np.int64),
            ]
        ).astype(np.int64)
        # Probability of running in a given minute: heavy-tailed, mean = change_fraction.
        raw = np.exp(rng.normal(0.0, 1.5, n))
        lo, hi = 0.0, 1e6  # scale s with sum(min(1, s * raw)) = change_fraction * n, by bisection
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.minimum(1.0, mid * raw).sum() < change_fraction * n else (lo, mid)
        self.p_run = np.minimum(1.0, hi * raw)
        self.rate = np.exp(rng.normal(np.log(4.0), 1.3, n))  # mean calls per running minute (minus 1)
        self.rows_per_call = np.where(rng.random(n) < 0.6, 1.0, np.exp(rng.normal(np.log(10), 1.2, n)))
        self.hit_per_call = np.exp(rng.normal(np.log(8), 1.2, n))
        self.reads_disk = rng.random(n) < 0.2
        self.us_per_call = np.exp(rng.normal(np.log(150), 1.5, n))
        self.writes = rng.random(n) < 0.25
        self.wal_per_call = np.where(self.writes, 1 + rng.random(n) * 2, 0.0)
        self.temp = rng.random(n) < 0.01

        self.counters = np.zeros((n, len(COUNTER_NAMES)), np.int64)
        self.gauges = np.zeros((n, len(GAUGE_NAMES)), np.float64)  # plan gauges 0: track_planning off
        self.gauges[:, G["min_exec_ms"]] = self.us_per_call / 1000 * 0.3
        self.gauges[:, G["max_exec_ms"]] = self.us_per_call / 1000 * 5
        self.gauges[:, G["stddev_exec_ms"]] = self.us_per_call / 1000 * 0.8
        since = self.taken_at_us - 86_400_000_000
        self.stats_since = np.full(n, since, np.int64)
        self.minmax_since = np.full(n, since, np.int64)
        # Everything has run at least once before the baseline.
        self._advance(np.arange(n))

        lengths = np.clip(np.exp(rng.normal(np.log(250), 1.0, n)), 30, 64 * 1024).astype(int)
        self.texts = {tuple(k): _text(rng, int(lengths[i]), i) for i, k in enumerate(self.keys.tolist())}
        self.hot_queryids = self.keys[np.argsort(-self.p_run)[:50], 2]
        self.current: Entries | None = None
        self.current_waits: waits.WaitReading | None = None
        self.last_changed = np.empty(0, np.int64)
        self.last_deltas = np.empty((0, len(COUNTER_NAMES)), np.int64)

    # -- the workload -------------------------------------------------------------------------

    def _advance(self, idx: np.ndarray) -> np.ndarray:
        """Run entries `idx` for one minute; returns their counter deltas."""
        rng, k = self.rng, len(idx)
        d = np.zeros((k, len(COUNTER_NAMES)), np.int64)
        calls = 1 + rng.poisson(self.rate[idx])
        d[:, C["calls"]] = calls
        d[:, C["rows"]] = rng.poisson(calls * self.rows_per_call[idx])
        hits = rng.poisson(calls * self.hit_per_call[idx])
        d[:, C["shared_blks_hit"]] = hits
        d[:, C["shared_blks_read"]] = np.where(self.reads_disk[idx], rng.poisson(hits * 0.02), 0)
        noise = np.exp(rng.normal(0, 0.3, k))
        d[:, C["total_exec_us"]] = np.maximum(1, (calls * self.us_per_call[idx] * noise)).astype(np.int64)
        w = self.writes[idx]
        wal = np.where(w, rng.poisson(calls * self.wal_per_call[idx]), 0)
        d[:, C["wal_records"]] = wal
        d[:, C["wal_bytes"]] = wal * rng.integers(60, 250, k)
        d[:, C["wal_fpi"]] = np.where(w, rng.poisson(wal * 0.02), 0)
        d[:, C["shared_blks_dirtied"]] = np.where(w, rng.poisson(calls * 0.3), 0)
        d[:, C["shared_blks_written"]] = np.where(w & (rng.random(k) < 0.05), rng.poisson(2, k), 0)
        t = self.temp[idx]
        d[:, C["temp_blks_written"]] = np.where(t, rng.poisson(calls * 50), 0)
        d[:, C["temp_blks_read"]] = d[:, C["temp_blks_written"]]
        self.counters[idx] += d
        # min/max move rarely once warm; stddev with every call.
        up = rng.random(k) < 0.03
        self.gauges[idx[up], G["max_exec_ms"]] *= 1.0 + rng.random(int(up.sum()))
        down = rng.random(k) < 0.01
        self.gauges[idx[down], G["min_exec_ms"]] *= rng.random(int(down.sum()))
        self.gauges[idx, G["stddev_exec_ms"]] *= np.exp(rng.normal(0, 0.01, k))
        return d

    def _pick(self) -> np.ndarray:
        """The entries that run in the coming minute."""
        if self.uniform:
            k = int(round(self.n * self.change_fraction))
            return np.sort(self.rng.choice(self.n, size=k, replace=False))
        return np.flatnonzero(self.rng.random(self.n) < self.p_run)

    def step(self) -> None:
        """One minute of workload, then a reading ready for the next server_collect."""
        if self.current is not None:  # the first reading is the baseline, taken before any step
            idx = self._pick()
            self.last_deltas = self._advance(idx)
            self.last_changed = idx
            self.taken_at_us += self.step_us
        self.current = Entries(
            keys=self.keys.copy(),
            counters=self.counters.copy(),
            gauges=self.gauges.copy(),
            stats_since_us=self.stats_since.copy(),
            minmax_stats_since_us=self.minmax_since.copy(),
        )
        self.current_waits = self._sample_waits()

    def advance_minute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One minute of workload without a reading, for the bulk writer (bench/bulk.py): (the rows that
        ran, their counter deltas, their min/max gauges where they moved, NaN elsewhere: what
        deltas.compute books as fact gauges). The wait samples of the minute are in current_waits."""
        idx = self._pick()
        before = self.gauges[idx][:, _FACT_GAUGE_IDX]
        deltas = self._advance(idx)
        after = self.gauges[idx][:, _FACT_GAUGE_IDX]
        self.last_deltas, self.last_changed = deltas, idx
        self.taken_at_us += self.step_us
        self.current_waits = self._sample_waits()
        return idx, deltas, np.where(after != before, after, np.nan)

    def state(self, statement_id: np.ndarray) -> Entries:
        """The cumulative state now, with each entry's statement id (what collectors_statement_state holds)."""
        return Entries(
            keys=self.keys.copy(),
            counters=self.counters.copy(),
            gauges=self.gauges.copy(),
            stats_since_us=self.stats_since.copy(),
            minmax_stats_since_us=self.minmax_since.copy(),
            statement_id=np.asarray(statement_id, np.int64),
        )

    def _sample_waits(self) -> waits.WaitReading:
        # pg_stat_activity samples (10 per snapshot): a few distinct (event, query) rows a minute.
        counts = {}
        events = (
            (None, None),
            ("IO", "DataFileRead"),
            ("LWLock", "WALWrite"),
            ("Lock", "transactionid"),
            ("IO", "WalSync"),
            ("LWLock", "BufferContent"),
            ("Client", "ClientRead"),
        )
        for _ in range(self.rng.poisson(self.waits_per_minute)):
            et, ev = events[int(self.rng.integers(0, len(events)))]
            qid = int(self.hot_queryids[int(self.rng.integers(0, len(self.hot_queryids)))])
            counts[(et, ev, qid)] = counts.get((et, ev, qid), 0) + int(self.rng.integers(1, 10))
        return waits.WaitReading(source="pg_stat_activity", counts=counts, n_samples=10)

    @property
    def taken_at(self) -> datetime:
        return datetime.fromtimestamp(self.taken_at_us / 1_000_000, UTC)

    # -- what replaces the read of the monitored server ------------------------------------------

    def meta(self) -> instance.ServerMeta:
        return instance.ServerMeta(
            server_version_num=170010,
            taken_at_us=self.taken_at_us,
            postmaster_start_us=int(self.stats_since[0]) - 1_000_000,
            database="app",
            extension_version="1.11",
            extension_schema="public",
            # Wait events come from this generator (as pg_stat_activity samples) through the
            # pg_wait_sampling hook, which services reads whatever COLLECTOR_ACTIVITY_SAMPLES says.
            wait_sampling_schema="synthetic",
            settings={
                "pg_stat_statements.max": "10000",
                "pg_stat_statements.track": "top",
                "pg_stat_statements.track_utility": "on",
                "pg_stat_statements.track_planning": "off",
                "pg_stat_statements.save": "on",
            },
            reads_all_stats=True,
            role_oid=10,
            executable=frozenset(lineage.FUNCTIONS),
        )

    def identity(self) -> lineage.Identity:
        return lineage.Identity(system_identifier=7_000_000_000_000_000_001, timeline_id=1, in_recovery=False)

    def read_entries(self, prev: Entries, *, send_all: bool = False) -> pgss.PgssReading:
        """What pgss.read_entries returns: every entry, its row in the previous state, and how many
        were sent (the real read puts the sent ones last; here only the baseline sends any, all)."""
        cur = self.current
        prev_index = match_keys(prev.keys, cur.keys)
        sent = len(cur) if send_all or not len(prev) else 0
        return pgss.PgssReading(entries=cur, prev_index=prev_index, hidden=0, total=len(cur), sent=sent)

    def read_texts(self, keys: np.ndarray) -> texts.Texts:
        found = texts.Texts()
        for k in keys.tolist():
            text = self.texts.get(tuple(k))
            found.by_key[tuple(k)] = texts.TextRead(present=text is not None, visible=True, text=text)
        found.databases = {int(d): f"db{int(d) - 16384}" for d in np.unique(keys[:, 1])} if len(keys) else {}
        found.users = {int(u): f"app_user{int(u) - 10}" for u in np.unique(keys[:, 0])} if len(keys) else {}
        return found


class _NoConnection:
    """Where services holds the monitored connection: the reads below never use it."""

    def limit_to(self, deadline: float, budget_s: float) -> None:
        pass

    def execute(self, query, params=None) -> None:
        """A reading's read-only transaction (BEGIN, its statement_timeout, COMMIT): nothing to run."""


@contextlib.contextmanager
def reading_from(synth: SyntheticServer):
    """Within the block, server_collect reads `synth` instead of a monitored server (this process only).

    What is replaced is the monitored server's side, function by function where services looks it
    up (the connection pool, pgss's reads, the lineage read, the wait read); everything services
    does with their answers is the project's code."""
    patches = [
        (monitored, "checkout", lambda target: (_NoConnection(), True)),
        (monitored, "checkin", lambda target, conn: None),
        (monitored, "discard", lambda target, conn: None),
        (instance, "read_meta", lambda conn, functions=(): synth.meta()),
        (pgss, "column_map", lambda conn, server_id, meta: None),
        (pgss, "read_info", lambda conn, meta: (0, int(synth.stats_since[0]))),
        (
            pgss,
            "read_entries",
            lambda conn, meta, cmap, prev, send_all=False, **_: synth.read_entries(prev, send_all=send_all),
        ),
        (texts, "read_texts", lambda conn, meta, cmap, keys, **_: synth.read_texts(keys)),
        (lineage, "read_identity", lambda conn, meta: synth.identity()),
        (waits, "read_wait_sampling", lambda conn, meta: synth.current_waits),
        # No database to read tables and indexes in: a synthetic server has statements only.
        (
            schema_catalog,
            "read_databases",
            lambda conn, sql, **_: (schema_catalog.Databases([], 0), schema_catalog.ServerRole(False, 0)),
        ),
        (vacuum, "read_ages", lambda conn, server_version_num: []),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, fn in patches:
        setattr(module, name, fn)
    try:
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def register(name: str):
    """A server row for a synthetic server (its connection is never dialled)."""
    from inventory.connection import Connection
    from inventory.services import server_create

    unused = Connection(host="192.0.2.1", database="app", user="monitor", password="unused")
    return server_create(name=name, connection=unused, organization_name="bench")
