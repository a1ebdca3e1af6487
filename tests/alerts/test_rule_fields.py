"""Each setting of an alert rule is declared once (alerts/rule_fields.py) and everything else is built from it: the
Rule model's fields are the declared ones with their types and defaults, Rule.clean refuses a value out of its
declared range with its declared words, the selectors' thresholds per kind, the default rules, the rules' page
form and the API's serializers carry each setting with its declared label, help and type, and a value out of
range is refused under its field by the page and by the API in the declared words."""

from __future__ import annotations

import json

import pytest
from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from rest_framework import serializers

from alerts import selectors
from alerts.defaults import DEFAULT_RULES
from alerts.models import Rule
from alerts.rule_fields import BY_NAME, FIELDS, RuleField, of_kind
from console.api.alerts import RuleIn, RuleOut
from console.views.alerts import RuleForm
from tests.alerts.alerts_world import AlertsWorld, build_alerts
from tests.api_world import assert_error

# The Rule model's fields that are not settings with a range: what a rule is, for whom, and its bookkeeping.
NOT_SETTINGS = {"id", "organization", "name", "kind", "enabled", "tag", "channels", "created_at"}
MODEL_TYPES = {int: models.PositiveIntegerField, float: models.FloatField, str: models.CharField}
FORM_TYPES = {int: forms.IntegerField, float: forms.FloatField, str: forms.ChoiceField}
API_TYPES = {int: serializers.IntegerField, float: serializers.FloatField, str: serializers.ChoiceField}


def refused(f: RuleField) -> list[object]:
    """Values just outside each of the setting's bounds."""
    out: list[object] = []
    if f.choices:
        out.append("urgent")
    if f.more_than is not None:
        out.append(f.value_type(f.more_than))
    if f.at_least is not None:
        out.append(f.value_type(f.at_least - 1))
    if f.at_most is not None:
        out.append(f.value_type(f.at_most + 1))
    return out


def accepted(f: RuleField) -> list[object]:
    """The setting's default and the values on its inclusive bounds."""
    edges = [f.value_type(b) for b in (f.at_least, f.at_most) if b is not None]
    return [f.default, *edges, *(v for v, _ in f.choices)]


def row(kind: str) -> selectors.RuleRow:
    return selectors.RuleRow(
        id=7,
        organization_id=1,
        name=kind,
        kind=kind,
        enabled=True,
        tag="",
        channel_ids=[],
        channels=[],
        values={f.name: f.default for f in FIELDS},
    )


def test_the_rule_models_settings_are_the_declared_ones_with_their_types_and_defaults():
    stored = {f.name: f for f in [*Rule._meta.concrete_fields, *Rule._meta.many_to_many]}
    assert set(stored) - NOT_SETTINGS == set(BY_NAME) and len(BY_NAME) == len(FIELDS)
    for f in FIELDS:
        assert type(stored[f.name]) is MODEL_TYPES[f.value_type], f.name
        assert stored[f.name].get_default() == f.default, f.name
        assert list(stored[f.name].choices or ()) == list(f.choices), f.name
        assert f.kind is None or f.kind in Rule.Kind.values, f.name


def test_every_setting_has_a_range_its_default_and_edges_are_in():
    for f in FIELDS:
        assert refused(f), f"{f.name}: no range"
        assert all(f.accepts(v) for v in accepted(f)), f.name
        assert not any(f.accepts(v) for v in [*refused(f), None]), f.name


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.name)
def test_the_model_refuses_a_value_out_of_range_in_the_declared_words(f):
    kind = f.kind or "server_down"
    for value in refused(f):
        with pytest.raises(ValidationError) as raised:
            Rule(name="r", kind=kind, **{f.name: value}).clean()
        assert raised.value.message_dict == {f.name: [f.refusal]}, value
    for value in accepted(f):
        Rule(name="r", kind=kind, **{f.name: value}).clean()


def test_each_kind_reads_its_declared_thresholds_and_starts_at_their_defaults():
    assert set(selectors.THRESHOLDS) == set(Rule.Kind.values)
    for kind in Rule.Kind.values:
        assert selectors.THRESHOLDS[kind] == tuple(f.name for f in FIELDS if f.kind == kind), kind
    assert {f.name for f in FIELDS if f.kind} == {n for names in selectors.THRESHOLDS.values() for n in names}
    for rule in DEFAULT_RULES:
        declared = of_kind(rule["kind"])
        assert declared and all(rule[f.name] == f.default for f in declared), rule["name"]
        assert set(rule) - {"name", "kind"} <= set(BY_NAME), rule["name"]


@pytest.mark.parametrize("kind", Rule.Kind.values)
def test_the_pages_form_has_every_setting_of_its_kind_with_its_label_and_help(kind):
    form = RuleForm(rule=row(kind), channels=[])
    own = [f for f in FIELDS if f.kind in (None, kind)]
    assert [n for n in form.fields if n in BY_NAME] == [f.name for f in own]
    assert [bf.name for bf in form.threshold_fields()] == [f.name for f in own if f.kind]
    for f in own:
        field = form.fields[f.name]
        assert (field.label, field.help_text) == (f.label, f.help_text), f.name
        assert type(field) is FORM_TYPES[f.value_type], f.name
        assert list(getattr(field, "choices", ())) == list(f.choices), f.name
        assert form.initial[f.name] == f.default, f.name


def test_the_apis_serializers_have_every_setting_with_its_type_and_help():
    out, given = RuleOut().fields, RuleIn().fields
    assert [n for n in out if n in BY_NAME] == [f.name for f in FIELDS] == [n for n in given if n in BY_NAME]
    for f in FIELDS:
        assert type(out[f.name]) is API_TYPES[f.value_type] and type(given[f.name]) is API_TYPES[f.value_type]
        assert out[f.name].help_text == f.api_help_text and given[f.name].help_text is None, f.name
        if f.choices:
            assert list(out[f.name].choices) == list(given[f.name].choices) == [v for v, _ in f.choices]


# -- through the page and the API --------------------------------------------------------------------------------


@pytest.fixture
def world(api_world, settings) -> AlertsWorld:
    return build_alerts(api_world, settings)


def _rule(world: AlertsWorld, f: RuleField) -> Rule:
    return world.rules[f.kind or "server_down"]


def _said(f: RuleField, errors: dict, choice_refused: str) -> None:
    """Refused under the setting's field alone, in its declared words. A choice out of its list is refused by the
    form or the serializer itself, in the framework's words, before the rule is asked; a negative count of minutes
    also gets the model field's own "greater than or equal to 0", as always."""
    assert set(errors) == {f.name}, errors
    if f.choices:
        assert errors[f.name] == [choice_refused], errors
    else:
        assert f.refusal in errors[f.name], errors


@pytest.mark.django_db
def test_the_page_refuses_a_value_out_of_range_under_its_field_in_the_declared_words(world):
    admin = Client()
    admin.force_login(world.api.users["admin"])
    for f in FIELDS:
        rule = _rule(world, f)
        own = {x.name: x.default for x in FIELDS if x.kind in (None, rule.kind)}
        for value in refused(f):
            posted = {f"rule-{rule.pk}-{name}": v for name, v in {**own, f.name: value}.items()}
            response = admin.post(reverse("alert-rule-update", args=[world.api.acme.pk, rule.pk]), posted)
            assert response.status_code == 400, (f.name, value)
            form = next(form for r, form, _ in response.context["rules"] if r.id == rule.pk)
            _said(f, form.errors, "Select a valid choice. urgent is not one of the available choices.")
    page = admin.get(reverse("alert-rules", args=[world.api.acme.pk])).content.decode()
    viewer = Client()
    viewer.force_login(world.api.users["viewer"])
    read = viewer.get(reverse("alert-rules", args=[world.api.acme.pk])).content.decode()
    for f in FIELDS:
        assert escape(f.label) in page and escape(f.help_text) in page, f.name
        if f.kind:  # the read-only page names each threshold by its label
            assert escape(f.label) in read, f.name


@pytest.mark.django_db
def test_the_api_refuses_a_value_out_of_range_under_its_field_in_the_declared_words(world):
    for f in FIELDS:
        rule = _rule(world, f)
        for value in refused(f):
            response = world.api.client("admin").patch(
                f"/api/v1/alert-rules/{rule.pk}/", json.dumps({f.name: value}), content_type="application/json"
            )
            _said(f, assert_error(response, 400, "invalid")["errors"], '"urgent" is not a valid choice.')
