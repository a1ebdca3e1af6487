"""Every threshold of the advisor in one place, each with the public figure it comes from.

Seeds are the texts in ../shared/seeds/ (see its README); the reference is ../shared/reference/pg_stat_statements.md.
`Thresholds` holds the defaults; an organization overrides some of them (advisor.models.OrganizationThresholds, set on
its page in the console; advisor.services.organization_thresholds applies them with dataclasses.replace).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

# Seed 000 (Dalibo audit): act above ~10 dealloc/s; max=100 with 128 statements gave ~1,450 dealloc/s
# and 25% fewer transactions than max=400.
DEALLOC_CRITICAL_PER_S = 10.0
# Any sustained deallocation is a warning (issue 8, rule 1); below this it is noise from one burst.
DEALLOC_WARNING_PER_S = 0.01
# Reference §3: pg_stat_statements.max defaults to 5000; seed 000: never lower it below the default.
PSS_MAX_DEFAULT = 5000
# Seed 002 (Postgres.FM): the spinlock cliff is ≈400k calls/s of one queryid on 192 vCPUs without
# track_planning, ≈200k with it (a second spinlock-protected update per statement).
# The same seed says the problem was also reproduced on 8-core machines: the per-vCPU scaling below is a
# calibration on one point, not a law.
CLIFF_CALLS_PER_S = 400_000.0
CLIFF_CPUS = 192
# Seed 003 (Tantor): SpinDelay on 192 CPUs, one hot statement: 484k TPS at sample_rate 1.0, 1.02M at 0.5
# (SpinDelay 11,107 → 174 samples), SpinDelay gone at 0.25.
SAMPLE_RATE_MODERATE = 0.5
SAMPLE_RATE_STRONG = 0.25


@dataclass(frozen=True)
class Thresholds:
    """Advisor thresholds; defaults come from the module constants above (each with its source)."""

    dealloc_critical_per_s: float = DEALLOC_CRITICAL_PER_S
    dealloc_warning_per_s: float = DEALLOC_WARNING_PER_S
    pss_max_default: int = PSS_MAX_DEFAULT
    # Headroom for rule 1's value: distinct keys of the busiest period × 2 (a week's churn still fits).
    max_headroom_factor: float = 2.0
    # Rule 1's value is rounded up to a multiple of this (a "round number" a DBA would type).
    max_round_to: int = 5000
    # On 13 (no dealloc counter): entries ≥ 95% of max while keys disappear counts as eviction.
    entries_near_max_share: float = 0.95
    # Cliff model (seed 002), linear per vCPU: 400,000 / 192 ≈ 2,083 calls/s of one queryid per vCPU.
    # One data point; the linear shape is an assumption, stated in every explanation that uses it.
    cliff_calls_per_s_per_cpu: float = CLIFF_CALLS_PER_S / CLIFF_CPUS
    # track_planning is safe to turn on when the hottest queryid is at most 1/4 of the cliff (so still
    # at most 1/2 with the doubled updates).
    cliff_safe_headroom: float = 4.0
    # Below this headroom (with track_planning on) recommend turning it off or sampling.
    cliff_near_headroom: float = 2.0
    # Seed 003: SpinDelay share of sampled active time that counts as contention (its 1.0 row: 11,107
    # SpinDelay samples against 9,568 NoWait — a majority; 5% is where it starts to matter).
    spindelay_share: float = 0.05
    sample_rate_moderate: float = SAMPLE_RATE_MODERATE
    sample_rate_strong: float = SAMPLE_RATE_STRONG
    # Seed 003: LWLock:pg_stat_statements waits cut 237k → 32k TPS on 48 CPUs; 5% of active time flags it.
    lwlock_share_warning: float = 0.05
    lwlock_share_critical: float = 0.20
    # Rule 5: a family is churn when it has at least this many entries over the day.
    family_min_entries: int = 20
    # Rule 6: more than this many resets over the window is "often".
    resets_max: int = 1
    resets_window: timedelta = timedelta(days=7)
    # Rule 7: plan share above 50% (issue 8) with material total time: ≥ 1% of the server's db time.
    plan_share: float = 0.5
    material_time_share: float = 0.01
    # Rule 9: an index never scanned over at least a week of watching (DESIGN.md's catalogue, issue 38: a weekly
    # job's or report's index is scanned within a week; a shorter watch would propose dropping it).
    unused_index_watch: timedelta = timedelta(days=7)
    # Rule 11 (no public figure: the console's choice): an index that saves less than a second a day is not worth
    # its writes and disk; from a minute a day it is a warning.
    missing_index_min_saved_ms_per_day: float = 1_000.0
    missing_index_warning_saved_ms_per_day: float = 60_000.0
    # Lifecycle (no public figure: the console's choice): a recommendation whose condition has not been seen
    # for this long is resolved automatically; a user's "resolved" is reopened only after it (the change
    # needs time to show in windows of an hour and more).
    clear_after: timedelta = timedelta(hours=2)


@dataclass(frozen=True)
class Override:
    """A threshold an organization may override: its field (advisor.models.OrganizationThresholds stores it, None
    for the default; the organization's page sets it), its words there, and the values it takes."""

    field: str  # Thresholds' field of the same name; clear_after_minutes: clear_after, in minutes
    label: str
    kind: str  # "share": a fraction 0..1; "rate": a number >= 0; "count": a whole number >= minimum
    help_text: str
    minimum: int = 0

    @property
    def threshold(self) -> str:
        """The Thresholds field it overrides."""
        return self.field.removesuffix("_minutes")

    def default(self) -> float | int:
        """Thresholds' default, as the field holds it."""
        value = getattr(Thresholds(), self.threshold)
        return int(value.total_seconds() // 60) if isinstance(value, timedelta) else value

    def value(self, stored: float | int) -> float | int | timedelta:
        """A stored override as Thresholds holds it."""
        return timedelta(minutes=stored) if self.field.endswith("_minutes") else stored

    @property
    def maximum(self) -> float:
        return {"share": 1.0, "rate": 1e9, "count": 1_000_000}[self.kind]


# What an organization may override, in the order its page lists them.
OVERRIDES: tuple[Override, ...] = (
    Override(
        field="dealloc_critical_per_s",
        label="Deallocations per second: critical",
        kind="rate",
        help_text=(
            "Sustained pg_stat_statements deallocations per second above which pg_stat_statements.max is "
            "critically small."
        ),
    ),
    Override(
        field="dealloc_warning_per_s",
        label="Deallocations per second: warning",
        kind="rate",
        help_text="Sustained deallocations per second above which it is a warning.",
    ),
    Override(
        field="lwlock_share_warning",
        label="LWLock:pg_stat_statements share: warning",
        kind="share",
        help_text="Share of active time waiting on pg_stat_statements' lock that is a warning (0.05 = 5%).",
    ),
    Override(
        field="lwlock_share_critical",
        label="LWLock:pg_stat_statements share: critical",
        kind="share",
        help_text="Share of active time waiting on pg_stat_statements' lock that is critical.",
    ),
    Override(
        field="spindelay_share",
        label="SpinDelay share",
        kind="share",
        help_text="Share of active time spent in SpinDelay that counts as spinlock contention.",
    ),
    Override(
        field="plan_share",
        label="Plan share",
        kind="share",
        help_text="Share of a statement's time spent planning above which planning is flagged.",
    ),
    Override(
        field="material_time_share",
        label="Material time share",
        kind="share",
        help_text="Share of the server's database time a statement needs for its plan share to matter.",
    ),
    Override(
        field="family_min_entries",
        label="Family entries",
        kind="count",
        help_text="Entries over a day that make a family of similar statements churn.",
        minimum=1,
    ),
    Override(
        field="resets_max",
        label="Resets over 7 days",
        kind="count",
        help_text="More resets of pg_stat_statements than this over 7 days is too often.",
    ),
    Override(
        field="clear_after_minutes",
        label="Clear after (minutes)",
        kind="count",
        help_text=(
            "Minutes a condition must stay clear before its recommendation resolves by itself (and before a "
            "recommendation a user resolved can open again)."
        ),
        minimum=1,
    ),
)
# (warning, critical): the warning's value, overridden or not, stays below the critical one's.
OVERRIDE_PAIRS = (
    ("dealloc_warning_per_s", "dealloc_critical_per_s"),
    ("lwlock_share_warning", "lwlock_share_critical"),
)
