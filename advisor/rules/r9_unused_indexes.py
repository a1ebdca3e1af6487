"""Rule 9: indexes the server pays for and never uses: no scan over at least a week of watching, or invalid (a
failed concurrent build, ignored by every query and still written at every change of its table). An index that
is unique, primary or backs a constraint is never proposed for want of scans; an invalid one is unless it is
primary or backs a constraint (a unique build that failed enforces nothing a DBA can rely on)."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice, Change
from advisor.evidence import Evidence, IndexFact
from advisor.rules._common import drop_index, index_subject, size, standby_note, write_cost
from advisor.thresholds import Thresholds

CODE = "unused_index"


def _invalid(evidence: Evidence, index: IndexFact) -> Advice:
    return Advice(
        rule=CODE,
        severity="warning",
        server=evidence.server,
        subject=index_subject(index),
        title=f"Index {index.name} on {index.table_name} is invalid",
        explanation=(
            f"{index.definition} is marked invalid (a CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY that failed "
            f"left it behind): no query uses it, but every insert and update of {index.table_name} still writes it. "
            f"It takes {size(index.size_bytes)}. {write_cost(index)}"
            + (
                " A unique build fails where the table holds duplicates: remove them before building it again."
                if index.is_unique
                else " Drop it, and build it again if it is wanted."
            )
        ),
        change=Change(drop_index(index), "none"),
        effect=f"{size(index.size_bytes)} freed and one index fewer to write at each change of {index.table_name}.",
        cost="None: no query can use an invalid index.",
        references=(sources.PG_DOCS_CREATE_INDEX, sources.PG_DOCS_DROP_INDEX),
    )


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    if evidence.schema_read_at is None:
        return []
    found = []
    for index in evidence.indexes:
        if not index.is_valid and not (index.is_primary or index.constraint):
            found.append(_invalid(evidence, index))  # unique or not, it enforces nothing yet: a failed build
            continue
        if index.enforces or not index.is_valid:
            continue
        if index.watched_since is None or index.scans_since > 0:
            continue
        watched = evidence.schema_read_at - index.watched_since
        if watched < thresholds.unused_index_watch:
            continue
        last = (
            ""
            if index.last_scan_at is None
            else f" Its last scan the server knows of was at {index.last_scan_at:%Y-%m-%d %H:%M} UTC."
        )
        found.append(
            Advice(
                rule=CODE,
                severity="warning",
                server=evidence.server,
                subject=index_subject(index),
                title=f"Index {index.name} on {index.table_name} was not used in {watched.days} days",
                explanation=(
                    f"{index.definition} had no scan since {index.watched_since:%Y-%m-%d %H:%M} UTC ({watched.days} "
                    f"days of watching without a statistics reset).{last} It takes {size(index.size_bytes)}. "
                    f"{write_cost(index)} It is not unique, not a primary key and backs no constraint."
                    f"{standby_note(evidence)}"
                ),
                change=Change(drop_index(index), "none"),
                effect=(
                    f"{size(index.size_bytes)} freed and one index fewer to write at each insert and non-HOT update "
                    f"of {index.table_name}."
                ),
                cost=(
                    "A query that needs it once in a long while (a monthly report, say) would scan its table "
                    "instead: keep its definition to build it again."
                ),
                references=(sources.PG_DOCS_INDEX_USAGE, sources.PG_DOCS_INDEX_STATS, sources.PG_DOCS_DROP_INDEX),
            )
        )
    return found
