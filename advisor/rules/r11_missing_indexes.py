"""Rule 11: an index the server is missing: top statements whose plans scan a large table to keep few of its rows
(collectors/plans/hypothetical.py), one recommendation per index with every statement it helps, the time it would
save a day summed over them, its size, what it costs the table's writes, and the exact DDL. Cost-verified where
the planner costed it with hypopg, else estimated from pg_stats; the card says which."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change
from advisor.evidence import Evidence, MissingIndexFact
from advisor.rules._common import partial_note, size
from advisor.thresholds import Thresholds
from collectors.sql_names import in_comment, quote_ident

CODE = "missing_index"
NAME_MAX = 63  # PostgreSQL's identifiers
SHOWN = 5  # statements named in the explanation (all are counted)


def index_name(fact: MissingIndexFact, table: str | None = None) -> str:
    return f"{table or fact.table_name}_{'_'.join(fact.columns)}_idx"[:NAME_MAX]


def ddl(fact: MissingIndexFact) -> str:
    columns = ", ".join(quote_ident(c) for c in fact.columns)
    if fact.partition_tree:
        return _partitioned_ddl(fact, columns)
    return (
        f"-- in database {in_comment(quote_ident(fact.database))} (CREATE INDEX CONCURRENTLY runs outside a "
        "transaction block)\n"
        f"CREATE INDEX CONCURRENTLY {quote_ident(index_name(fact))} "
        f"ON {quote_ident(fact.schema_name)}.{quote_ident(fact.table_name)} ({columns});"
    )


def _partitioned_ddl(fact: MissingIndexFact, columns: str) -> str:
    """PostgreSQL's way for a partitioned table ("Partition Maintenance"): CREATE INDEX CONCURRENTLY cannot build
    its index, so the index is made on the partitioned tables only (at once, empty), then on each partition
    concurrently, each attached to its parent's; the root's index is valid once every partition's is attached."""
    partitioned = in_comment(f"{quote_ident(fact.schema_name)}.{quote_ident(fact.table_name)}")
    lines = [
        f"-- in database {in_comment(quote_ident(fact.database))}: {partitioned} is partitioned, and CREATE INDEX "
        "CONCURRENTLY cannot build a partitioned table's index;",
        "-- its index is made on the partitioned table only, then on each partition without blocking its writes, "
        "then attached. Run each statement on its own (psql does), outside a transaction block.",
    ]
    for schema, table, parent_schema, parent_table, relkind in fact.partition_tree:
        name = quote_ident(index_name(fact, table))
        relation = f"{quote_ident(schema)}.{quote_ident(table)}"
        if relkind == "f":
            lines.append(
                f"-- {in_comment(relation)} is a foreign table: it takes no index, and the partitioned table's stays "
                "invalid"
            )
            continue
        only = "ONLY " if relkind == "p" else ""
        concurrently = "" if relkind == "p" else "CONCURRENTLY "
        lines.append(f"CREATE INDEX {concurrently}{name} ON {only}{relation} ({columns});")
        if parent_table is not None:
            parent = f"{quote_ident(parent_schema)}.{quote_ident(index_name(fact, parent_table))}"
            lines.append(f"ALTER INDEX {parent} ATTACH PARTITION {quote_ident(schema)}.{name};")
    return "\n".join(lines)


def _minutes(ms: float) -> str:
    return f"{ms / 60_000:,.1f} min" if ms >= 60_000 else f"{ms / 1000:,.1f} s"


def _write_cost(fact: MissingIndexFact) -> str:
    if fact.table_writes_per_day is None:
        return "Its table's writes are not measured yet (the schema reading needs an hour of readings)."
    existing = "" if fact.table_indexes is None else f", which already writes {fact.table_indexes} index(es) for each"
    return (
        f"Each of its table's {fact.table_writes_per_day:,.0f} inserts and non-HOT updates a day would write it "
        f"too{existing}."
    )


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    if not evidence.sees_all_statements:
        return []
    found = []
    for fact in evidence.missing_indexes:
        saved = fact.saved_per_day_ms
        if saved < thresholds.missing_index_min_saved_ms_per_day:
            continue
        helped = sorted(fact.statements, key=lambda s: -s.saved_per_day_ms)
        named = "; ".join(
            f"statement {s.statement_id} ({(s.query or 'no text')[:80]}): cost {s.cost_before:,.0f} → "
            f"{s.cost_after:,.0f}, {_minutes(s.time_per_day_ms)} a day"
            for s in helped[:SHOWN]
        )
        more = f" and {len(helped) - SHOWN} more" if len(helped) > SHOWN else ""
        how = (
            "costed by the planner with a hypothetical index (hypopg): cost-verified"
            if fact.method == "cost-verified"
            else "estimated from pg_stats (install hypopg in the database to have the planner cost it)"
        )
        kept = "" if fact.selectivity is None else f" (its filter keeps about {fact.selectivity:.2%} of the rows)"
        partitions = ""
        if fact.partition_tree:
            leaves = sum(1 for *_, relkind in fact.partition_tree if relkind != "p")
            partitions = (
                f" It is partitioned: the plans read {fact.partitions_read} of its {leaves} partitions, and the index "
                "is made on every one of them."
            )
        found.append(
            Advice(
                rule=CODE,
                severity="warning" if saved >= thresholds.missing_index_warning_saved_ms_per_day else "info",
                server=evidence.server,
                subject=f"index:{fact.database}/{fact.schema_name}.{fact.table_name}({','.join(fact.columns)})",
                title=(
                    f"Index on {fact.table_name} ({', '.join(fact.columns)}) would save about {_minutes(saved)} a day"
                ),
                explanation=(
                    f"{len(helped)} statement(s) scan {fact.schema_name}.{fact.table_name} (about "
                    f"{fact.reltuples:,.0f} rows) to keep few of them{kept}: {named}{more}. Their plans' cost with "
                    f"the index, {how}; the time saved is their time over the last day cut as their cost is."
                    f"{partitions}{partial_note(evidence)}"
                ),
                change=Change(ddl(fact), "none"),
                effect=f"About {_minutes(saved)} of database time a day less for these statements.",
                cost=(
                    f"About {size(fact.size_bytes or 0)} of disk. {_write_cost(fact)} The build reads the table once "
                    "without blocking its writes (CONCURRENTLY)."
                ),
                references=(sources.PG_DOCS_INDEX_USAGE, sources.PG_DOCS_MULTICOLUMN, sources.PG_DOCS_CREATE_INDEX),
            )
        )
    return found
