"""The plans benchmark's application on the monitored cluster: tables with indexes and the statements it runs.

N tables ``plans_t00``... of orders-like rows (an account, a status, an amount, a creation time), each with its
primary key and two indexes, analyzed, owned by an application role (APP_ROLE) that runs the statements, as an
application's own role would. The statements are what an application sends, with bind parameters: a two-table
join per table, a four-table report every fourth table, an UPDATE of an account's rows every fourth, and a DELETE
and an INSERT by key every eighth. Every SELECT filters on an indexed column, so that each of its plans names an
index (the storage worst case renames them to make every plan a new shape).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
from psycopg import sql

APP_ROLE = "bench_app"
ACCOUNTS = 100  # distinct account_id values: an equality on it keeps about 1% of a table's rows
STATUSES = ("new", "paid", "shipped", "void")
SINCE = datetime.now(UTC)  # the reports' "since" parameters count back from the run's start


def table(i: int) -> str:
    return f"plans_t{i:02d}"


# (name's suffix, definition): the primary key's index is named by PostgreSQL (<table>_pkey).
INDEXES = (("account", "(account_id)"), ("created", "(created_at)"))


def index_names(i: int) -> list[str]:
    return [f"{table(i)}_pkey", *(f"{table(i)}_{suffix}" for suffix, _ in INDEXES)]


@dataclass(frozen=True)
class Statement:
    kind: str  # join, report, update, delete, insert
    text: str  # with %s for psycopg's bind parameters (pg_stat_statements keeps $1, $2, ...)
    params: Callable[[np.random.Generator], tuple]
    calls: int  # runs between the server's two collections

    @property
    def reads_only(self) -> bool:
        return self.kind in ("join", "report")


def _account(rng: np.random.Generator) -> int:
    return int(rng.integers(0, ACCOUNTS))


def statements(tables: int, rows: int) -> list[Statement]:
    """The application's distinct statements over `tables` tables of `rows` rows. The calls make the reports and
    the UPDATEs the costliest by total time (at 40 tables, a server's top 20), then the joins (the rest of the top
    of a server that sees only the SELECTs); the DELETEs and INSERTs by key are cheap, below the top."""

    def key(rng):
        return (int(rng.integers(1, rows + 1)),)

    out = []
    for i in range(tables):
        a, b, c, d = (table((i + k) % tables) for k in range(4))
        out.append(
            Statement(
                "join",
                f"SELECT a.id, a.amount, b.status FROM {a} a JOIN {b} b ON b.id = a.id "
                "WHERE a.account_id = %s AND a.status = %s ORDER BY a.created_at DESC LIMIT 50",
                lambda rng: (_account(rng), STATUSES[int(rng.integers(0, len(STATUSES)))]),
                calls=8,
            )
        )
        if i % 4 == 0:
            out.append(
                Statement(
                    "report",
                    f"SELECT a.status, count(*), sum(b.amount), max(d.created_at) FROM {a} a "
                    f"JOIN {b} b ON b.id = a.id JOIN {c} c ON c.id = b.id "
                    f"JOIN {d} d ON d.account_id = c.account_id AND d.id = c.id "
                    "WHERE a.account_id = %s AND c.created_at > %s GROUP BY a.status ORDER BY 2 DESC",
                    lambda rng: (_account(rng), SINCE - timedelta(days=int(rng.integers(1, 30)))),
                    calls=4,
                )
            )
        if i % 4 == 1:
            out.append(
                Statement(
                    "update",
                    f"UPDATE {a} SET amount = amount + 1 WHERE account_id = %s",
                    lambda rng: (_account(rng),),
                    calls=6,
                )
            )
        if i % 8 == 2:
            out.append(Statement("delete", f"DELETE FROM {a} WHERE id = %s", key, calls=4))
            out.append(
                Statement(
                    "insert",
                    f"INSERT INTO {a} (id, account_id, status, amount, created_at) "
                    "VALUES (%s, %s, 'new', 0, now()) ON CONFLICT (id) DO NOTHING",
                    lambda rng: (*key(rng), _account(rng)),
                    calls=4,
                )
            )
    return out


def create(dsn: str, *, tables: int, rows: int) -> None:
    """The application role, its tables with their indexes, analyzed (as the superuser of `dsn`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET pg_stat_statements.track_utility = off")
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(APP_ROLE)))
        # Set by the superuser for the role's sessions (a role may not set it itself): the application's
        # statements are tracked, its sessions' utility statements not.
        conn.execute(
            sql.SQL("ALTER ROLE {} SET pg_stat_statements.track_utility = off").format(sql.Identifier(APP_ROLE))
        )
        with conn.transaction():
            for i in range(tables):
                t = sql.Identifier(table(i))
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE {} (id int PRIMARY KEY, account_id int NOT NULL, status text NOT NULL, "
                        "amount numeric(12, 2) NOT NULL, created_at timestamptz NOT NULL, note text)"
                    ).format(t)
                )
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} SELECT g, g %% {}, (%s::text[])[1 + g %% {}], (g %% 997) * 1.5, "
                        "now() - g * interval '7 minutes', md5(g::text) FROM generate_series(1, %s) g"
                    ).format(t, sql.Literal(ACCOUNTS), sql.Literal(len(STATUSES))),
                    (list(STATUSES), rows),
                )
                for suffix, columns in INDEXES:
                    conn.execute(
                        sql.SQL("CREATE INDEX {} ON {} " + columns).format(sql.Identifier(f"{table(i)}_{suffix}"), t)
                    )
                conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(t, sql.Identifier(APP_ROLE)))
        analyze(conn, tables)


def analyze(conn: psycopg.Connection, tables: int) -> None:
    """Fresh statistics, so that autoanalyze does not change a plan between two rounds of a day."""
    for i in range(tables):
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table(i))))


def run(dsn: str, stmts: list[Statement], *, seed: int = 1) -> None:
    """Each statement `calls` times with random parameters, as the application role, pipelined."""
    rng = np.random.default_rng(seed)
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        with conn.pipeline():
            for s in stmts:
                for _ in range(s.calls):
                    conn.execute(s.text, s.params(rng))


def rename_indexes(dsn: str, *, tables: int, version: int, previous: int) -> None:
    """Rename every index of the tables from its `previous` version's name to its `version`'s (1: the name
    it was created with): the same plans, naming other indexes, so each is a new shape."""

    def name(base: str, v: int) -> str:
        return base if v == 1 else f"{base}_v{v}"

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET pg_stat_statements.track_utility = off")
        with conn.transaction():
            for i in range(tables):
                for base in index_names(i):
                    conn.execute(
                        sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                            sql.Identifier(name(base, previous)), sql.Identifier(name(base, version))
                        )
                    )
