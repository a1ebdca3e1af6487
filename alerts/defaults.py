"""The rules every organization starts with, one per kind: how long each holds back and reminds, and why. Their
thresholds start at the defaults declared with them (alerts/rule_fields.py, with the reason for each). An admin
changes them (or disables one) rather than deleting: an organization left with no rule at all gets these again."""

from alerts.rule_fields import of_kind

_RULES: tuple[dict, ...] = (
    {
        "name": "Server down",
        "kind": "server_down",
        "hold_minutes": 0,  # down_minutes is already how long it has to last
        "remind_minutes": 240,  # an outage nobody acknowledged is asked about again within a shift
    },
    {
        "name": "Critical advice",
        "kind": "advisor",
        # The advisor raises a recommendation from an hour and more of evidence and clears it only after its
        # clear_after (2 h): it does not flap, nothing to hold back.
        "hold_minutes": 0,
        "remind_minutes": 0,  # advice is not an incident: the console keeps it in view
    },
    {
        "name": "Deallocation storm",
        "kind": "dealloc",
        "hold_minutes": 5,
        "remind_minutes": 240,
    },
    {
        "name": "Statement regression",
        "kind": "regression",
        "hold_minutes": 15,  # the last hour's mean moves slowly: a quarter hour of evaluations agreeing
        "remind_minutes": 0,
    },
)

DEFAULT_RULES: tuple[dict, ...] = tuple(
    {**rule, **{f.name: f.default for f in of_kind(rule["kind"])}} for rule in _RULES
)
