"""The statement's Plan tab: its current plan as a tree (each node's label, conditions, estimates, its own share of
the cost computed from the plan, the costliest marked), another shape by fingerprint, the shapes' history, the last
EXPLAIN's reason or why there is no plan yet, JSON and text downloads, another organization's 404s, and the plan's
strings escaped."""

from __future__ import annotations

import html as htmllib
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from collectors.plans.hypothetical import Candidate
from history import plans
from history.models import Statement
from inventory.models import Membership, Organization, Server
from presentation.plans import plan_text
from tests.plans_world import node, store

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script>"


def indexed_plan() -> dict:
    customers = node(
        "Index Scan",
        8.3,
        1,
        **{
            "Relation Name": "customers",
            "Alias": "c",
            "Index Name": "customers_pkey",
            "Index Cond": "(id = o.customer)",
        },
    )
    orders = node(
        "Seq Scan", 420.0, 35, **{"Relation Name": "orders", "Alias": "o", "Filter": f"(status = '{HOSTILE}'::text)"}
    )
    join = node("Nested Loop", 720.5, 35, orders, customers, **{"Join Type": "Inner"})
    return {"Plan": node("Aggregate", 721.0, 1, join, Strategy="Plain")}


def seq_plan() -> dict:
    return {"Plan": node("Seq Scan", 5000.0, 35, **{"Relation Name": "orders", "Filter": "(customer = $1)"})}


@pytest.fixture
def world(client):
    org = Organization.objects.create(name="plan-page")
    other = Organization.objects.create(name="plan-page-other")
    server = Server.objects.create(organization=org, name="db-plans", host="db1", database="app", user="m")
    statement = Statement.objects.create(
        server=server,
        userid=10,
        dbid=5,
        queryid=4242,
        first_seen_at=T0,
        query="SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer",
    )
    alice = User.objects.create_user("plan-alice", password="pw-1")
    bob = User.objects.create_user("plan-bob", password="pw-2")
    Membership.objects.create(user=alice, organization=org, role=Membership.Role.VIEWER)
    Membership.objects.create(user=bob, organization=other, role=Membership.Role.VIEWER)
    client.force_login(alice)
    return server, statement, bob


def page(client, statement_id: int, **params) -> str:
    response = client.get(reverse("statement-plan", args=[statement_id]), params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def tree(html: str) -> list[tuple[str, str, bool, str]]:
    """(label, class of its indent, costliest, its share as shown) per row of the plan's tree."""
    rows = re.findall(
        r'<tr class="node( costliest)?">\s*<td class="(d\d+)">\s*<span class="label">'
        r'(?:<span class="arrow"[^>]*>→</span> )?(.*?)</span>.*?<span class="pct">(.*?)</span>',
        html,
        re.S,
    )
    return [(htmllib.unescape(label), indent, bool(costly), pct) for costly, indent, label, pct in rows]


def test_the_current_plan_as_a_tree_with_its_shares_and_costliest(client, world):
    server, statement, _ = world
    plan = indexed_plan()
    store(server.pk, statement.pk, seq_plan(), T0)
    store(server.pk, statement.pk, plan, T0 + timedelta(hours=6))  # the current one: seen last
    html = page(client, statement.pk)
    rows = tree(html)
    assert [(label, indent) for label, indent, _, _ in rows] == [
        ("Aggregate", "d0"),
        ("Nested Loop", "d1"),
        ("Seq Scan on orders o", "d2"),
        ("Index Scan using customers_pkey on customers c", "d2"),
    ]
    # Own cost: a node's total less its children's, as a share of the top's total (721).
    own = [721.0 - 720.5, 720.5 - 420.0 - 8.3, 420.0, 8.3]
    assert [pct for *_, pct in rows] == [f"{cost / 721.0:.1%}" for cost in own]
    # Marked: the nodes adding a tenth of the cost or more (the loop 40.5%, the scan 58%; not the index's 1.2%).
    assert [label for label, _, costly, _ in rows if costly] == ["Nested Loop", "Seq Scan on orders o"]
    assert "Index Cond:</span> <code>(id = o.customer)</code>" in html
    # A plan's strings come from the monitored server: escaped, never markup.
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Current plan" in html


def test_the_history_another_shape_by_fingerprint_and_an_unknown_one(client, world):
    server, statement, _ = world
    old = store(server.pk, statement.pk, seq_plan(), T0)
    current = store(server.pk, statement.pk, indexed_plan(), T0 + timedelta(hours=6))
    html = page(client, statement.pk)
    history = re.findall(r'<a href="\?plan=(\w+)">', html)
    assert history == [current, old]  # the current first
    assert html.count('<span class="badge ok">current</span>') == 1
    other = page(client, statement.pk, plan=old)
    assert [label for label, *_ in tree(other)] == ["Seq Scan on orders"]
    assert f"Plan seen {T0:%Y-%m-%d %H:%M} to {T0:%Y-%m-%d %H:%M}" in other
    assert client.get(reverse("statement-plan", args=[statement.pk]), {"plan": "0" * 32}).status_code == 404


def test_downloads_are_the_stored_plan_and_its_text(client, world):
    server, statement, bob = world
    fingerprint = store(server.pk, statement.pk, indexed_plan(), T0)
    stored = plans.PlanShape.objects.get(server_id=server.pk, fingerprint=fingerprint).plan
    r = client.get(reverse("statement-plan-json", args=[statement.pk, fingerprint]))
    assert r.status_code == 200 and json.loads(r.content) == stored
    assert r["Content-Disposition"] == f'attachment; filename="plan-db-plans-4242-{fingerprint[:12]}.json"'
    r = client.get(reverse("statement-plan-text", args=[statement.pk, fingerprint]))
    assert r.status_code == 200 and r.content.decode() == plan_text(stored)
    assert r["Content-Type"].startswith("text/plain")
    client.force_login(bob)
    for name in ("statement-plan-json", "statement-plan-text"):
        assert client.get(reverse(name, args=[statement.pk, fingerprint])).status_code == 404
    assert client.get(reverse("statement-plan", args=[statement.pk])).status_code == 404


def test_a_failed_explain_says_why_and_a_never_planned_statement_says_when(client, world):
    server, statement, _ = world
    html = page(client, statement.pk)
    assert "Not planned yet." in html and "manage.py plan --server db-plans --queryid 4242" in html
    assert '<tr class="node' not in html
    plans.record_unexplained(
        server.pk,
        statement.pk,
        code="permission",
        reason="the monitoring role may not read a table the statement uses: permission denied",
        at=T0,
    )
    html = page(client, statement.pk)
    assert "gave no plan: the monitoring role may not read a table the statement uses: permission denied" in html
    assert "Not planned yet." not in html
    store(server.pk, statement.pk, seq_plan(), T0 - timedelta(hours=6))
    plans.record_unexplained(server.pk, statement.pk, code="timeout", reason="planning took longer", at=T0)
    html = page(client, statement.pk)
    assert "gave no plan: planning took longer" in html and "The plan below is the last one read." in html
    assert [label for label, *_ in tree(html)] == ["Seq Scan on orders"]
    # A reason never stored: its code says why, never a blank.
    plans.record_unexplained(server.pk, statement.pk, code="budget", reason="", at=T0 + timedelta(hours=1))
    assert "gave no plan: budget</p>" in page(client, statement.pk)


def nav(html: str) -> list[str]:
    block = re.search(r'<nav class="server-nav">(.*?)</nav>', html, re.S).group(1)
    return re.findall(r">([^<]+)</a>", block)


def test_the_statement_page_links_to_its_plan_and_the_plan_page_has_its_nav(client, world):
    _, statement, _ = world
    html = client.get(reverse("statement", args=[statement.pk])).content.decode()
    assert f'<a href="{reverse("statement-plan", args=[statement.pk])}">Plan</a>' in html
    plan_html = page(client, statement.pk)
    assert nav(plan_html) == ["Statement", *nav(html)]
    assert f'<a href="{reverse("statement-plan", args=[statement.pk])}" aria-current="page">Plan</a>' in plan_html


def test_explain_now_is_for_dbas_and_admins_and_the_tab_follows_it_to_its_outcome(client, world, settings):
    """The button queues the statement's EXPLAIN on the `plans` queue (the plans worker runs it: the browser test
    does so for real); the tab then polls its own body every 2 s until the worker's outcome is in, and says it."""
    import redis

    from collectors.tasks import track

    server, statement, bob = world
    url = reverse("statement-plan-now", args=[statement.pk])
    assert "EXPLAIN now" not in page(client, statement.pk)  # a viewer: it costs the monitored server
    assert client.post(url).status_code == 403 and client.get(url).status_code == 405
    client.force_login(bob)
    assert client.post(url).status_code == 404
    Membership.objects.filter(user__username="plan-alice").update(role=Membership.Role.DBA)
    client.force_login(User.objects.get(username="plan-alice"))
    assert "EXPLAIN now</button>" in page(client, statement.pk)

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("plans")
    asked = client.post(url)
    assert asked.status_code == 302, asked.status_code
    task_id = asked.url.rsplit("?asked=", 1)[1]
    (sent,) = [json.loads(m)["headers"] for m in broker.lrange("plans", 0, -1)]
    broker.delete("plans")
    assert sent["task"] == "collectors.tasks.plan_statement" and sent["id"] == task_id

    waiting = client.get(asked.url).content.decode()
    assert 'hx-trigger="every 2s"' in waiting and "waiting for the plans worker" in waiting
    assert "EXPLAIN asked of the plans worker" in waiting and "EXPLAIN now</button>" not in waiting
    fragment = client.get(asked.url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="plan-body"') and "server-nav" not in fragment

    # The worker's outcome as it records it (collectors.tasks.track): the tab stops polling and says it.
    reason = "the monitoring role may not read a table the statement uses: permission denied for table orders"
    track(task_id, server.pk, "failed", {"ok": False, "kind": "plan", "error_code": "permission", "reason": reason})
    done = client.get(asked.url).content.decode()
    assert "every 2s" not in done and f"EXPLAIN done, no plan: {reason}" in done and "EXPLAIN now</button>" in done
    # Another server's task, or one unknown: nothing said.
    track(task_id, server.pk + 1000, "queued")
    assert "EXPLAIN asked:" not in page(client, statement.pk, asked=task_id)
    assert "EXPLAIN asked:" not in page(client, statement.pk, asked="no-such-task")


def test_explain_now_past_the_users_rate_says_how_long_to_wait_and_queues_nothing(client, world, settings):
    """The button counts against the user's EXPLAIN rates (with the API's): past one, the tab says so instead of
    asking the worker."""
    import redis

    settings.PAGE_RATES = {**settings.PAGE_RATES, "explain": "1/min", "explain_hourly": "60/hour"}
    _, statement, _ = world
    Membership.objects.filter(user__username="plan-alice").update(role=Membership.Role.DBA)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("plans")
    url = reverse("statement-plan-now", args=[statement.pk])
    try:
        assert "?asked=" in client.post(url).url
        refused = client.post(url, follow=True)
        assert refused.redirect_chain == [(reverse("statement-plan", args=[statement.pk]), 302)]
        html = refused.content.decode()
        assert re.search(r'<li class="error">Too many EXPLAINs asked for: try again in \d+ s\.</li>', html), html
        assert "EXPLAIN now</button>" in html  # nothing asked: the button stays
        assert broker.llen("plans") == 1  # the first one only
    finally:
        broker.delete("plans")


def test_an_explain_put_off_by_its_organizations_share_says_so_and_then_why_it_did_not_run(client, world):
    """The plans worker's share of the organization was in use (collectors.tasks): the tab says the EXPLAIN waits
    for it, and, when it expired so, that it did not run and why."""
    from collectors.tasks import track

    server, statement, _ = world
    reason = "the plans worker was running 2 plan jobs of plan-page, its share (ORG_MAX_PLANNING)"
    put_off = {"ok": False, "kind": "plan", "error_code": "over_share"}
    track("t-share", server.pk, "queued", {**put_off, "put_off": True, "reason": reason})
    waiting = page(client, statement.pk, asked="t-share")
    assert f"EXPLAIN asked: put off, {reason}; it runs when one of them is done." in waiting
    assert 'hx-trigger="every 2s"' in waiting
    expired = "its organization's share of the plans worker (ORG_MAX_PLANNING) stayed in use until the request expired"
    track("t-share", server.pk, "failed", {**put_off, "put_off": False, "reason": f"{expired}: ask again later"})
    done = page(client, statement.pk, asked="t-share")
    assert f"EXPLAIN not run: {htmllib.escape(expired)}: ask again later" in done and "every 2s" not in done


def test_the_indexes_its_scans_ask_for_and_why_none(client, world):
    """The current plan's candidates as the plans reading stored them: the index asked for (of a partition, its
    partitioned table named), and a refusal's reason, escaped."""
    server, statement, _ = world
    store(server.pk, statement.pk, seq_plan(), T0)
    asked = Candidate(
        "public",
        "orders_2026",
        ("customer", "status"),
        "cost-verified",
        60000.0,
        0.0005,
        5000.0,
        12.5,
        2_506_752,
        partition_of={"schema": "public", "table": "orders", "tree": []},
    )
    refused = Candidate(
        "public",
        "events",
        (),
        "estimated",
        90000.0,
        0.33,
        5000.0,
        None,
        None,
        reason=f"the filter keeps about 33% of the table's 90,000 rows ({HOSTILE})",
    )
    plans.record_candidates(server.pk, statement.pk, "app", [asked, refused], at=T0)
    html = page(client, statement.pk)
    rows = re.findall(r'<tr class="(asked|refused)">(.*?)</tr>', html, re.S)
    cells = [
        (
            kind,
            [
                htmllib.unescape(re.sub(r"<[^>]+>", "", td)).strip()
                for td in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            ],
        )
        for kind, row in rows
    ]
    assert cells == [  # by table
        (
            "refused",
            ["public.events", "none", f"the filter keeps about 33% of the table's 90,000 rows ({HOSTILE})", "–", "–"],
        ),
        (
            "asked",
            [
                "public.orders_2026 (a partition of public.orders)",
                "(customer, status)",
                "cost-verified",
                "5,000 → 12",
                "2.4 MB",
            ],
        ),
    ]
    assert HOSTILE not in html
    assert reverse("server-indexes", args=[server.pk]) in html
    # A statement whose plan filters nothing has no such section.
    other = Statement.objects.create(server=server, userid=10, dbid=5, queryid=4243, first_seen_at=T0, query="SELECT 1")
    store(server.pk, other.pk, seq_plan(), T0)
    assert "Indexes for this plan" not in page(client, other.pk)
