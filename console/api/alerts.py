"""/api/v1/: an organization's alert channels, rules and alerts. Any member reads them (a channel as its kind,
its URL's host and how its deliveries went: never its secret); a DBA or admin acknowledges an alert; an admin
adds, tests and deletes channels and changes rules. Read through alerts.selectors, written through
alerts.services: the console's alert pages show and do the same.

One module over 400 lines: the endpoints of one resource (an organization's alerting: channels, rules, alerts) with
the serializers that are their contract, next to the view that answers with them, as Django REST framework writes an
API; the OpenAPI schema is built from them together."""

from __future__ import annotations

from django.core.exceptions import ValidationError as ModelValidationError
from django.http import Http404
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import CONFIGURE, MANAGE_SERVERS, organization_for, require_role, role_in
from accounts.access import visible_organization_ids as visible
from advisor.models import Severity
from alerts import rule_fields, selectors, services
from alerts import tasks as alert_tasks
from alerts.models import Alert, Channel, Delivery, Rule
from console.api.common import PAGE_PARAMETERS, api, field_names, page_of, page_params, page_schema, paged
from console.api.errors import error_response
from console.api.throttling import page_rate
from console.throttling import test_rate

# Admins configure an organization's alerting (the role that manages its members); DBAs act on alerts.


class ChannelOut(serializers.Serializer):
    id = serializers.IntegerField()
    organization_id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=Channel.Kind.values)
    target_host = serializers.CharField(
        allow_null=True, help_text="a Slack or webhook URL's host only; null for PagerDuty and email (never a secret)"
    )
    addresses = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="an email channel's recipients, for its DBAs and admins (null for a viewer and for other kinds)",
    )
    enabled = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    failing = serializers.BooleanField(help_text="its last delivery failed for good")
    consecutive_failures = serializers.IntegerField(help_text="deliveries failed since the last one delivered")
    last_error = serializers.CharField(allow_blank=True)
    last_delivered_at = serializers.DateTimeField(allow_null=True)
    deliveries_url = serializers.CharField()


class ChannelCreatedOut(ChannelOut):
    signing_secret = serializers.CharField(
        allow_null=True,
        help_text="a webhook's key for X-Pgconsole-Signature (HMAC-SHA256): shown this once, never again",
    )


class ChannelIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=Channel.Kind.values)
    target = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=2000,
        write_only=True,
        help_text="Slack: its incoming webhook URL; PagerDuty: the Events API v2 routing key; webhook: the https URL. "
        "Stored encrypted and never shown again.",
    )
    addresses = serializers.ListField(
        child=serializers.CharField(max_length=254),
        required=False,
        default=list,
        max_length=50,
        help_text="email: the recipients",
    )


class DeliveryOut(serializers.Serializer):
    id = serializers.IntegerField()
    channel_id = serializers.IntegerField()
    alert_id = serializers.IntegerField(allow_null=True, help_text="null: a test")
    event = serializers.ChoiceField(choices=Delivery.Event.values)
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=Delivery.Status.values)
    attempts = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True, help_text="the receiver's HTTP status")
    last_error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)


class TestOut(serializers.Serializer):
    delivery_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Delivery.Status.values)
    deliveries_url = serializers.CharField(help_text="GET it to follow the delivery")


def _rule_settings(*, described: bool) -> dict[str, serializers.Field]:
    """A serializer field per setting of a rule (alerts.rule_fields), in their order, with its help for the API's
    reader when `described` (RuleOut's; RuleIn's are the same fields). Their ranges are the rule's to check: the
    API and the page refuse a value in the same words."""
    out: dict[str, serializers.Field] = {}
    for f in rule_fields.FIELDS:
        help_text = f.api_help_text if described else None
        if f.choices:
            out[f.name] = serializers.ChoiceField(choices=[v for v, _ in f.choices], help_text=help_text)
        elif f.value_type is int:
            out[f.name] = serializers.IntegerField(help_text=help_text)
        else:
            out[f.name] = serializers.FloatField(help_text=help_text)
    return out


RuleOut: type[serializers.Serializer] = type(
    "RuleOut",
    (serializers.Serializer,),
    {
        "id": serializers.IntegerField(),
        "organization_id": serializers.IntegerField(),
        "name": serializers.CharField(),
        "kind": serializers.ChoiceField(choices=Rule.Kind.values),
        "enabled": serializers.BooleanField(),
        "tag": serializers.CharField(allow_blank=True, help_text="the servers with this tag; empty: every server"),
        "channels": serializers.ListField(
            child=serializers.IntegerField(), help_text="ids; empty: every enabled channel"
        ),
        "thresholds": serializers.ListField(child=serializers.CharField(), help_text="the fields below its kind reads"),
        **_rule_settings(described=True),
    },
)

RuleIn: type[serializers.Serializer] = type(
    "RuleIn",
    (serializers.Serializer,),
    {
        "__doc__": "Every field optional (PATCH); ranges are checked by the rule itself, each refusal under its field.",
        "name": serializers.CharField(max_length=100),
        "enabled": serializers.BooleanField(),
        "tag": serializers.CharField(max_length=100, allow_blank=True),
        "channels": serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=100),
        **_rule_settings(described=False),
    },
)


class AlertOut(serializers.Serializer):
    id = serializers.IntegerField()
    organization_id = serializers.IntegerField()
    rule_id = serializers.IntegerField()
    rule = serializers.CharField()
    rule_kind = serializers.ChoiceField(choices=Rule.Kind.values)
    server_id = serializers.IntegerField()
    server = serializers.CharField()
    state = serializers.ChoiceField(choices=Alert.State.values)
    severity = serializers.ChoiceField(choices=Severity.values)
    title = serializers.CharField(help_text="may quote a statement's (redacted) text")
    summary = serializers.CharField(allow_blank=True)
    figures = serializers.DictField(help_text="the numbers that raised it")
    change_text = serializers.CharField(allow_blank=True, help_text="the advisor's exact change, where it has one")
    config_changes = serializers.ListField(
        child=serializers.DictField(), help_text="a regression's: {at, setting, before, after}"
    )
    since = serializers.DateTimeField(help_text="when the condition began, as far as the history says")
    opened_at = serializers.DateTimeField(allow_null=True, help_text="null while pending")
    resolved_at = serializers.DateTimeField(allow_null=True)
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(allow_null=True)
    path = serializers.CharField(help_text="the console's page of what raised it")
    dedup_key = serializers.CharField(help_text="PagerDuty's dedup key and the webhook's alert.id")


ChannelPage, DeliveryPage, RulePage, AlertPage = (
    page_schema(s, f"{s.__name__.removesuffix('Out')}Page") for s in (ChannelOut, DeliveryOut, RuleOut, AlertOut)
)


# -- access ------------------------------------------------------------------------------------------------------


def _channel(request, channel_id: int) -> selectors.ChannelRow:
    """The channel if the caller is a member of its organization, else 404 (never 403: it would confirm it)."""
    found = selectors.alert_channel(channel_id=channel_id, organization_ids=visible(request.user))
    if found is None:
        raise Http404("no such alert channel")
    return found


def _rule(request, rule_id: int) -> selectors.RuleRow:
    found = selectors.alert_rule(rule_id=rule_id, organization_ids=visible(request.user))
    if found is None:
        raise Http404("no such alert rule")
    return found


def _alert(request, alert_id: int) -> selectors.AlertRow:
    found = selectors.alert_detail(alert_id=alert_id, organization_ids=visible(request.user))
    if found is None:
        raise Http404("no such alert")
    return found


def _field_errors(exc: ModelValidationError) -> exceptions.ValidationError:
    """A service's refusal in the API's error shape, by field."""
    if hasattr(exc, "error_dict"):
        return exceptions.ValidationError(
            {("non_field_errors" if k == "__all__" else k): v for k, v in exc.message_dict.items()}
        )
    return exceptions.ValidationError({"non_field_errors": exc.messages})


def _object(request) -> dict:
    if not isinstance(request.data, dict):
        raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
    return request.data


# -- output ------------------------------------------------------------------------------------------------------


def _channel_out(c: selectors.ChannelRow, *, sees_addresses: bool) -> dict:
    names = [n for n in field_names(ChannelOut) if n not in ("failing", "addresses", "deliveries_url")]
    out = {n: getattr(c, n) for n in names}
    out["failing"] = c.failing
    out["addresses"] = c.addresses if c.kind == Channel.Kind.EMAIL and sees_addresses else None
    out["deliveries_url"] = reverse("api-alert-channel-deliveries", args=[c.id])
    return out


def _rule_out(r: selectors.RuleRow) -> dict:
    names = [n for n in field_names(RuleOut) if n not in ("channels", "thresholds")]
    out = {n: r.values[n] if n in r.values else getattr(r, n) for n in names}
    return {**out, "channels": r.channel_ids, "thresholds": list(r.thresholds)}


def _out(row, serializer) -> dict:
    return {n: getattr(row, n) for n in field_names(serializer)}


def _offset(request) -> tuple[int, int, int]:
    page, size = page_params(request)
    return page, size, (page - 1) * size


# -- channels ----------------------------------------------------------------------------------------------------


class Channels(APIView):
    @extend_schema(
        operation_id="alert_channels_list",
        parameters=PAGE_PARAMETERS,
        responses=ChannelPage,
        description="The organization's alert channels by name, with how their deliveries go (any member).",
    )
    def get(self, request, organization_id: int):
        org = organization_for(request.user, organization_id)
        sees_addresses = role_in(request.user, org.pk) in MANAGE_SERVERS
        found = selectors.alert_channels(organization_id=org.pk)
        return page_of(found, request, out=lambda c: _channel_out(c, sees_addresses=sees_addresses))

    @extend_schema(
        operation_id="alert_channel_create",
        request=ChannelIn,
        responses={201: ChannelCreatedOut},
        description="Add a channel (admins). Its target is checked (with the reason when refused), stored "
        "encrypted and never shown again; a webhook's signing secret is in this answer only. Refused (400, "
        "non_field_errors) when the organization has its limit of channels already (ALERTS_ORG_MAX_CHANNELS).",
    )
    def post(self, request, organization_id: int):
        org = organization_for(request.user, organization_id)
        require_role(request.user, org.pk, CONFIGURE)
        s = ChannelIn(data=_object(request))
        s.is_valid(raise_exception=True)
        data = s.validated_data
        try:
            made = services.channel_create(
                organization=org,
                name=data["name"],
                kind=data["kind"],
                target=data["target"],
                addresses=data["addresses"],
                user=request.user,
            )
        except ModelValidationError as exc:
            raise _field_errors(exc) from None
        row = selectors.alert_channel(channel_id=made.channel.pk, organization_ids=[org.pk])
        body = {**_channel_out(row, sees_addresses=True), "signing_secret": made.signing_secret}
        return Response(body, status=status.HTTP_201_CREATED)


class ChannelView(APIView):
    @extend_schema(operation_id="alert_channel_read", responses=ChannelOut)
    def get(self, request, channel_id: int):
        c = _channel(request, channel_id)
        return Response(_channel_out(c, sees_addresses=role_in(request.user, c.organization_id) in MANAGE_SERVERS))

    @extend_schema(
        operation_id="alert_channel_delete",
        responses={204: None},
        description="Delete a channel and its deliveries' record (admins); 409 while a rule notifies it alone "
        "(a rule with no channel notifies every channel: choose its channels first).",
    )
    def delete(self, request, channel_id: int):
        c = _channel(request, channel_id)
        require_role(request.user, c.organization_id, CONFIGURE)
        try:
            services.channel_delete(channel=Channel.objects.get(pk=c.id))
        except ModelValidationError as exc:
            return error_response(status.HTTP_409_CONFLICT, "conflict", " ".join(exc.messages))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTest(APIView):
    @extend_schema(
        operation_id="alert_channel_test",
        request=None,
        responses={202: TestOut},
        description="Send a test message through the channel (admins): a worker sends it, retried as an alert "
        "would be; follow it in the channel's deliveries.",
    )
    def post(self, request, channel_id: int):
        c = _channel(request, channel_id)
        require_role(request.user, c.organization_id, CONFIGURE)
        scope, what = test_rate(c.kind)
        page_rate(request, scope, what)
        delivery = services.channel_send_test(
            channel=Channel.objects.select_related("organization").get(pk=c.id),
            enqueue=lambda pk: alert_tasks.deliver.delay(pk),
        )
        body = {
            "delivery_id": delivery.pk,
            "status": delivery.status,
            "deliveries_url": reverse("api-alert-channel-deliveries", args=[c.id]),
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)


class ChannelDeliveries(APIView):
    @extend_schema(
        operation_id="alert_channel_deliveries",
        parameters=PAGE_PARAMETERS,
        responses=DeliveryPage,
        description="The channel's deliveries, newest first: tests and alerts, their attempts and outcome.",
    )
    def get(self, request, channel_id: int):
        c = _channel(request, channel_id)
        page, size, start = _offset(request)
        count, rows = selectors.channel_deliveries(channel_id=c.id, offset=start, limit=size)
        return Response(paged([_out(d, DeliveryOut) for d in rows], count=count, page=page, page_size=size))


# -- rules -------------------------------------------------------------------------------------------------------


class Rules(APIView):
    @extend_schema(
        operation_id="alert_rules_list",
        parameters=PAGE_PARAMETERS,
        responses=RulePage,
        description="The organization's alert rules with their thresholds (any member).",
    )
    def get(self, request, organization_id: int):
        org = organization_for(request.user, organization_id)
        return page_of(selectors.alert_rules(organization_id=org.pk), request, out=_rule_out)


class RuleView(APIView):
    @extend_schema(operation_id="alert_rule_read", responses=RuleOut)
    def get(self, request, rule_id: int):
        return Response(_rule_out(_rule(request, rule_id)))

    @extend_schema(
        operation_id="alert_rule_update",
        request=RuleIn,
        responses=RuleOut,
        description="Change a rule's settings (admins): only the fields given; each value out of its range is "
        "refused under its field, with what would be accepted, and nothing is changed.",
    )
    def patch(self, request, rule_id: int):
        found = _rule(request, rule_id)
        require_role(request.user, found.organization_id, CONFIGURE)
        data = _object(request)
        unknown = sorted(set(data) - set(field_names(RuleIn)))
        if unknown:  # a misspelt threshold must not pass for a change that was made
            raise exceptions.ValidationError({name: ["not a setting of a rule"] for name in unknown})
        s = RuleIn(data=data, partial=True)
        s.is_valid(raise_exception=True)
        values = dict(s.validated_data)
        channel_ids = values.pop("channels", None)
        try:
            services.rule_update(rule=Rule.objects.get(pk=found.id), values=values, channel_ids=channel_ids)
        except ModelValidationError as exc:
            raise _field_errors(exc) from None
        return Response(_rule_out(_rule(request, rule_id)))


# -- alerts ------------------------------------------------------------------------------------------------------


class Alerts(APIView):
    @extend_schema(
        operation_id="alerts_list",
        parameters=[
            OpenApiParameter(
                "state",
                OpenApiTypes.STR,
                enum=list(selectors.STATES),
                description="active: pending and open; default: every state",
            ),
            *PAGE_PARAMETERS,
        ],
        responses=AlertPage,
        description="The organization's alerts, the newest condition first (any member).",
    )
    def get(self, request, organization_id: int):
        org = organization_for(request.user, organization_id)
        state = request.query_params.get("state") or None
        if state is not None and state not in selectors.STATES:
            raise exceptions.ValidationError({"state": [f"{state!r}: one of {', '.join(selectors.STATES)}"]})
        page, size, start = _offset(request)
        count, rows = selectors.alerts_page(organization_id=org.pk, state=state, offset=start, limit=size)
        return Response(paged([_out(a, AlertOut) for a in rows], count=count, page=page, page_size=size))


class AlertView(APIView):
    @extend_schema(operation_id="alert_read", responses=AlertOut)
    def get(self, request, alert_id: int):
        return Response(_out(_alert(request, alert_id), AlertOut))


class AlertAcknowledge(APIView):
    @extend_schema(
        operation_id="alert_acknowledge",
        request=None,
        responses=AlertOut,
        description="Stop the alert's reminders (DBAs and admins); its resolution is still notified. The first "
        "acknowledgement stays; a resolved alert answers 409.",
    )
    def post(self, request, alert_id: int):
        found = _alert(request, alert_id)
        require_role(request.user, found.organization_id, MANAGE_SERVERS)
        try:
            services.alert_acknowledge(alert=Alert.objects.get(pk=found.id), user=request.user)
        except ModelValidationError as exc:
            return error_response(status.HTTP_409_CONFLICT, "conflict", " ".join(exc.messages))
        return Response(_out(_alert(request, alert_id), AlertOut))


urlpatterns = [
    path("organizations/<int:organization_id>/alert-channels/", api(Channels.as_view()), name="api-alert-channels"),
    path("alert-channels/<int:channel_id>/", api(ChannelView.as_view()), name="api-alert-channel"),
    path("alert-channels/<int:channel_id>/test/", api(ChannelTest.as_view()), name="api-alert-channel-test"),
    path(
        "alert-channels/<int:channel_id>/deliveries/",
        api(ChannelDeliveries.as_view()),
        name="api-alert-channel-deliveries",
    ),
    path("organizations/<int:organization_id>/alert-rules/", api(Rules.as_view()), name="api-alert-rules"),
    path("alert-rules/<int:rule_id>/", api(RuleView.as_view()), name="api-alert-rule"),
    path("organizations/<int:organization_id>/alerts/", api(Alerts.as_view()), name="api-alerts"),
    path("alerts/<int:alert_id>/", api(AlertView.as_view()), name="api-alert"),
    path("alerts/<int:alert_id>/acknowledge/", api(AlertAcknowledge.as_view()), name="api-alert-acknowledge"),
]
