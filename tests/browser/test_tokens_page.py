"""The API tokens page in a real browser: a metrics token for Prometheus made for one of the user's
organizations, its secret shown once, listed as that organization's /metrics, and reading /metrics."""

from __future__ import annotations

from django.test import Client
from playwright.sync_api import expect


def test_a_metrics_token_is_made_in_the_browser_and_reads_metrics(console_page, tmp_path):
    page = console_page  # a DBA of "acme"
    page.goto("/preferences/tokens/")
    page.get_by_label("Name").fill("prometheus")
    page.get_by_label("For Prometheus only").select_option(label="acme: its servers on /metrics, read-only")
    page.get_by_role("button", name="Create a token").click()
    secret = page.locator("#token-secret").inner_text()
    assert secret.startswith("pgc_")
    row = page.locator("tr[data-token]")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(2)).to_have_text("/metrics of acme")
    page.screenshot(path=str(tmp_path / "tokens.png"), full_page=True)
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200 and b"pgconsole_scrape_servers 0.0" in response.content
