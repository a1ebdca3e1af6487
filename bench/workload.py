"""A workload of exactly N distinct pg_stat_statements entries on the monitored cluster.

N/5 small tables, five query shapes per table (distinct relations make distinct queryids):
two reads by key, an aggregate, an UPDATE and an upsert, so entries have rows, shared block
hits and WAL counters like a real application's. Each statement is run with bind parameters
(``$1``), as an application would, through one pipelined connection.
"""

from __future__ import annotations

import numpy as np
import psycopg

SHAPES = (
    "SELECT v FROM {t} WHERE id = %s",
    "SELECT sum(v) FROM {t} WHERE id < %s",
    "SELECT count(*) FROM {t} WHERE v > %s",
    "UPDATE {t} SET v = v + 1 WHERE id = %s",
    "INSERT INTO {t} (id, v) VALUES (%s, 0) ON CONFLICT (id) DO UPDATE SET v = {t}.v + 1",
)
ROWS_PER_TABLE = 20


def table(i: int) -> str:
    return f"bench_t{i:05d}"


def statements(n: int) -> list[str]:
    """The n distinct statements of a level (the first n of a fixed list)."""
    out = []
    i = 0
    while len(out) < n:
        for shape in SHAPES:
            if len(out) < n:
                out.append(shape.format(t=table(i)))
        i += 1
    return out


def create_tables(dsn: str, n_statements: int) -> None:
    n_tables = -(-n_statements // len(SHAPES))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET pg_stat_statements.track_utility = off")
        with conn.transaction():
            for i in range(n_tables):
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table(i)} (id int PRIMARY KEY, v int NOT NULL);"
                    f"INSERT INTO {table(i)} SELECT g, 0 FROM generate_series(1, {ROWS_PER_TABLE}) g "
                    "ON CONFLICT DO NOTHING"
                )
        conn.execute("ANALYZE")


class Driver:
    """Runs chosen statements of the level once each (one autocommit transaction per statement)."""

    def __init__(self, dsn: str, seed: int = 1):
        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
        self.conn.execute("SET pg_stat_statements.track_utility = off")
        self.rng = np.random.default_rng(seed)

    def run(self, stmts: list[str]) -> None:
        with self.conn.pipeline():
            for s in stmts:
                self.conn.execute(s, (int(self.rng.integers(1, ROWS_PER_TABLE + 1)),))

    def run_fraction(self, stmts: list[str], fraction: float) -> int:
        k = max(1, round(len(stmts) * fraction))
        picked = self.rng.choice(len(stmts), size=k, replace=False)
        self.run([stmts[i] for i in sorted(picked)])
        return k

    def close(self) -> None:
        self.conn.close()
