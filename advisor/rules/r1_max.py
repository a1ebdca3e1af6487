"""Rule 1: pg_stat_statements.max too small (deallocation on 14+, eviction inferred on 13), or lowered below 5000."""

from __future__ import annotations

import math

from advisor import sources
from advisor.advice import Advice, Change, EvidenceSeries
from advisor.evidence import Evidence
from advisor.rules._common import partial_note
from advisor.thresholds import Thresholds

CODE = "pgss_max"
# Per-entry shared memory is not in the reference; derived from the 18 source's pgssEntry layout:
# hash key 24 B + about 55 8-byte counters (Counters) + offsets, mutex, timestamps ≈ 500 B, plus the
# dynahash element header and bucket ≈ 64 B. An estimate, stated as such; pg_shmem_allocations shows the truth.
ENTRY_BYTES_ESTIMATE = 560
# Query texts live in a file (reference §3/§7); without a measured mean length assume 300 bytes.
DEFAULT_MEAN_QUERY_LEN = 300


def recommended_max(evidence: Evidence, thresholds: Thresholds) -> int:
    """Distinct keys of the day and the week, with headroom, rounded up, never below the default."""
    keys = max(evidence.distinct_keys_1d or 0, evidence.distinct_keys_7d or 0, evidence.entries_peak or 0)
    wanted = keys * thresholds.max_headroom_factor
    rounded = math.ceil(wanted / thresholds.max_round_to) * thresholds.max_round_to if wanted > 0 else 0
    return max(rounded, thresholds.pss_max_default, evidence.settings.max)


def cost_of(value: int, evidence: Evidence) -> str:
    """Shared memory and query-text file size of `value` entries, each an estimate with its basis."""
    mem_mb = value * ENTRY_BYTES_ESTIMATE / 1024 / 1024
    qlen = evidence.mean_query_len or DEFAULT_MEAN_QUERY_LEN
    text_mb = value * qlen / 1024 / 1024
    basis = "measured mean text length" if evidence.mean_query_len else "an assumed 300-byte mean text"
    return (
        f"about {mem_mb:.1f} MB of shared memory (≈{ENTRY_BYTES_ESTIMATE} B per entry, estimated from the entry "
        f"layout) and a query-text file of about {text_mb:.1f} MB ({basis}); a restart is needed."
    )


def _raise(evidence: Evidence, thresholds: Thresholds, severity: str, why: str) -> Advice:
    value = recommended_max(evidence, thresholds)
    return Advice(
        rule=CODE,
        severity=severity,  # type: ignore[arg-type]
        server=evidence.server,
        subject="server",
        title=f"Raise pg_stat_statements.max from {evidence.settings.max:,} to {value:,}",
        explanation=(
            f"{why} Distinct statement keys seen: {evidence.distinct_keys_1d or 0:,} over a day, "
            f"{evidence.distinct_keys_7d or 0:,} over a week; {value:,} keeps them with "
            f"×{thresholds.max_headroom_factor:g} headroom.{_below_default(evidence, thresholds)}"
            f"{partial_note(evidence)}"
        ),
        change=Change(f"ALTER SYSTEM SET pg_stat_statements.max = {value};", "restart"),
        effect="Entries stop being evicted: no full-table sort under the exclusive lock on every eviction.",
        cost=cost_of(value, evidence),
        evidence=(EvidenceSeries.of("deallocations", "dealloc/s", evidence.dealloc_series),),
        references=(sources.DALIBO_SLOW_COMMIT, sources.PGSS_DOCS),
    )


def _below_default(evidence: Evidence, thresholds: Thresholds) -> str:
    """The "never lower it" note for a max below the default (part of the raise when there is one)."""
    if evidence.settings.max >= thresholds.pss_max_default:
        return ""
    return (
        f" max = {evidence.settings.max:,} is below the default {thresholds.pss_max_default:,}: never lower it "
        "(a Dalibo audit traced slow `select 1`/COMMIT on a 30k tx/s server to max = 1000)."
    )


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 1: a raise when entries are evicted (with the below-default note when it applies); a max below the
    default on its own when nothing is evicted (yet)."""
    raised = _evictions(evidence, thresholds)
    if raised or evidence.settings.max >= thresholds.pss_max_default:
        return raised
    value = max(recommended_max(evidence, thresholds), thresholds.pss_max_default)
    return [
        Advice(
            rule=CODE,
            severity="warning",
            server=evidence.server,
            subject="below-default",
            title=f"pg_stat_statements.max is {evidence.settings.max:,}, below the default "
            f"{thresholds.pss_max_default:,}",
            explanation=_below_default(evidence, thresholds).strip(),
            change=Change(f"ALTER SYSTEM SET pg_stat_statements.max = {value};", "restart"),
            effect="Fewer evictions and their exclusive-lock sorts.",
            cost=cost_of(value, evidence),
            references=(sources.DALIBO_SLOW_COMMIT, sources.PGSS_DOCS),
        )
    ]


def _evictions(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Deallocation (14+) or inferred eviction (13): raise max."""
    out: list[Advice] = []
    s = evidence.settings
    if evidence.dealloc_per_s is not None:
        # Sustained = every window the evidence has shows it; the lowest window rate is the sustained rate.
        rates = [r for r in evidence.dealloc_per_s.values() if r is not None]
        if not rates:
            return out
        sustained = min(rates)
        shown = ", ".join(f"{k}: {v:.2f}/s" for k, v in evidence.dealloc_per_s.items())
        if sustained > thresholds.dealloc_critical_per_s:
            out.append(
                _raise(
                    evidence,
                    thresholds,
                    "critical",
                    f"Sustained deallocation of {sustained:.1f}/s ({shown}) is above "
                    f"{thresholds.dealloc_critical_per_s:g}/s (in Dalibo's pgbench reproduction, ~1,450/s cost 25% "
                    "of throughput).",
                )
            )
        elif sustained >= thresholds.dealloc_warning_per_s:
            out.append(_raise(evidence, thresholds, "warning", f"Entries are being deallocated steadily ({shown})."))
    elif evidence.version < 14 and evidence.entries_peak is not None:
        near = evidence.entries_peak >= thresholds.entries_near_max_share * s.max
        if near and (evidence.keys_disappeared_1d or 0) > 0:
            out.append(
                _raise(
                    evidence,
                    thresholds,
                    "warning",
                    f"PostgreSQL {evidence.version} has no dealloc counter; the entry count peaked at "
                    f"{evidence.entries_peak:,} of {s.max:,} while {evidence.keys_disappeared_1d:,} keys "
                    "disappeared in a day: entries are being evicted.",
                )
            )
    return out
