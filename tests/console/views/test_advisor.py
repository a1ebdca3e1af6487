"""The advisor's pages (console/views/advisor.py): the fleet's and a server's active recommendations,
one recommendation with its history, acknowledging and resolving (DBA and admin only), the counts on
the fleet and server pages, and the organization's advisor thresholds. Recommendations are created
through the advisor's own lifecycle service (recommendations_apply), as an evaluation would."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from advisor import advice as found
from advisor.models import Evaluation, Recommendation, RecommendationEvent, Status
from advisor.services import organization_thresholds, recommendations_apply
from advisor.thresholds import Thresholds
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization, Server
from inventory.services import server_create

pytestmark = pytest.mark.django_db
Role = Membership.Role
NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script>"
CHANGE = "ALTER SYSTEM SET pg_stat_statements.max = 10000;"


@dataclass
class World:
    acme: Organization
    other: Organization
    db1: Server  # acme
    db2: Server  # acme
    far: Server  # other
    viewer: User  # acme
    dba: User  # acme
    admin: User  # acme
    stranger: User  # dba of other


def advice(
    rule: str,
    severity: str,
    *,
    subject: str = "server",
    title: str = "",
    explanation: str = "",
    change: str = CHANGE,
    evidence: bool = False,
) -> found.Advice:
    series = ()
    if evidence:
        points = tuple((NOW - timedelta(minutes=10 * (5 - i)), v) for i, v in enumerate([12.0, 15.5, None, 40.0, 38.0]))
        series = (found.EvidenceSeries("dealloc/s", "dealloc/s", points),)
    return found.Advice(
        rule=rule,
        severity=severity,
        server="",
        subject=subject,
        title=title or f"{rule} on {subject}",
        explanation=explanation or f"Why {rule} fires.",
        change=found.Change(change, "restart") if change else None,
        effect="Entries stop being evicted.",
        cost="A restart.",
        evidence=series,
        references=("https://www.postgresql.org/docs/current/pgstatstatements.html", "javascript:alert(2)"),
    )


def apply(server: Server, *recs: found.Advice) -> dict[str, Recommendation]:
    """Persist the findings as one evaluation would; by rule."""
    recommendations_apply(server=server, found_now=list(recs), now=NOW, clear_after=timedelta(hours=2))
    return {r.rule: r for r in Recommendation.objects.filter(server=server)}


@pytest.fixture
def world() -> World:
    acme, other = Organization.objects.create(name="adv-acme"), Organization.objects.create(name="adv-other")
    db1 = server_create(
        name="adv-db1", connection=parse_dsn("postgresql://m@db1.example/app"), organization_name=acme.name
    )
    db2 = server_create(
        name="adv-db2", connection=parse_dsn("postgresql://m@db2.example/app"), organization_name=acme.name
    )
    far = server_create(
        name="adv-far", connection=parse_dsn("postgresql://m@far.example/app"), organization_name=other.name
    )
    users = {}
    for name, org, role in (
        ("viewer", acme, Role.VIEWER),
        ("dba", acme, Role.DBA),
        ("admin", acme, Role.ADMIN),
        ("stranger", other, Role.DBA),
    ):
        users[name] = User.objects.create_user(f"adv-{name}", password="pw-1-adv")
        Membership.objects.create(user=users[name], organization=org, role=role)
    return World(acme, other, db1, db2, far, **users)


def get(client, user: User, url: str, status: int = 200, **params) -> str:
    client.force_login(user)
    response = client.get(url, params)
    assert response.status_code == status, (url, response.status_code)
    return response.content.decode()


def last_message(response) -> str:
    return [str(m) for m in get_messages(response.wsgi_request)][-1]


def charts_of(html: str) -> dict[str, dict]:
    found_ = re.findall(r'<script id="(evidence-[\w-]+)" type="application/json">(.*?)</script>', html, re.S)
    return {cid: json.loads(body) for cid, body in found_}


# --- the pages --------------------------------------------------------------------------------------------


def test_the_fleet_advisor_page_lists_active_ones_by_severity_escaped(client, world):
    recs = apply(
        world.db1,
        advice("pgss_max", "critical", explanation=f"Evicting {HOSTILE} fast."),
        advice("plan_share", "warning", change=""),
    )
    apply(world.db2, advice("resets", "info"))
    apply(world.far, advice("theirs", "critical", title="Other organization's advice"))
    html = get(client, world.viewer, reverse("advisor"))
    assert "pgss_max on server" in html and CHANGE in html and "needs a server restart" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and HOSTILE not in html
    assert "Other organization's advice" not in html
    # Most severe first: critical, warning, info; each with its server's advisor page.
    order = [html.index(f'data-recommendation="{r.pk}"') for r in (recs["pgss_max"], recs["plan_share"])]
    assert order == sorted(order) and html.index("resets on server") > order[1]
    assert f'href="{reverse("server-advisor", args=[world.db1.pk])}">adv-db1</a>' in html
    # The change in a <pre><code> with its copy button; a change-less recommendation has none.
    rid = recs["pgss_max"].pk
    assert f'<code id="change-{rid}">{CHANGE}</code>' in html and f'data-copy-target="change-{rid}"' in html
    assert f'data-copy-target="change-{recs["plan_share"].pk}"' not in html
    # References: a web address is a link, anything else stays text.
    assert '<a href="https://www.postgresql.org/docs/current/pgstatstatements.html"' in html
    assert 'href="javascript:' not in html and "<li>javascript:alert(2)</li>" in html
    assert "first seen 2026-03-02 09:30" in html
    # A viewer gets no action; a DBA gets both on an open one.
    assert "Acknowledge</button>" not in html and "Resolve</button>" not in html
    dba = get(client, world.dba, reverse("advisor"))
    assert reverse("advisor-acknowledge", args=[rid]) in dba and reverse("advisor-resolve", args=[rid]) in dba


def test_the_fleet_advisor_page_filters_by_organization(client, world):
    apply(world.db1, advice("pgss_max", "critical"))
    Membership.objects.create(user=world.dba, organization=world.other, role=Role.VIEWER)
    apply(world.far, advice("theirs", "warning", title="Far advice"))
    everything = get(client, world.dba, reverse("advisor"))
    assert "Far advice" in everything and "pgss_max on server" in everything
    # A DBA of acme but a viewer of other: the buttons follow the role in each server's organization.
    far = Recommendation.objects.get(server=world.far)
    assert reverse("advisor-acknowledge", args=[far.pk]) not in everything
    only_other = get(client, world.dba, reverse("advisor"), org=world.other.pk)
    assert "Far advice" in only_other and "pgss_max on server" not in only_other
    nobody = Organization.objects.create(name="adv-nobody")
    wrong = get(client, world.dba, reverse("advisor"), org=nobody.pk)
    assert f"organization &#x27;{nobody.pk}&#x27; is not one of yours" in wrong and "Far advice" in wrong


def test_the_server_advisor_page_has_the_evaluation_and_the_evidence_chart(client, world):
    recs = apply(world.db1, advice("pgss_max", "critical", evidence=True, explanation=HOSTILE))
    Evaluation.objects.create(
        server=world.db1, at=NOW, partial=True, notes=["No history older than an hour yet."], error=""
    )
    url = reverse("server-advisor", args=[world.db1.pk])
    html = get(client, world.viewer, url)
    assert "pgss_max on server" in html and CHANGE in html and "&lt;script&gt;" in html and HOSTILE not in html
    assert "Evaluated 2026-03-02 09:30" in html and "evidence is partial" in html
    assert "No history older than an hour yet." in html
    charts = charts_of(html)
    cid = f"evidence-{recs['pgss_max'].pk}-0"
    assert list(charts) == [cid] and f'<canvas data-chart="{cid}"' in html
    spec = charts[cid]
    assert spec["unit"] == "dealloc/s" and spec["series"][0]["data"] == [12.0, 15.5, None, 40.0, 38.0]
    assert spec["x"][0] == int((NOW - timedelta(minutes=50)).timestamp() * 1000)
    assert "xEnd" not in spec  # stored without its spans: points as they are
    # With the spans the evidence was read over (the last one across a 30-minute outage), each value is drawn
    # flat across its span.
    m = timedelta(minutes=1)
    spans = [(NOW - 40 * m, 3.0, NOW - 39 * m), (NOW - 39 * m, 2.0, NOW - 9 * m), (NOW - 9 * m, 4.0, NOW - 8 * m)]
    series = found.EvidenceSeries.of("dealloc/s", "dealloc/s", spans)
    spanned = replace(advice("pgss_max", "critical"), evidence=(series,))
    recs = apply(world.db1, spanned)
    assert recs["pgss_max"].evidence[0]["ends"] == [end.isoformat() for _, _, end in spans]
    spec = charts_of(get(client, world.viewer, url))[cid]
    assert spec["x"] == [int(t.timestamp() * 1000) for t, _, _ in spans]
    assert spec["xEnd"] == [int(t.timestamp() * 1000) for _, _, t in spans]
    # A failed evaluation says so.
    Evaluation.objects.filter(server=world.db1).update(error="OperationalError: the history store is down")
    assert "The last evaluation failed: OperationalError: the history store is down" in get(client, world.viewer, url)
    # Not evaluated yet; another organization's server is a 404, whoever asks.
    assert "Not evaluated yet" in get(client, world.viewer, reverse("server-advisor", args=[world.db2.pk]))
    get(client, world.stranger, url, status=404)
    get(client, world.viewer, reverse("server-advisor", args=[world.far.pk]), status=404)


def test_the_detail_page_has_the_event_history(client, world):
    rec = apply(world.db1, advice("pgss_max", "warning", explanation=HOSTILE))["pgss_max"]
    apply(world.db1, advice("pgss_max", "critical", explanation="Worse now."))  # a severity change
    url = reverse("advisor-recommendation", args=[rec.pk])
    html = get(client, world.dba, url)
    assert "pgss_max on server" in html and CHANGE in html
    events = re.findall(r'<tr data-event="(\w+)">', html)
    assert events == ["opened", "severity"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and HOSTILE not in html  # the first event's detail
    assert charts_of(html) == {} and "Worse now." in html
    get(client, world.stranger, url, status=404)
    get(client, world.dba, reverse("advisor-recommendation", args=[999_999_999]), status=404)


# --- acknowledging and resolving ------------------------------------------------------------------------


def test_a_viewer_cannot_acknowledge_and_a_dba_can(client, world):
    rec = apply(world.db1, advice("pgss_max", "critical"))["pgss_max"]
    url = reverse("advisor-acknowledge", args=[rec.pk])
    client.force_login(world.viewer)
    assert client.post(url).status_code == 403
    client.force_login(world.stranger)  # a DBA, of another organization
    assert client.post(url).status_code == 404
    rec.refresh_from_db()
    assert rec.status == Status.OPEN and not RecommendationEvent.objects.filter(kind="acknowledged").exists()

    client.force_login(world.dba)
    assert client.get(url).status_code == 405
    back = reverse("advisor") + "?org=" + str(world.acme.pk)
    response = client.post(url, {"next": back})
    assert response.status_code == 302 and response.headers["Location"] == back
    rec.refresh_from_db()
    assert rec.status == Status.ACKNOWLEDGED and rec.acknowledged_by == world.dba
    event = RecommendationEvent.objects.get(recommendation=rec, kind="acknowledged")
    assert event.user == world.dba and event.severity == "critical"
    assert last_message(response) == "Acknowledged: pgss_max on server (adv-db1)."
    html = get(client, world.viewer, reverse("server-advisor", args=[world.db1.pk]))
    assert ">acknowledged</span>" in html and "by adv-dba" in html

    # Twice: a clear message, no second event; a next elsewhere falls back to the server's advisor page.
    client.force_login(world.dba)
    response = client.post(url, {"next": "https://evil.example/"})
    assert response.headers["Location"] == reverse("server-advisor", args=[world.db1.pk])
    assert "Could not acknowledge" in last_message(response) and "only an open recommendation" in last_message(response)
    assert RecommendationEvent.objects.filter(recommendation=rec, kind="acknowledged").count() == 1
    response = client.post(url, {"next": "//evil.example/x"})
    assert response.headers["Location"] == reverse("server-advisor", args=[world.db1.pk])


def test_resolving_moves_it_to_the_history(client, world):
    recs = apply(world.db1, advice("pgss_max", "critical"), advice("plan_share", "warning"))
    rec = recs["pgss_max"]
    client.force_login(world.viewer)
    assert client.post(reverse("advisor-resolve", args=[rec.pk])).status_code == 403
    client.force_login(world.admin)
    response = client.post(reverse("advisor-resolve", args=[rec.pk]))
    assert response.status_code == 302 and response.headers["Location"] == reverse(
        "server-advisor", args=[world.db1.pk]
    )
    rec.refresh_from_db()
    assert rec.status == Status.RESOLVED and rec.resolved_by == world.admin
    assert RecommendationEvent.objects.filter(recommendation=rec, kind="resolved", user=world.admin).exists()
    for url in (reverse("advisor"), reverse("server-advisor", args=[world.db1.pk])):
        html = get(client, world.viewer, url)
        history = html[html.index("advice-history") :]
        active = html[: html.index("advice-history")]
        assert f'data-recommendation="{rec.pk}"' in history and f'data-recommendation="{rec.pk}"' not in active
        assert f'href="{reverse("advisor-recommendation", args=[rec.pk])}"' in history and "adv-admin" in history
        assert f'data-recommendation="{recs["plan_share"].pk}"' in active
    client.force_login(world.admin)
    again = client.post(reverse("advisor-resolve", args=[rec.pk]))
    assert "already resolved" in last_message(again)
    assert RecommendationEvent.objects.filter(recommendation=rec, kind="resolved").count() == 1


# --- the counts on the fleet and server pages -------------------------------------------------------------


def fleet_row(html: str, server: Server) -> str:
    start = html.index(f'<tr data-server="{server.pk}"')
    return html[start : html.index("</tr>", start)]


def test_the_fleet_and_server_pages_count_the_active_ones(client, world):
    recs = apply(
        world.db1, advice("a", "critical"), advice("b", "critical"), advice("c", "warning"), advice("d", "info")
    )
    client.force_login(world.dba)
    client.post(reverse("advisor-acknowledge", args=[recs["a"].pk]))  # acknowledged: still active
    client.post(reverse("advisor-resolve", args=[recs["d"].pk]))  # resolved: not counted
    html = get(client, world.viewer, reverse("fleet"))
    advisor_url = reverse("server-advisor", args=[world.db1.pk])
    assert f'<a class="advice-count critical" href="{advisor_url}"' in fleet_row(html, world.db1)
    assert '><span class="nowrap">2 critical</span> · <span class="nowrap">1 warning</span></a>' in fleet_row(
        html, world.db1
    )
    assert "advice-count" not in fleet_row(html, world.db2)
    assert 'href="/advisor/">Advisor</a>' in html  # the nav link

    server_page = get(client, world.viewer, reverse("server", args=[world.db1.pk]))
    assert f'<a class="advice-count critical" href="{advisor_url}">Advisor (3)</a>' in server_page
    assert ">worst: critical</span>" in server_page
    quiet = get(client, world.viewer, reverse("server", args=[world.db2.pk]))
    assert ">Advisor (0)</a>" in quiet and "no active recommendation" in quiet


def test_the_fleet_advisor_page_reads_a_fixed_number_of_queries(client, world):
    """As many queries for recommendations on 10 servers as on 1 (no query per server or recommendation)."""

    def queries() -> int:
        client.get(reverse("advisor"))  # the session settles (time zone) on a first request
        with CaptureQueriesContext(connection) as captured:
            html = client.get(reverse("advisor")).content.decode()
        return len(captured), html.count('class="card advice ')

    client.force_login(world.dba)
    apply(world.db1, advice("a", "critical"), advice("b", "warning"))
    Recommendation.objects.filter(rule="b").update(status=Status.RESOLVED, resolved_at=NOW, resolved_by=world.dba)
    one, shown_one = queries()
    for i in range(10):
        server = server_create(
            name=f"adv-many-{i}",
            connection=parse_dsn(f"postgresql://m@many{i}.example/app"),
            organization_name=world.acme.name,
        )
        apply(server, advice("a", "critical"), advice("b", "warning"), advice("c", "info"))
        Recommendation.objects.filter(server=server, rule="c").update(
            status=Status.ACKNOWLEDGED, acknowledged_by=world.dba, acknowledged_at=NOW
        )
        Recommendation.objects.filter(server=server, rule="b").update(
            status=Status.RESOLVED, resolved_at=NOW, resolved_by=world.dba
        )
    many, shown_many = queries()
    assert (shown_one, shown_many) == (1, 21)
    assert many == one <= 7, (one, many)


def test_the_advisor_pages_carry_no_inline_script_or_style(client, world):
    rec = apply(world.db1, advice("pgss_max", "critical", evidence=True))["pgss_max"]
    for url in (
        reverse("advisor"),
        reverse("server-advisor", args=[world.db1.pk]),
        reverse("advisor-recommendation", args=[rec.pk]),
    ):
        html = get(client, world.dba, url)
        assert 'style="' not in html and "hx-on" not in html
        assert not re.search(r"<script(?![^>]*(src=|type=\"application/json\"))", html), url
        assert not re.search(r"\son[a-z]+=\"", html), url


def test_the_pages_need_a_login(client, world):
    response = client.get(reverse("advisor"))
    assert response.status_code == 302 and response.headers["Location"].startswith("/?next=")


# --- the organization's advisor thresholds ----------------------------------------------------------------


def test_an_admin_saves_thresholds_and_the_advisor_uses_them(client, world):
    url = reverse("organization-advisor-thresholds", args=[world.acme.pk])
    page = get(client, world.admin, reverse("organization", args=[world.acme.pk]))
    assert f'action="{url}"' in page and 'placeholder="0.5"' in page and 'placeholder="120"' in page
    assert "Default 10. Sustained pg_stat_statements deallocations" in page
    response = client.post(url, {"plan_share": "0.7", "clear_after_minutes": "30", "dealloc_warning_per_s": ""})
    assert response.status_code == 302
    thresholds = organization_thresholds(organization=world.acme)
    assert thresholds.plan_share == 0.7 and thresholds.clear_after == timedelta(minutes=30)
    assert thresholds.dealloc_warning_per_s == Thresholds().dealloc_warning_per_s  # blank: the default
    page = get(client, world.admin, reverse("organization", args=[world.acme.pk]))
    assert re.search(r'name="plan_share"[^>]*value="0.7"', page)
    # A member who is not an admin reads them.
    read = get(client, world.viewer, reverse("organization", args=[world.acme.pk]))
    assert f'action="{url}"' not in read and "<strong>0.7</strong>" in read and "Only admins change them." in read
    # Blank again: back to the default.
    client.force_login(world.admin)
    client.post(url, {"plan_share": "", "clear_after_minutes": "30"})
    assert organization_thresholds(organization=world.acme).plan_share == Thresholds().plan_share


def test_invalid_thresholds_are_refused_with_the_error(client, world):
    url = reverse("organization-advisor-thresholds", args=[world.acme.pk])
    client.force_login(world.admin)
    response = client.post(url, {"plan_share": "1.5", "resets_max": "-1"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 1.0." in html
    assert "Ensure this value is greater than or equal to 0." in html
    assert "The advisor thresholds were not saved" in html
    inverted = client.post(url, {"dealloc_warning_per_s": "20"}).content.decode()  # above the default critical, 10
    assert "The warning threshold must be below the critical one (10)." in inverted
    assert organization_thresholds(organization=world.acme) == Thresholds()


def test_only_admins_save_thresholds(client, world):
    url = reverse("organization-advisor-thresholds", args=[world.acme.pk])
    for user, status in ((world.viewer, 403), (world.dba, 403), (world.stranger, 404)):
        client.force_login(user)
        assert client.post(url, {"plan_share": "0.9"}).status_code == status, user
    assert organization_thresholds(organization=world.acme) == Thresholds()
