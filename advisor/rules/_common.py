"""Helpers shared by the rules: the partial-view note, identifiers, the spinlock-cliff model."""

from __future__ import annotations

from advisor.evidence import Evidence
from advisor.thresholds import Thresholds
from collectors.sql_names import in_comment, quote_ident


def cliff_calls_per_s(evidence: Evidence, thresholds: Thresholds, *, track_planning: bool) -> float | None:
    """Calls/s of one queryid at which its entry spinlock saturates; None when the CPU count is unknown.

    Linear per-vCPU model calibrated on one public point (sources.POSTGRES_FM_TRACK_PLANNING: ≈400k calls/s
    on 192 vCPUs); track_planning doubles the spinlock updates per statement, so the cliff halves (≈200k).
    """
    if not evidence.cpu_count:
        return None
    cliff = thresholds.cliff_calls_per_s_per_cpu * evidence.cpu_count
    return cliff / 2 if track_planning else cliff


def headroom(evidence: Evidence, thresholds: Thresholds, *, track_planning: bool) -> float | None:
    """Cliff / hottest queryid's peak calls/s (a multiple); None when either is unknown."""
    cliff = cliff_calls_per_s(evidence, thresholds, track_planning=track_planning)
    if cliff is None or not evidence.hottest_calls_per_s:
        return None
    return cliff / evidence.hottest_calls_per_s


def partial_note(evidence: Evidence) -> str:
    """Sentence appended where the monitoring role cannot see every statement."""
    if evidence.sees_all_statements:
        return ""
    return " The monitoring role lacks pg_read_all_stats, so other roles' statements are hidden: this is partial."


def drop_index(index) -> str:
    """The exact DDL that drops an index without blocking its table's writes, in the database it lives in
    (`index`: an advisor.evidence.IndexFact)."""
    return (
        f"-- in database {in_comment(quote_ident(index.database))} (DROP INDEX CONCURRENTLY runs outside a "
        "transaction block)\n"
        f"DROP INDEX CONCURRENTLY {quote_ident(index.schema_name)}.{quote_ident(index.name)};"
    )


def index_subject(index) -> str:
    return f"index:{index.database}/{index.schema_name}.{index.name}"


def size(n_bytes: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} bytes"


def write_cost(index) -> str:
    """What keeping the index costs its table's writes, in a sentence."""
    if index.table_writes_per_day is None:
        return "Its table's writes are not measured yet (the schema reading needs two readings of its database)."
    return (
        f"Its table takes about {index.table_writes_per_day:,.0f} inserts and non-HOT updates a day, each of which "
        "also writes this index."
    )


def standby_note(evidence: Evidence) -> str:
    """Where the server's scans are not all the index's scans: a standby's queries are counted on the standby."""
    if evidence.in_recovery:
        return (
            " This server is a standby: its statistics count its own queries only, not the primary's or other "
            "standbys'."
        )
    if evidence.standbys:
        return (
            f" This server has {evidence.standbys} standby(s): queries run there scan indexes there, and those "
            "scans are not counted here. Check pg_stat_user_indexes on each standby before dropping it."
        )
    return ""
