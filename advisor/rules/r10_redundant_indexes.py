"""Rule 10: indexes held twice: the same keys as another index of the table, or a leading prefix of a B-tree's
keys, with the same predicate, expressions and operator classes, so that every scan it serves the other serves
too. An index that is unique, primary or backs a constraint is never proposed; of two equal ones, the one kept is
the constraint's, else the one scanned more."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change
from advisor.evidence import Evidence, IndexFact
from advisor.rules._common import drop_index, index_subject, size, standby_note, write_cost
from advisor.thresholds import Thresholds

CODE = "redundant_index"


def _keys(index: IndexFact) -> str:
    return ", ".join(c if c is not None else "(expression)" for c in index.key_columns)


def covers(longer: IndexFact, shorter: IndexFact) -> bool:
    """Whether every scan `shorter` serves, `longer` serves too (both of one table)."""
    n = len(shorter.key_attnums)
    if not longer.is_valid or shorter.include_count or n == 0 or n > len(longer.key_attnums):
        return False
    same = (
        shorter.method == longer.method
        and shorter.predicate_md5 == longer.predicate_md5
        and shorter.expressions_md5 == longer.expressions_md5
        and tuple(longer.key_attnums[:n]) == tuple(shorter.key_attnums)
        and tuple(longer.opclasses[:n]) == tuple(shorter.opclasses)
    )
    if not same:
        return False
    # A strict prefix serves only in a B-tree, and only on plain columns (an expression's position is its own).
    return n == len(longer.key_attnums) or (shorter.method == "btree" and not shorter.expressions_md5)


def _kept_first(a: IndexFact, b: IndexFact) -> bool:
    """Of two indexes that cover each other, whether `a` is the one to keep."""
    return (a.enforces, a.scans_since, b.name) > (b.enforces, b.scans_since, a.name)


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    if evidence.schema_read_at is None:
        return []
    by_table: dict[tuple[str, int], list[IndexFact]] = {}
    for index in evidence.indexes:
        by_table.setdefault((index.database, index.table_relid), []).append(index)
    found = []
    for indexes in by_table.values():
        for shorter in indexes:
            if shorter.enforces or not shorter.is_valid:
                continue
            keeper = next(
                (
                    other
                    for other in indexes
                    if other is not shorter
                    and covers(other, shorter)
                    and (not covers(shorter, other) or _kept_first(other, shorter))
                ),
                None,
            )
            if keeper is None:
                continue
            equal = covers(shorter, keeper)
            how = "the same keys as" if equal else "a leading prefix of the keys of"
            scans = (
                f" It was scanned {shorter.scans_since:,} times since {shorter.watched_since:%Y-%m-%d %H:%M} UTC: "
                f"those scans would use {keeper.name}."
                if shorter.scans_since and shorter.watched_since is not None
                else ""
            )
            found.append(
                Advice(
                    rule=CODE,
                    severity="warning",
                    server=evidence.server,
                    subject=index_subject(shorter),
                    title=f"Index {shorter.name} on {shorter.table_name} duplicates {keeper.name}",
                    explanation=(
                        f"{shorter.name} ({_keys(shorter)}) has {how} {keeper.name} ({_keys(keeper)}), with the same "
                        f"predicate, expressions and operator classes: every scan it serves, {keeper.name} serves "
                        f"too.{scans} It takes {size(shorter.size_bytes)}. {write_cost(shorter)}"
                        f"{standby_note(evidence) if shorter.scans_since == 0 else ''}"
                    ),
                    change=Change(drop_index(shorter), "none"),
                    effect=(
                        f"{size(shorter.size_bytes)} freed and one index fewer to write at each insert and non-HOT "
                        f"update of {shorter.table_name}."
                    ),
                    cost=(
                        f"Its scans move to {keeper.name}"
                        + ("." if equal else ", a larger index: slightly more pages read per scan.")
                    ),
                    references=(sources.PG_DOCS_MULTICOLUMN, sources.PG_DOCS_INDEX_USAGE, sources.PG_DOCS_DROP_INDEX),
                )
            )
    return found
