"""A rule's thresholds refused out of their range, each under its field with what is accepted; one unresolved alert
per condition of a rule, however many resolved ones came before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from alerts.models import Alert, Rule
from inventory.models import Organization, Server
from tests.alerts.alerts_world import alert

pytestmark = pytest.mark.django_db
T = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


@pytest.fixture
def org():
    return Organization.objects.create(name="alert-models")


def test_values_out_of_range_are_refused_by_field_with_the_reason(org):
    rule = Rule(
        organization=org,
        name="bad",
        kind="regression",
        hold_minutes=-1,
        down_minutes=0,
        dealloc_per_s=0,
        regression_factor=1.0,
        regression_min_share=1.5,
        regression_days=0,
        min_severity="urgent",
    )
    with pytest.raises(ValidationError) as raised:
        rule.clean()
    errors = raised.value.message_dict
    assert errors == {
        "hold_minutes": ["minutes: 0 or more"],
        "down_minutes": ["at least 1 minute: a single missed collection is not a server down"],
        "dealloc_per_s": ["deallocations per second: more than 0"],
        "regression_factor": ["more than 1 (2 = twice the usual mean time)"],
        "regression_min_share": ["a share of the server's time, from 0 to 1 (0.05 = 5%)"],
        "regression_days": ["from 1 to 28 previous days"],
        "min_severity": ["one of info, warning, critical"],
    }
    Rule(organization=org, name="edges", kind="dealloc", regression_min_share=0, remind_minutes=0).clean()


def _alert(rule: Rule, server: Server, state: str) -> Alert:
    return alert(rule, server, state=state, at=T, key=f"server:{server.pk}")


def test_one_unresolved_alert_per_condition(org):
    rule = Rule.objects.create(organization=org, name="down", kind="server_down")
    server = Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    _alert(rule, server, "resolved")
    _alert(rule, server, "resolved")
    alert = _alert(rule, server, "pending")
    with pytest.raises(IntegrityError), transaction.atomic():
        _alert(rule, server, "open")
    assert alert.dedup_key == f"pgconsole-{rule.pk}-server:{server.pk}"
