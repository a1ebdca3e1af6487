"""The Plan tab in a real browser: reached from the statement page, the current plan's tree with each node's
conditions and the costliest marked on the nodes that add the most cost, the plan history with the current one
marked and an older shape one click away, the JSON download equal to the stored plan, and the plan change marked
on the statement's charts; and "EXPLAIN now" on a real server, run by a real plans worker, followed by the tab
until its plan is in."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from collectors.plans.hypothetical import Candidate
from history import plans
from history.models import PlanShape
from tests.browser.conftest import assert_charts_drawn
from tests.plans_world import report_plan, store
from tests.processes import console_env, processes, wait_ready, worker_argv
from tests.world import APP_DB, collect, register, run, server_entry


@pytest.fixture
def planned(synthetic_server):
    """A server's busiest statement planned with its index six hours ago, and without it two hours ago."""
    server = synthetic_server("db-plan", n=8)
    statement = server.statements.order_by("pk").first()
    now = timezone.now()
    old = store(server.pk, statement.pk, report_plan(indexed=True), now - timedelta(hours=6))
    current = store(server.pk, statement.pk, report_plan(indexed=False), now - timedelta(hours=2))
    # What the plans reading judged of the current plan's scan of orders: the index it asks for.
    asked = Candidate(
        "public", "orders", ("customer", "status"), "estimated", 250000.0, 0.0004, 18287.0, 95.0, 6_600_000
    )
    plans.record_candidates(server.pk, statement.pk, "app", [asked], at=now - timedelta(hours=2))
    return server, statement, old, current


def test_the_plan_tab_shows_the_tree_the_costliest_and_the_history(console_page, planned, tmp_path):
    server, statement, old, current = planned
    page = console_page
    page.goto(f"/statements/{statement.pk}/?range=24h")
    expect(page.locator("ul.plan-changes li")).to_contain_text(
        ["the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders"]
    )
    charts = assert_charts_drawn(page, at_least=4)
    assert "chart-mean" in charts
    page.get_by_role("link", name="Plan", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/statements/{statement.pk}/plan/$"))
    expect(page.get_by_role("heading", name="Current plan")).to_be_visible()
    expect(page.locator("nav.server-nav [aria-current=page]")).to_have_text("Plan")

    rows = page.locator("table.plan tbody tr")
    expect(rows.locator(".label")).to_have_text(
        ["Sort", "→ HashAggregate", "→ Hash Join", "→ Seq Scan on orders o", "→ Hash", "→ Seq Scan on customers c"]
    )
    # The sequential scan of orders is nearly all of the cost: the one node marked, with its share.
    costly = page.locator("table.plan tr.costliest .label")
    expect(costly).to_have_text(["→ Seq Scan on orders o"])
    scan = rows.nth(3)
    expect(scan.locator(".badge.costly")).to_be_visible()
    expect(scan.locator(".pct")).to_have_text(f"{18250.0 / 18287.0:.1%}")
    expect(scan.locator(".cond")).to_have_text(["Filter: ((customer = $1) AND (status = ANY ($2)))"])
    expect(rows.nth(4).locator(".badge.costly")).to_have_count(0)
    # Why it costs, and what would help: the index that scan asks for, with the plan's cost with it.
    asked = page.locator(".plan-indexes tbody tr")
    expect(asked).to_have_count(1)
    expect(asked.locator("td")).to_have_text(
        ["public.orders", "(customer, status)", "estimated", "18,287 → 95", "6.3 MB"]
    )

    history = page.locator(".plan-history tbody tr")
    expect(history).to_have_count(2)
    expect(history.first.locator(".badge")).to_have_text("current")

    with page.expect_download() as download:
        page.get_by_role("link", name="JSON").click()
    stored = PlanShape.objects.get(server_id=server.pk, fingerprint=current).plan
    assert json.loads(Path(download.value.path()).read_text()) == stored

    history.nth(1).get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"\?plan={old}$"))
    expect(page.get_by_role("heading", name=re.compile(r"^Plan seen"))).to_be_visible()
    expect(rows.nth(3).locator(".label")).to_have_text("→ Index Scan using orders_customer_idx on orders o")
    expect(rows.nth(3).locator(".cond")).to_have_text(["Index Cond: (customer = $1)", "Filter: (status = ANY ($2))"])
    page.screenshot(path=str(tmp_path / "plan.png"), full_page=True)


def test_explain_now_is_run_by_the_plans_worker_and_the_tab_shows_its_plan(console_page, pg_clusters, tmp_path):
    c = pg_clusters[16]
    table = f"tab_orders_{os.getpid()}"
    c.execute(
        f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, customer int, note text); "
        f"INSERT INTO {table} SELECT g, g % 5000, 'n' || g FROM generate_series(1, 20000) g; "
        f"CREATE INDEX {table}_customer ON {table} (customer); ANALYZE {table}; GRANT SELECT ON {table} TO monitor",
        dbname=APP_DB,
    )
    server = register(c, org="acme")  # the organization of console_page's DBA
    collect(server)
    run(c, f"SELECT note FROM {table} WHERE customer = %s", 2, params=(3,))
    collect(server)
    statement = server.statements.get(queryid=server_entry(c, f"SELECT note FROM {table} WHERE customer%")["queryid"])
    page = console_page
    page.goto(f"/statements/{statement.pk}/plan/")
    expect(page.locator(".never-planned")).to_have_text("Not planned yet.")
    with processes(tmp_path, console_env()) as procs:
        wait_ready(procs.start("plans", [*worker_argv(name="plans"), "--queues", "plans"]))
        page.get_by_role("button", name="EXPLAIN now").click()
        expect(page).to_have_url(re.compile(rf"/statements/{statement.pk}/plan/\?asked="))
        # The tab follows the task on its own (htmx, every 2 s) until the worker has read the plan.
        expect(page.locator(".asked.done")).to_have_text(
            "EXPLAIN done: the plan below is the one just read.", timeout=30_000
        )
    expect(page.get_by_role("heading", name="Current plan")).to_be_visible()
    expect(page.locator("table.plan tbody tr .label").first).to_contain_text(f"Scan on {table}")
    expect(page.locator("table.plan tbody")).to_contain_text(f"{table}_customer")  # its index, by name
    expect(page.locator(".last-attempt")).to_contain_text("Last EXPLAINed")
    expect(page.get_by_role("button", name="EXPLAIN now")).to_be_visible()  # and again, once it is done
    page.screenshot(path=str(tmp_path / "plan-now.png"), full_page=True)
