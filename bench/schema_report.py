"""The schema benchmark's figures (bench/schema.py) and its part of the report: target rows, console lines, its
section of docs/benchmarks.md and its method. No database here: the figures are plain data."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.stats import median

# The targets: per database reading of 1,000 tables, on the monitored server.
SMALL_MS = 200.0


@dataclass(frozen=True)
class DatabaseCost:
    database: str
    tables: int
    tables_read: int
    indexes_read: int
    server_ms: list[float]  # the reading's statements' execution time on the server, per reading
    wall_ms: list[float]  # the same readings timed on the console (round trips and transfer included)
    steady_server_ms: list[float]  # the same with every index known (not described again): between daily ones
    steady_wall_ms: list[float]
    bare_server_ms: list[float]  # baseline: the bare statistics views
    bare_wall_ms: list[float]
    sized_server_ms: list[float]  # baseline: the views with pg_table_size
    sized_wall_ms: list[float]


@dataclass(frozen=True)
class Collections:
    due_ms: list[float]  # whole collections with the schema reading due (1,000-table database and the app's)
    not_due_ms: list[float]  # the same server's collections between two readings
    capped_ms: float  # the collection that first read the 12,000-table database
    capped_status: dict  # the reading's status after it
    capped_notes: list[str]
    capped_steady_ms: list[float]  # the collections after it, each reading every database again
    capped_steady_spent_ms: float  # the last one's reading time on the server (its status's spent_ms)
    delta_bytes: int  # one reading's delta row with every table of the 1,000 written
    delta_tables: int
    table_state_bytes: int
    index_state_bytes: int
    # The Indexes page's read of that server (readtier.schema_overview, the largest tables and indexes it lists)
    # and, the baseline, the whole overview the advisor reads: console ms per call, and the tables held.
    page_ms: list[float] = field(default_factory=list)
    whole_ms: list[float] = field(default_factory=list)
    page_tables_total: int = 0


PAGE_MS = 500.0  # the Indexes page's read of a server at the tables' cap: a page, not a report


@dataclass(frozen=True)
class Advice:
    statements: int
    judged_ms: list[float]  # per statement_plan call: the candidates' judging and costing (hypopg's EXPLAINs in it)
    plan_call_ms: list[float]  # per statement_plan call, end to end (the baseline: what planning alone already took)
    advise_ms: float  # server_advise: the evaluation that made the recommendations
    verified: int  # candidates costed by the planner with hypopg
    refused: int  # scans judged not worth an index (too small, unselective)
    recommendations: list[str]


ADVICE_S = 5.0  # the target: one server's advice, 20 statements to cost, hypopg installed


@dataclass
class SchemaRun:
    small: DatabaseCost
    large: DatabaseCost
    collections: Collections
    created_s: dict[str, float]
    schema_settings: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    advice: Advice | None = None

    @property
    def large_read(self) -> dict:
        return self.collections.capped_status.get("databases", {}).get(self.large.database, {})


def _ms(values: list[float]) -> str:
    return f"{median(values):.1f} / {max(values):.1f}" if values else "–"


def checks(run: SchemaRun) -> list[tuple[str, str, str, bool]]:
    s, c = run.small, run.collections
    large, budget_s = run.large_read, run.schema_settings.get("SCHEMA_SECONDS", 5.0)
    capped_said = any("cap" in note for note in c.capped_notes) and large.get("complete") is False
    spent_s = c.capped_status.get("spent_ms", 0.0) / 1000
    return [
        (
            f"schema reading of a database of {s.tables:,} tables: its statements' execution time on the monitored "
            "server, every index described (daily) and between (median / max)",
            f"≤ {SMALL_MS:g} ms per reading",
            f"{_ms(s.server_ms)} ms; {_ms(s.steady_server_ms)} ms between (wall on the console {_ms(s.wall_ms)} ms)",
            max(s.server_ms) <= SMALL_MS and max(s.steady_server_ms) <= SMALL_MS,
        ),
        (
            f"schema reading of a database of {run.large.tables:,} tables (cap "
            f"{run.schema_settings.get('SCHEMA_MAX_TABLES', 0):,} per server): the whole reading's time, every "
            "database and the history's state included (as its status counts it), the cap said, the collection "
            "stored (no timeout)",
            f"≤ {budget_s:g} s (COLLECTOR_SCHEMA_SECONDS), cap said",
            f"{spent_s:.2f} s at its first reading, {c.capped_steady_spent_ms / 1000:.2f} s after; "
            f"{large.get('tables', 0):,} of {large.get('tables_total', 0):,} tables kept"
            + ("; said" if capped_said else "; NOT said"),
            spent_s <= budget_s and c.capped_steady_spent_ms / 1000 <= budget_s and capped_said,
        ),
        (
            f"the Indexes page's read of that server ({c.page_tables_total:,} tables held): the largest 100 tables "
            "and indexes with their counts and the day's sums (median / max; the whole overview the advisor reads "
            "beside)",
            f"≤ {PAGE_MS:g} ms",
            f"{_ms(c.page_ms)} ms (the whole overview {_ms(c.whole_ms)} ms)",
            bool(c.page_ms) and max(c.page_ms) <= PAGE_MS,
        ),
    ] + _advice_checks(run.advice)


def _advice_checks(a: Advice | None) -> list[tuple[str, str, str, bool]]:
    if a is None:
        return []
    worker_s = (sum(a.judged_ms) + a.advise_ms) / 1000
    return [
        (
            f"index advice of one server with hypopg (PostgreSQL 15): {a.statements} statements' candidates judged and "
            "costed (worker wall time, hypopg's EXPLAINs included) and the evaluation",
            f"≤ {ADVICE_S:g} s",
            f"{worker_s:.2f} s ({sum(a.judged_ms) / 1000:.2f} s judging, {a.advise_ms / 1000:.2f} s evaluating; the "
            f"plans' calls {sum(a.plan_call_ms) / 1000:.2f} s in all); {a.verified} cost-verified, {a.refused} "
            f"refused; {len(a.recommendations)} recommendations",
            worker_s <= ADVICE_S and a.verified > 0,
        )
    ]


def summary_lines(run: SchemaRun) -> list[str]:
    s, b, c = run.small, run.large, run.collections
    return [
        f"  schema, {s.tables:,} tables: server {_ms(s.server_ms)} ms per reading (bare views {_ms(s.bare_server_ms)}, "
        f"with pg_table_size {_ms(s.sized_server_ms)})",
        f"  schema, {b.tables:,} tables: server {_ms(b.server_ms)} ms per reading (bare views {_ms(b.bare_server_ms)}, "
        f"with pg_table_size {_ms(b.sized_server_ms)})",
        f"  schema, collections: {median(c.due_ms):.0f} ms with the reading due, {median(c.not_due_ms):.0f} ms "
        f"without; the first with {b.tables:,} tables {c.capped_ms:.0f} ms, "
        f"the next {median(c.capped_steady_ms):.0f} ms",
        f"  schema, stored: {c.delta_bytes:,} bytes for one reading of {c.delta_tables:,} changed tables",
    ] + (
        []
        if run.advice is None
        else [
            f"  advice: {run.advice.statements} statements, judged in {sum(run.advice.judged_ms):.0f} ms, evaluated "
            f"in {run.advice.advise_ms:.0f} ms: " + "; ".join(run.advice.recommendations)
        ]
    )


def markdown(run: SchemaRun, table) -> list[str]:
    s, b, c = run.small, run.large, run.collections
    cfg = ", ".join(
        f"`COLLECTOR_{k}` {v:g}" if isinstance(v, float) else f"`COLLECTOR_{k}` {v:,}"
        for k, v in run.schema_settings.items()
    )
    rows = []
    for d in (s, b):
        rows += [
            [
                f"{d.tables:,} tables: the reading, every index described ({d.tables_read:,} tables, "
                f"{d.indexes_read:,} indexes kept)",
                _ms(d.server_ms),
                _ms(d.wall_ms),
            ],
            [
                f"{d.tables:,} tables: the reading, every index known (between daily descriptions)",
                _ms(d.steady_server_ms),
                _ms(d.steady_wall_ms),
            ],
            [f"{d.tables:,} tables: baseline, the bare views", _ms(d.bare_server_ms), _ms(d.bare_wall_ms)],
            [
                f"{d.tables:,} tables: baseline, the views with pg_table_size",
                _ms(d.sized_server_ms),
                _ms(d.sized_wall_ms),
            ],
        ]
    large = run.large_read
    return [
        "",
        "### 9. Schema reading (real PostgreSQL 17)",
        "",
        f"Databases of {s.tables:,} and {b.tables:,} tables on the monitored server (a primary key, one more index "
        f"and 20 rows each, analyzed), besides the application's. Settings: {cfg}. Each row is {len(s.server_ms)} "
        "readings as the monitoring role on a connection of its own, in a read-only transaction; server ms is the "
        "statements' execution time as pg_stat_statements counts it (median / max), wall ms the same readings "
        "timed on the console.",
        "",
        *table(rows, ["what", "server ms", "wall ms"]),
        "",
        f"Whole collections of a server registered through the product (the application's database and the "
        f"{s.tables:,}-table one): {median(c.due_ms):.0f} ms median with the schema reading due, "
        f"{median(c.not_due_ms):.0f} ms between two readings ({len(c.due_ms)} each, alternating). The first "
        f"collection with the {b.tables:,}-table database too took {c.capped_ms:.0f} ms, "
        f"{c.capped_status.get('spent_ms', 0.0):.0f} ms of it reading (every database, round trips and the "
        "history's state included; the rest: storing the first reading of every table and index in the history "
        f"store); it kept {large.get('tables', 0):,} of its "
        f"{large.get('tables_total', 0):,} tables (the largest; the server's cap of "
        f"{run.schema_settings.get('SCHEMA_MAX_TABLES', 0):,}, the other database's tables counted) and said so "
        f'("{"; ".join(n for n in c.capped_notes if "cap" in n) or "nothing said"}"). The collections after it: '
        f"{median(c.capped_steady_ms):.0f} ms median, {c.capped_steady_spent_ms:.0f} ms of it reading.",
        "",
        f"Stored: one reading with every one of the {s.tables:,} tables written stores one delta row of "
        f"{c.delta_bytes:,} bytes ({c.delta_tables:,} tables changed); the state rows of all tables and indexes "
        f"read take {c.table_state_bytes / 1e6:.1f} MB and {c.index_state_bytes / 1e6:.1f} MB (written again only "
        "when they change).",
    ] + _advice_markdown(run.advice)


def _advice_markdown(a: Advice | None) -> list[str]:
    if a is None:
        return []
    return [
        "",
        f"Index advice on Debian's PostgreSQL 15 with hypopg: {a.statements} statements filtering four tables of "
        f"60,000 rows, each planned by the plans reading ({sum(a.plan_call_ms) / 1000:.2f} s for all the calls, "
        f"end to end, connections included), whose candidates were judged and costed in "
        f"{sum(a.judged_ms) / 1000:.2f} s of them ({a.verified} cost-verified with a hypothetical index, "
        f"{a.refused} refused: too small or unselective); the evaluation that made the advice took "
        f"{a.advise_ms / 1000:.2f} s. Recommendations: " + "; ".join(a.recommendations) + ".",
    ]


METHOD = """- **Schema reading (9).** `bench/schema.py`, on the monitored cluster: databases of 1,000 and 12,000
  tables are created; each reading is `collectors.schema.catalog.read_database` as the collection sends it, on a
  connection of the monitoring role to that database in a read-only transaction, with `pg_stat_statements_reset()`
  before each, so that the server's time is that reading's own statements (BEGIN, the timeout, the two reads,
  COMMIT). Baselines on the same connection: the bare `pg_stat_user_tables` and `pg_stat_user_indexes`, and the
  tables' view with `pg_table_size` (TOAST and maps, which the reading leaves out for their cost). Collections are
  `server_collect` with `COLLECTOR_SCHEMA_INTERVAL_S` 0 (due) and a billion (not due), alternating."""
