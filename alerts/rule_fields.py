"""Each setting of an alert rule declared once: the kind that reads it, its type, its default and why, the range it
is held to with the refusal that says so, and its words on the rules' page and in the API. Rule.clean, the
selectors, the default rules, the page's form and the API's serializers are built from FIELDS."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.models import Severity
from advisor.thresholds import DEALLOC_CRITICAL_PER_S


@dataclass(frozen=True)
class RuleField:
    name: str  # the Rule model's field
    kind: str | None  # the kind of rule that reads it (a Rule.Kind value); None: every kind
    value_type: type  # int, float, or str with choices
    default: int | float | str  # the model's; a default rule of its kind starts with it (alerts/defaults.py)
    refusal: str  # said under the field for a value out of range: what would be accepted
    label: str  # the rules' page
    help_text: str  # the rules' page, under the field
    api_help: str  # the API's description, after the kind that reads it
    # The range: every bound given holds (None: no such bound).
    more_than: float | None = None
    at_least: float | None = None
    at_most: float | None = None
    choices: tuple[tuple[str, str], ...] = ()  # (value, label): a str's only values

    def accepts(self, value: object) -> bool:
        """Whether a rule may hold `value` (never None: every setting has a value)."""
        if value is None:
            return False
        if self.choices:
            return value in tuple(v for v, _ in self.choices)
        if self.more_than is not None and value <= self.more_than:
            return False
        if self.at_least is not None and value < self.at_least:
            return False
        return self.at_most is None or value <= self.at_most

    @property
    def api_help_text(self) -> str:
        """The API describes every kind's fields in one object: each threshold says which kind reads it."""
        return f"{self.kind}: {self.api_help}" if self.kind else self.api_help


FIELDS: tuple[RuleField, ...] = (
    RuleField(
        name="hold_minutes",
        kind=None,
        value_type=int,
        # Anti-flap: a condition true for less than this resolves silently. Each default rule says its own.
        default=5,
        at_least=0,
        refusal="minutes: 0 or more",
        label="Hold (minutes)",
        help_text="How long it lasts before anyone hears of it.",
        api_help="how long a condition lasts before it is notified",
    ),
    RuleField(
        name="remind_minutes",
        kind=None,
        value_type=int,
        default=0,
        at_least=0,
        refusal="minutes: 0 or more",
        label="Remind every (minutes)",
        help_text="While open and not acknowledged; 0: never.",
        api_help="while open and not acknowledged; 0: never",
    ),
    RuleField(
        name="down_minutes",
        kind="server_down",
        value_type=int,
        # Ten collections at the default 60 s interval; the fleet page calls a server stale after three intervals
        # and a minute, the pager waits longer, so that a restart or a short network blip never wakes anyone.
        default=10,
        at_least=1,
        refusal="at least 1 minute: a single missed collection is not a server down",
        label="Down for (minutes)",
        help_text="failing, or no successful collection, for this long",
        api_help="failing or stale this long",
    ),
    RuleField(
        name="min_severity",
        kind="advisor",
        value_type=str,
        default=Severity.CRITICAL,  # warnings and infos wait for the console and the weekly report
        choices=tuple(Severity.choices),
        refusal=f"one of {', '.join(Severity.values)}",
        label="Severity",
        help_text="a recommendation of this severity or worse",
        api_help="this severity or worse",
    ),
    RuleField(
        name="dealloc_per_s",
        kind="dealloc",
        value_type=float,
        # The advisor's own critical rate (seed 000, Dalibo: act above ~10 dealloc/s); a default rule made for an
        # organization takes its override of it, when it has one (alerts.services.rules_default).
        default=DEALLOC_CRITICAL_PER_S,
        more_than=0,
        refusal="deallocations per second: more than 0",
        label="Deallocations per second",
        help_text="pg_stat_statements deallocating at least this fast…",
        api_help="deallocations per second",
    ),
    RuleField(
        name="dealloc_minutes",
        kind="dealloc",
        value_type=int,
        default=15,  # most of a quarter hour: a burst of new statements after a deploy is not a storm
        at_least=1,
        refusal="at least 1 minute: a rate needs a window",
        label="Over (minutes)",
        help_text="…for at least half of this window",
        api_help="over most of this window",
    ),
    RuleField(
        name="regression_factor",
        kind="regression",
        value_type=float,
        # Twice its usual mean time: well above the day-to-day noise of a mean over an hour (the statements page
        # marks 1.5 for a reader's attention; a notification needs more).
        default=2.0,
        more_than=1,
        refusal="more than 1 (2 = twice the usual mean time)",
        label="Times slower",
        help_text="the last hour's mean time, against the same hour's median (2 = twice)",
        api_help="times the usual mean time",
    ),
    RuleField(
        name="regression_min_share",
        kind="regression",
        value_type=float,
        default=0.05,  # 5% of the server's time in the hour: at most 20 statements qualify, a rare slow one never does
        at_least=0,
        at_most=1,
        refusal="a share of the server's time, from 0 to 1 (0.05 = 5%)",
        label="Share of the server's time",
        help_text="from 0 to 1 (0.05 = 5%): rare statements never qualify",
        api_help="share of the server's time, 0 to 1",
    ),
    RuleField(
        name="regression_days",
        kind="regression",
        value_type=int,
        # A week of the same hour: each weekday once, so that the median is an ordinary day even with a weekly batch.
        default=7,
        at_least=1,
        at_most=28,
        refusal="from 1 to 28 previous days",
        label="Baseline days",
        help_text="previous days of the same hour, 1 to 28",
        api_help="previous days of the same hour",
    ),
)
BY_NAME: dict[str, RuleField] = {f.name: f for f in FIELDS}
DEFAULTS: dict[str, int | float | str] = {f.name: f.default for f in FIELDS}


def of_kind(kind: str) -> tuple[RuleField, ...]:
    """The thresholds that `kind` reads (not the settings every kind has)."""
    return tuple(f for f in FIELDS if f.kind == kind)
