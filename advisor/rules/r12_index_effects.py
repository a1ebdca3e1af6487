"""Rule 12: advice that checks itself. An index made in the last week (first found by the schema reading after
its database's first reading) is followed: what its statements' mean time was the week before it and since, and
what it costs the table's writes; one that no statement's plan reads and that has not been scanned says that too.
The card is information (nothing to change) and goes once the week has passed."""

from __future__ import annotations

from advisor import sources
from advisor.advice import Advice
from advisor.evidence import Evidence, MadeIndexFact
from advisor.rules._common import index_subject, size, write_cost
from advisor.thresholds import Thresholds

CODE = "index_effect"


def _ms(value: float) -> str:
    return f"{value:,.2f} ms" if value < 10 else f"{value:,.0f} ms"


def _advice(evidence: Evidence, made: MadeIndexFact) -> Advice | None:
    index = made.index
    when = f"{made.made_at:%Y-%m-%d %H:%M} UTC"
    measured = [s for s in made.statements if s.mean_before_ms is not None and s.mean_after_ms is not None]
    if measured:
        best = max(measured, key=lambda s: s.mean_before_ms - s.mean_after_ms)
        said = "; ".join(
            f"statement {s.statement_id} ({(s.query or 'no text')[:80]}): mean {_ms(s.mean_before_ms)} the week "
            f"before, {_ms(s.mean_after_ms)} since ({s.calls_after:,} calls)"
            for s in measured
        )
        verb = "fell" if best.mean_after_ms < best.mean_before_ms else "went"
        title = (
            f"Index {index.name} (made {when}): statement {best.statement_id}'s mean {verb} from "
            f"{_ms(best.mean_before_ms)} to {_ms(best.mean_after_ms)}"
        )
        explanation = f"{index.definition}, first seen at {when}, is read by: {said}."
    elif made.statements:
        title = f"Index {index.name} (made {when}) is in plans; its effect is not measured yet"
        explanation = (
            f"{index.definition} is read by the current plan of statement(s) "
            f"{', '.join(str(s.statement_id) for s in made.statements)}, which have not run both before and since."
        )
    elif index.scans_since == 0:
        title = f"Index {index.name} (made {when}) has not been used since"
        explanation = (
            f"{index.definition} was first seen at {when}; no statement's current plan reads it and it has not been "
            "scanned. If it was made for a statement, that statement's plan does not use it."
        )
    else:
        return None
    return Advice(
        rule=CODE,
        severity="info",
        server=evidence.server,
        subject=index_subject(index),
        title=title,
        explanation=f"{explanation} It takes {size(index.size_bytes)}. {write_cost(index)}",
        effect="What the index did, measured: nothing to change.",
        references=(sources.PG_DOCS_INDEX_USAGE, sources.PG_DOCS_INDEX_STATS),
    )


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    return [a for made in evidence.made_indexes if (a := _advice(evidence, made)) is not None]
