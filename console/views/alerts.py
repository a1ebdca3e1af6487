"""An organization's alerts in the console, three pages every member reads (anyone else gets a 404): its alerts
(what is going on first, then the recent history; DBAs and admins acknowledge one), its channels (how each one's
deliveries go, failing ones said plainly; admins add one of each kind, send a test, delete one, and see a
webhook's signing secret once, in the answer to its creation) and its rules (admins change the thresholds, with
each refusal under its field; others read them). Read through alerts.selectors, written through alerts.services,
as the API does."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from accounts.access import CONFIGURE, MANAGE_SERVERS, organization_for, require_role, role_in
from alerts import rule_fields, selectors, services
from alerts import tasks as alert_tasks
from alerts.models import Alert, Channel, Rule
from console import throttling
from console.views.common import render_page
from inventory.models import Organization

KIND_LABELS = {
    Channel.Kind.EMAIL: "Email",
    Channel.Kind.SLACK: "Slack",
    Channel.Kind.PAGERDUTY: "PagerDuty",
    Channel.Kind.WEBHOOK: "Webhook",
}
TARGET_LABELS = {
    Channel.Kind.SLACK: ("Incoming webhook URL", "https://hooks.slack.com/services/… (Slack app → Incoming Webhooks)"),
    Channel.Kind.PAGERDUTY: ("Routing key", "the 32 letters and digits of an Events API v2 integration"),
    Channel.Kind.WEBHOOK: ("URL", "https://…: each request is signed with a secret shown once, when it is added"),
}


class ChannelForm(forms.Form):
    """A new channel of one kind (each kind has its own form on the page, prefixed by the kind)."""

    name = forms.CharField(max_length=100)
    # Never shown back (render_value off): a Slack URL or a routing key is a credential, even on a refused form.
    target = forms.CharField(max_length=2000, widget=forms.PasswordInput(attrs={"autocomplete": "off"}))
    addresses = forms.CharField(
        label="Addresses", widget=forms.Textarea(attrs={"rows": 3}), help_text="One per line: who receives the mails."
    )

    def __init__(self, *args, kind: str, **kwargs):
        super().__init__(*args, prefix=kind, **kwargs)
        self.kind = kind
        if kind == Channel.Kind.EMAIL:
            del self.fields["target"]
        else:
            del self.fields["addresses"]
            label, help_text = TARGET_LABELS[kind]
            self.fields["target"].label, self.fields["target"].help_text = label, help_text


def _setting_field(f: rule_fields.RuleField) -> forms.Field:
    """The form's field for a setting of a rule. Its range is left to the rule (Rule.clean): the page and the API
    refuse a value in the same words."""
    if f.choices:
        return forms.ChoiceField(choices=f.choices, label=f.label, help_text=f.help_text)
    number = forms.IntegerField if f.value_type is int else forms.FloatField
    return number(label=f.label, help_text=f.help_text)


class RuleForm(forms.Form):
    """A rule's settings: those every kind has, and the thresholds of its own kind only (both from
    alerts.rule_fields, added per rule)."""

    enabled = forms.BooleanField(required=False)
    tag = forms.CharField(
        required=False, max_length=100, help_text="Only the servers with this tag; empty: every server."
    )
    channels = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: every enabled channel."
    )

    def __init__(self, *args, rule: selectors.RuleRow, channels: list[selectors.ChannelRow], **kwargs):
        own = [f for f in rule_fields.FIELDS if f.kind in (None, rule.kind)]
        initial = {"enabled": rule.enabled, "tag": rule.tag, "channels": [str(i) for i in rule.channel_ids]}
        initial |= {f.name: rule.values[f.name] for f in own}
        super().__init__(*args, prefix=f"rule-{rule.id}", initial=initial, **kwargs)
        self.rule = rule
        self.fields |= {f.name: _setting_field(f) for f in own}
        self.fields["channels"].choices = [(str(c.id), f"{c.name} ({c.kind})") for c in channels]

    def threshold_fields(self) -> list:
        return [self[name] for name in self.rule.thresholds]


# -- alerts ------------------------------------------------------------------------------------------------------


def alerts(request: HttpRequest, organization_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    role = role_in(request.user, org.pk)
    active, resolved = selectors.alerts_overview(organization_id=org.pk)
    context = {
        "organization": org,
        "role": role,
        "can_acknowledge": role in MANAGE_SERVERS,
        "active": active,
        "resolved": resolved,
        "section": "alerts",
    }
    return render_page(request, "console/alerts.html", context, fragment="alerts-list")


@require_POST
def alert_acknowledge(request: HttpRequest, organization_id: int, alert_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    require_role(request.user, org.pk, MANAGE_SERVERS)
    found = selectors.alert_detail(alert_id=alert_id, organization_ids=[org.pk])
    if found is None:
        raise Http404("no such alert")
    title = truncatechars(f"{found.server}: {found.title}", 120)
    try:
        services.alert_acknowledge(alert=Alert.objects.get(pk=found.id), user=request.user)
    except ValidationError as exc:
        messages.error(request, f"{title}: {' '.join(exc.messages)}.")
    else:
        messages.success(request, f"{title} is acknowledged: no more reminders (its resolution is still sent).")
    return redirect("alerts", org.pk)


# -- channels ----------------------------------------------------------------------------------------------------


def channels(request: HttpRequest, organization_id: int) -> HttpResponse:
    """GET: the page; POST (admins): a new channel, whose kind is the posted `kind`. A webhook's signing secret
    is shown in the answer to that POST only: a redirect would have to keep it somewhere (a message is a cookie)
    until the next page."""
    org = organization_for(request.user, organization_id)
    forms_by_kind = {kind: ChannelForm(kind=kind) for kind in Channel.Kind.values}
    if request.method != "POST":
        return _channels_page(request, org, forms_by_kind)
    require_role(request.user, org.pk, CONFIGURE)
    kind = request.POST.get("kind", "")
    if kind not in forms_by_kind:
        messages.error(request, f"No channel was added: {kind!r} is not a kind of channel.")
        return _channels_page(request, org, forms_by_kind, status=400)
    form = forms_by_kind[kind] = ChannelForm(request.POST, kind=kind)
    if form.is_valid():
        data = form.cleaned_data
        try:
            made = services.channel_create(
                organization=org,
                name=data["name"],
                kind=kind,
                target=data.get("target", ""),
                addresses=[a for a in data.get("addresses", "").replace(",", "\n").splitlines() if a.strip()],
                user=request.user,
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            if made.signing_secret is None:
                messages.success(request, f"The channel {made.channel.name} is added: send it a test below.")
                return redirect("alert-channels", org.pk)
            forms_by_kind[kind] = ChannelForm(kind=kind)
            created = {"name": made.channel.name, "secret": made.signing_secret}
            return _channels_page(request, org, forms_by_kind, created=created)
    messages.error(request, f"The {KIND_LABELS[kind]} channel was not added: see the errors below.")
    return _channels_page(request, org, forms_by_kind, status=400)


def _channels_page(
    request: HttpRequest, org: Organization, forms_by_kind: dict, *, created: dict | None = None, status: int = 200
) -> HttpResponse:
    role = role_in(request.user, org.pk)
    rows = selectors.alert_channels(organization_id=org.pk)
    recent = selectors.recent_deliveries(channel_ids=[c.id for c in rows])
    context = {
        "organization": org,
        "role": role,
        "can_configure": role in CONFIGURE,
        "sees_addresses": role in MANAGE_SERVERS,  # as the weekly report's recipients
        "channels": [(c, recent.get(c.id, [])) for c in rows],
        "forms": [(KIND_LABELS[kind], form) for kind, form in forms_by_kind.items()],
        "created": created,
        "section": "channels",
    }
    response = render_page(request, "console/alerts_channels.html", context, status=status)
    response["Cache-Control"] = "no-store"  # the answer to a webhook's creation holds its signing secret
    return response


def _configured_channel(request: HttpRequest, organization_id: int, channel_id: int) -> tuple[Organization, Channel]:
    org = organization_for(request.user, organization_id)
    require_role(request.user, org.pk, CONFIGURE)
    channel = Channel.objects.select_related("organization").filter(pk=channel_id, organization=org).first()
    if channel is None:
        raise Http404("no such alert channel")
    return org, channel


@require_POST
def channel_test(request: HttpRequest, organization_id: int, channel_id: int) -> HttpResponse:
    org, channel = _configured_channel(request, organization_id, channel_id)
    scope, what = throttling.test_rate(channel.kind)  # someone else's service, or up to 50 mails
    if wait := throttling.wait_s(request, scope):
        messages.error(request, f"Too many {what}: try again in {throttling.wait_text(wait)}.")
        return redirect(reverse("alert-channels", args=[org.pk]) + f"#channel-{channel.pk}")
    delivery = services.channel_send_test(channel=channel, enqueue=lambda pk: alert_tasks.deliver.delay(pk))
    messages.success(
        request, f"A test is on its way to {channel.name} (delivery #{delivery.pk}): its outcome shows below."
    )
    return redirect(reverse("alert-channels", args=[org.pk]) + f"#channel-{channel.pk}")


@require_POST
def channel_delete(request: HttpRequest, organization_id: int, channel_id: int) -> HttpResponse:
    org, channel = _configured_channel(request, organization_id, channel_id)
    name = channel.name
    try:
        services.channel_delete(channel=channel)
    except ValidationError as exc:
        messages.error(request, f"{name} was not deleted: {' '.join(exc.messages)}.")
    else:
        messages.success(request, f"The channel {name} is deleted, with the record of its deliveries.")
    return redirect("alert-channels", org.pk)


# -- rules -------------------------------------------------------------------------------------------------------


def rules(request: HttpRequest, organization_id: int) -> HttpResponse:
    return _rules_page(request, organization_for(request.user, organization_id))


def _rules_page(request: HttpRequest, org: Organization, bound: RuleForm | None = None) -> HttpResponse:
    role = role_in(request.user, org.pk)
    can_configure = role in CONFIGURE
    rows = selectors.alert_rules(organization_id=org.pk)
    chans = selectors.alert_channels(organization_id=org.pk) if can_configure else []
    forms_by_rule = {}
    if can_configure:
        forms_by_rule = {r.id: RuleForm(rule=r, channels=chans) for r in rows}
        if bound is not None:
            forms_by_rule[bound.rule.id] = bound
    context = {
        "organization": org,
        "role": role,
        "can_configure": can_configure,
        # Each rule with its form (admins) or its thresholds as (label, value) to read.
        "rules": [(r, forms_by_rule.get(r.id), _shown(r)) for r in rows],
        "section": "rules",
    }
    return render_page(request, "console/alerts_rules.html", context, status=200 if bound is None else 400)


def _shown(rule: selectors.RuleRow) -> list[tuple[str, object]]:
    return [(rule_fields.BY_NAME[name].label, rule.values[name]) for name in rule.thresholds]


@require_POST
def rule_update(request: HttpRequest, organization_id: int, rule_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    require_role(request.user, org.pk, CONFIGURE)
    found = selectors.alert_rule(rule_id=rule_id, organization_ids=[org.pk])
    if found is None:
        raise Http404("no such alert rule")
    form = RuleForm(request.POST, rule=found, channels=selectors.alert_channels(organization_id=org.pk))
    if form.is_valid():
        values = dict(form.cleaned_data)
        channel_ids = [int(i) for i in values.pop("channels")]
        try:
            services.rule_update(rule=Rule.objects.get(pk=found.id), values=values, channel_ids=channel_ids)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"The rule {found.name} is saved.")
            return redirect(reverse("alert-rules", args=[org.pk]) + f"#rule-{found.id}")
    messages.error(request, f"The rule {found.name} was not saved: see the errors below.")
    return _rules_page(request, org, bound=form)


urlpatterns = [
    path("organizations/<int:organization_id>/alerts/", alerts, name="alerts"),
    path(
        "organizations/<int:organization_id>/alerts/<int:alert_id>/acknowledge/",
        alert_acknowledge,
        name="alert-acknowledge",
    ),
    path("organizations/<int:organization_id>/alerts/channels/", channels, name="alert-channels"),
    path(
        "organizations/<int:organization_id>/alerts/channels/<int:channel_id>/test/",
        channel_test,
        name="alert-channel-test",
    ),
    path(
        "organizations/<int:organization_id>/alerts/channels/<int:channel_id>/delete/",
        channel_delete,
        name="alert-channel-delete",
    ),
    path("organizations/<int:organization_id>/alerts/rules/", rules, name="alert-rules"),
    path("organizations/<int:organization_id>/alerts/rules/<int:rule_id>/", rule_update, name="alert-rule-update"),
]
