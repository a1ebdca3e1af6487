"""The API's docs page in a real browser, under the console's Content-Security-Policy: Swagger UI (served
by the app, no CDN) loads the schema and lists the operations, with nothing blocked."""

from __future__ import annotations

from playwright.sync_api import expect


def test_swagger_ui_lists_the_operations_under_the_csp(member, logged_in, console_log):
    page = logged_in(member(username="docs-reader"))
    response = page.goto("/api/docs/")
    assert response.status == 200
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("pgconsole API", timeout=15_000)
    expect(
        page.locator(".opblock-summary-path", has_text="/api/v1/servers/{server_id}/statements/").first
    ).to_be_visible()
    assert console_log.unexpected() == []
