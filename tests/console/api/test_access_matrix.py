"""Who may call what: every route of the API with every kind of caller — anonymous, each role of acme, a DBA's
read-only token, an admin of another organization, console staff in and out of acme, and a superuser — against
one small world. A route the matrix does not list fails the suite, so a new endpoint cannot escape it; a refused
call must leave everything as it was."""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from advisor import advice as found
from advisor.models import Recommendation, RecommendationEvent
from advisor.services import recommendations_apply
from alerts.models import Alert, Channel, Delivery, Rule
from alerts.services import channel_create, rules_default
from bench import synthetic
from collectors.queued_checks import check_queue
from collectors.services import server_collect
from collectors.tasks import track
from console.services import organizations_delete
from exports.models import AuditExport
from history.models import Statement
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization, Server
from inventory.services import server_create
from tests.api_world import ApiWorld, assert_error, build_api_world
from tests.console.api.schema_check import CheckedClient
from tests.plans_world import report_plan, store
from tests.world import history_counts

pytestmark = pytest.mark.django_db
UNREACHABLE = "postgresql://m:pw@127.0.0.1:1/app"  # refused at once: no access decision may wait on it
NOT_IN_MATRIX = {
    "api-schema",
    "api-docs",
    "api-export-schema",
}  # not /api/v1/: anonymous 401 is checked below, roles do not apply
CALLERS = ["anonymous", "viewer", "dba", "admin", "dba-read-only", "outsider", "staff", "staff-viewer", "superuser"]
# is_staff (the admin site's login) gives nothing in the API: a staff user is what their memberships make them (a DBA
# of other only: an outsider; a viewer of acme: a viewer). A superuser, the console's administrator, is an admin.
TREATED_AS = {"staff": "outsider", "staff-viewer": "viewer", "superuser": "admin"}


@dataclass(frozen=True)
class Call:
    route: str
    method: str = "get"
    ok: int = 200  # the status of a caller who may
    body: str | None = None  # a key of _bodies()
    changes: bool = False  # a successful call changes acme's state
    outsider: int | None = None  # default: 404 for an acme object's URL, `ok` for a list (without acme's rows)
    viewer: int | None = None  # a read a viewer may not make (an export's file: 403)
    dba: int | None = None  # a write only admins make (alerting's configuration: 403)

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.route}"

    @property
    def write(self) -> bool:
        return self.method != "get"


MATRIX = [
    Call("api-organizations"),
    Call("api-fleet"),
    Call("api-servers"),
    # The organization is in the body: a field error, the same as for an organization that does not exist.
    Call("api-servers", "post", 201, body="create", changes=True, outsider=400),
    Call("api-server"),
    Call("api-server", "put", body="put", changes=True),
    Call("api-server", "patch", body="patch", changes=True),
    Call("api-server", "delete", 204, changes=True),
    Call("api-server-test", "post", 202),
    Call("api-server-collect", "post", 202),
    Call("api-server-snapshots"),
    Call("api-server-snapshot-latest"),
    Call("api-server-errors"),
    Call("api-server-tables"),
    Call("api-server-indexes"),
    Call("api-task"),
    Call("api-check", viewer=403),  # a viewer may not test a connection, nor read what a test found
    Call("api-server-statements"),
    Call("api-server-series"),
    Call("api-organization-statements"),
    Call("api-statement"),
    Call("api-statement-series"),
    Call("api-statement-waits"),
    Call("api-statement-plans"),
    Call("api-statement-plans", "post", 202),  # a fresh EXPLAIN costs the monitored server: DBAs and admins
    Call("api-statement-plan"),
    Call("api-recommendations"),
    Call("api-recommendation"),
    Call("api-recommendation-acknowledge", "post", changes=True),
    Call("api-recommendation-resolve", "post", changes=True),
    Call("api-exports"),
    Call("api-exports", "post", 202, body="export", changes=True, outsider=400),
    Call("api-export"),
    Call("api-export-download", viewer=403),
    Call("api-alert-channels"),
    Call("api-alert-channels", "post", 201, body="channel", changes=True, dba=403),
    Call("api-alert-channel"),
    Call("api-alert-channel", "delete", 204, changes=True, dba=403),
    Call("api-alert-channel-test", "post", 202, changes=True, dba=403),
    Call("api-alert-channel-deliveries"),
    Call("api-alert-rules"),
    Call("api-alert-rule"),
    Call("api-alert-rule", "patch", body="rule", changes=True, dba=403),
    Call("api-alerts"),
    Call("api-alert"),
    Call("api-alert-acknowledge", "post", changes=True),
]


@functools.cache
def api_routes() -> dict[str, tuple[set[str], set[str]]]:
    """name -> (path parameters, methods) of every route under /api/, from the URL resolver."""
    out = {}

    def walk(patterns, prefix: str, converters: dict) -> None:
        for p in patterns:
            here = prefix + str(p.pattern)
            params = {**converters, **p.pattern.converters}
            if isinstance(p, URLResolver):
                walk(p.url_patterns, here, params)
            elif isinstance(p, URLPattern) and here.startswith("api/"):
                view = getattr(p.callback, "view_class", None)
                methods = {m for m in getattr(view, "http_method_names", ["?"]) if hasattr(view, m)}
                out[p.name or f"(unnamed) {here}"] = (set(params), methods - {"options", "head"})

    walk(get_resolver().url_patterns, "", {})
    return out


@dataclass
class MatrixWorld:
    api: ApiWorld
    server: Server  # acme-db: snapshots, statements, a recommendation; its host refuses connections
    ids: dict  # path parameter -> acme's object

    def url(self, route: str) -> str:
        params, _ = api_routes()[route]
        return reverse(route, kwargs={p: self.ids[p] for p in params})


def _build() -> MatrixWorld:
    """acme: a server with three snapshots and a recommendation, a tracked collection; other: a server with
    a recommendation (so that the outsider's lists are not empty); a user per role."""
    api = build_api_world()
    acme, other = api.acme, api.other
    server = server_create(name="acme-db", connection=parse_dsn(UNREACHABLE), organization_name="acme")
    theirs = server_create(name="other-db", connection=parse_dsn(UNREACHABLE), organization_name="other")
    # Three snapshots of a synthetic reading (nothing connects): statements, series and a latest snapshot.
    synth = synthetic.SyntheticServer(n=12, change_fraction=0.5, start=timezone.now() - timedelta(minutes=10))
    with synthetic.reading_from(synth):
        for _ in range(3):
            synth.step()
            assert server_collect(server_id=server.pk).ok
    for s in (server, theirs):
        finding = found.Advice(
            rule="pgss_max",
            severity="critical",
            server=s.name,
            subject="server",
            title=f"{s.name} deallocates",
            explanation="dealloc 40/s",
        )
        recommendations_apply(server=s, found_now=[finding], now=timezone.now(), clear_after=timedelta(hours=2))
    from exports.models import AuditExport
    from exports.services import audit_export_build, export_spec
    from readtier import Window

    window = Window(timezone.now() - timedelta(hours=1), timezone.now())
    for org, s in ((acme, server), (other, theirs)):
        spec = export_spec(organization_id=org.pk, server_ids=[s.pk], window=window, formats=["json"])
        e = AuditExport.objects.create(
            organization=org,
            server_ids=spec.server_ids,
            window_start=window.start,
            window_end=window.end,
            formats=spec.formats,
        )
        audit_export_build(export_id=e.pk)
        if org == acme:
            export_id = e.pk
    for org, s in ((acme, server), (other, theirs)):  # a channel, the default rules and an open alert each
        channel = channel_create(organization=org, name=f"{org.name}-mail", kind="email", addresses=["a@b.example"])
        rule = rules_default(organization=org)[0]
        now = timezone.now()
        alert = Alert.objects.create(
            rule=rule,
            server=s,
            key="down",
            state="open",
            since=now,
            first_true_at=now,
            last_true_at=now,
            opened_at=now,
            severity="critical",
            title=f"{s.name} is down",
            summary="",
            path="/",
        )
        if org == acme:
            alerting = {"channel_id": channel.channel.pk, "rule_id": rule.pk, "alert_id": alert.pk}
    task_id = str(uuid.uuid4())
    track(task_id, server.pk, "queued")  # what POST .../collect/ leaves for its caller to poll
    check = check_queue(
        organization_id=acme.pk,
        server_id=server.pk,
        endpoint=server.endpoint,
        password="pw",
        enqueue=lambda check_id: None,
    )  # what POST .../test/ leaves (no worker takes it)
    statement_id = Statement.objects.filter(server=server).order_by("pk").first().pk
    fingerprint = store(server.pk, statement_id, report_plan(indexed=True), timezone.now())  # a plan of it
    ids = {
        "server_id": server.pk,
        "organization_id": acme.pk,
        "statement_id": statement_id,
        "fingerprint": fingerprint,
        "recommendation_id": Recommendation.objects.get(server=server).pk,
        "task_id": task_id,
        "check_id": check.check_id,
        "export_id": export_id,
        **alerting,
    }
    User = get_user_model()
    api.users["staff"] = User.objects.create_user("staff", password="x", is_staff=True)
    Membership.objects.create(organization=other, user=api.users["staff"], role="dba")
    api.users["staff-viewer"] = User.objects.create_user("staff-viewer", password="x", is_staff=True)
    Membership.objects.create(organization=acme, user=api.users["staff-viewer"], role="viewer")
    api.users["superuser"] = User.objects.create_user("superuser", password="x", is_staff=True, is_superuser=True)
    return MatrixWorld(api, Server.objects.get(pk=server.pk), ids)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Built once for the module (committed; each test's own writes are rolled back) and removed after it."""
    with django_db_blocker.unblock():
        try:
            yield _build()
        finally:  # also after a setup that failed half-way: the next modules expect an empty database
            organizations_delete(organizations=Organization.objects.filter(name__in=["acme", "other"]))
            users = ["viewer", "dba", "admin", "outsider", "staff", "staff-viewer", "superuser"]
            get_user_model().objects.filter(username__in=users).delete()


def _bodies(world: MatrixWorld) -> dict:
    destination = {"host": "127.0.0.1", "port": 1, "database": "app", "user": "m"}
    return {
        "create": {"organization": world.api.acme.pk, "name": "acme-db-2", **destination},
        "put": {"name": "acme-db", **destination, "interval_s": 120},
        "patch": {"interval_s": 30, "tags": ["prod"]},
        "export": {
            "organization": world.api.acme.pk,
            "window_start": (timezone.now() - timedelta(hours=1)).isoformat(),
            "window_end": timezone.now().isoformat(),
        },
        "channel": {"name": "oncall", "kind": "email", "addresses": ["oncall@acme.example"]},
        "rule": {"hold_minutes": 7},
    }


def _client(world: MatrixWorld, caller: str) -> CheckedClient:
    if caller == "anonymous":
        return CheckedClient()
    if caller == "dba-read-only":
        return world.api.client("dba", read_only=True)
    return world.api.client(caller)


def _send(client, call: Call, url: str, body: dict | None):
    if body is None:
        return getattr(client, call.method)(url)
    return getattr(client, call.method)(url, json.dumps(body), content_type="application/json")


def acme_state(world: MatrixWorld) -> dict:
    """Everything of acme a write could touch: its servers' rows, recommendations, events, history, members."""
    acme = world.api.acme
    return {
        "servers": list(Server.objects.filter(organization=acme).order_by("pk").values()),
        "recommendations": list(Recommendation.objects.filter(server__organization=acme).order_by("pk").values()),
        "events": RecommendationEvent.objects.filter(recommendation__server__organization=acme).count(),
        "history": history_counts(world.server),
        "members": list(Membership.objects.filter(organization=acme).order_by("pk").values()),
        "exports": list(AuditExport.objects.filter(organization=acme).order_by("pk").values_list("pk", flat=True)),
        "alert_channels": list(Channel.objects.filter(organization=acme).order_by("pk").values()),
        "alert_rules": list(Rule.objects.filter(organization=acme).order_by("pk").values()),
        "alerts": list(Alert.objects.filter(rule__organization=acme).order_by("pk").values()),
        "deliveries": Delivery.objects.filter(channel__organization=acme).count(),
    }


def expected(call: Call, caller: str) -> tuple[int, str | None]:
    """(status, error code) the matrix promises for `caller` on `call`."""
    caller = TREATED_AS.get(caller, caller)
    if caller == "anonymous":
        return 401, "not_authenticated"
    if caller == "outsider":
        params, _ = api_routes()[call.route]
        status = call.outsider or (404 if params else call.ok)
        return status, {400: "invalid", 404: "not_found"}.get(status)
    if caller == "viewer" and call.viewer is not None:
        return call.viewer, "permission_denied"
    if caller == "dba" and call.dba is not None:
        return call.dba, "permission_denied"
    if not call.write:
        return call.ok, None
    if caller == "viewer":
        return 403, "permission_denied"
    if caller == "dba-read-only":
        return 403, "read_only_token"
    return call.ok, None


def test_the_matrix_covers_every_route():
    routes = {name: methods for name, (_, methods) in api_routes().items() if name not in NOT_IN_MATRIX}
    covered: dict[str, set[str]] = {}
    for call in MATRIX:
        covered.setdefault(call.route, set()).add(call.method)
    assert routes == covered, "a route or method of the API is missing from (or stale in) the access matrix"
    assert len(MATRIX) == len({str(c) for c in MATRIX})


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("call", MATRIX, ids=str)
def test_access(world, call, caller):
    before = acme_state(world)
    body = _bodies(world)[call.body] if call.body else None
    response = _send(_client(world, caller), call, world.url(call.route), body)
    status, code = expected(call, caller)
    if status >= 400:
        errors = assert_error(response, status, code)["errors"]
        if status == 400:
            assert set(errors) == {"organization"}, errors
        assert acme_state(world) == before, "a refused call changed something"
        return
    assert response.status_code == status, response.content
    content = response.content.decode(errors="replace") if status != 204 else ""
    if TREATED_AS.get(caller, caller) == "outsider":
        # A list: the outsider's own rows ("other"), none of acme's.
        assert "acme" not in content and "other" in content, content
    elif not api_routes()[call.route][0]:
        assert "acme" in content, content  # a list: acme's own rows
    if call.route == "api-server-test":
        polled = _client(world, caller).get(response.json()["status_url"])  # no worker: it stays queued
        assert polled.status_code == 200 and polled.json()["status"] == "queued", polled.content
    if call.route == "api-server-collect":
        polled = _client(world, caller).get(response.json()["status_url"])  # no worker: it stays queued
        assert polled.status_code == 200 and polled.json()["server_id"] == world.server.pk, polled.content
    if call.changes:
        assert acme_state(world) != before, "the call succeeded but changed nothing"
    else:
        assert acme_state(world) == before, "a call that should change nothing changed something"


@pytest.mark.parametrize(
    ("route", "filters"),
    [
        ("api-fleet", {"organization": "organization_id"}),
        ("api-servers", {"organization": "organization_id"}),
        ("api-recommendations", {"organization": "organization_id"}),
        ("api-recommendations", {"server": "server_id"}),
    ],
)
@pytest.mark.parametrize("caller", ["outsider", "staff"])
def test_an_outsider_filtering_a_list_by_acme_finds_nothing(world, route, filters, caller):
    query = {name: world.ids[param] for name, param in filters.items()}
    response = world.api.client(caller).get(world.url(route), query)
    assert response.status_code == 200 and response.json()["count"] == 0, response.content


@pytest.mark.parametrize("route", sorted(NOT_IN_MATRIX))
def test_the_schema_and_docs_need_a_login(world, route):
    response = CheckedClient().get(reverse(route))
    assert response.status_code == 401 and b"/api/v1/" not in response.content, response.content
