"""The rules every organization starts with, one per kind, and why each threshold is what it is. An admin changes
them (or disables one) rather than deleting: an organization left with no rule at all gets these again."""

from advisor.thresholds import DEALLOC_CRITICAL_PER_S

DEFAULT_RULES: tuple[dict, ...] = (
    {
        "name": "Server down",
        "kind": "server_down",
        # Ten collections at the default 60 s interval; the fleet page calls a server stale after three intervals
        # and a minute, the pager waits longer, so that a restart or a short network blip never wakes anyone.
        "down_minutes": 10,
        "hold_minutes": 0,  # down_minutes is already how long it has to last
        "remind_minutes": 240,  # an outage nobody acknowledged is asked about again within a shift
    },
    {
        "name": "Critical advice",
        "kind": "advisor",
        "min_severity": "critical",  # warnings and infos wait for the console and the weekly report
        # The advisor raises a recommendation from an hour and more of evidence and clears it only after its
        # clear_after (2 h): it does not flap, nothing to hold back.
        "hold_minutes": 0,
        "remind_minutes": 0,  # advice is not an incident: the console keeps it in view
    },
    {
        "name": "Deallocation storm",
        "kind": "dealloc",
        # The advisor's own critical rate (seed 000, Dalibo: act above ~10 dealloc/s); at creation the
        # organization's override of it, when it has one.
        "dealloc_per_s": DEALLOC_CRITICAL_PER_S,
        "dealloc_minutes": 15,  # most of a quarter hour: a burst of new statements after a deploy is not a storm
        "hold_minutes": 5,
        "remind_minutes": 240,
    },
    {
        "name": "Statement regression",
        "kind": "regression",
        # Twice its usual mean time: well above the day-to-day noise of a mean over an hour (the statements page
        # marks 1.5 for a reader's attention; a notification needs more).
        "regression_factor": 2.0,
        # 5% of the server's time in the hour: at most 20 statements qualify, a rare slow one never does.
        "regression_min_share": 0.05,
        # A week of the same hour: each weekday once, so that the median is an ordinary day even with a weekly batch.
        "regression_days": 7,
        "hold_minutes": 15,  # the last hour's mean moves slowly: a quarter hour of evaluations agreeing
        "remind_minutes": 0,
    },
)
