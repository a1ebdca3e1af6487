"""The rules every organization starts with: one per kind, each within the ranges an admin's change is held to."""

from alerts.defaults import DEFAULT_RULES
from alerts.models import Rule


def test_one_default_rule_per_kind_each_valid():
    assert sorted(r["kind"] for r in DEFAULT_RULES) == sorted(Rule.Kind.values)
    for values in DEFAULT_RULES:
        Rule(**values).clean()  # raises ValidationError on a value out of range


def test_only_a_server_down_or_a_storm_reminds_and_only_the_noisy_conditions_are_held_back():
    by_kind = {r["kind"]: r for r in DEFAULT_RULES}
    assert {k for k, r in by_kind.items() if r["remind_minutes"]} == {"server_down", "dealloc"}
    assert {k for k, r in by_kind.items() if r["hold_minutes"]} == {"dealloc", "regression"}
    assert by_kind["advisor"]["min_severity"] == "critical" and by_kind["dealloc"]["dealloc_per_s"] == 10.0
