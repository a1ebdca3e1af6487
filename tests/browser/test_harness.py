"""The browser tests' own guards catch what they are for: inline code blocked by the CSP, script errors,
and charts drawn without data. Each page here is served by the test (route) on the live server's origin,
with the console's real CSP, static files and console.js."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page

from console.middleware import CONTENT_SECURITY_POLICY
from tests.browser.conftest import assert_charts_drawn

SCRIPTS = (
    # As in base.html: without it htmx injects a <style> element, which the CSP refuses.
    """<meta name="htmx-config" content='{"includeIndicatorStyles": false}'>"""
    '<script src="/static/vendor/htmx/htmx.min.js" defer></script>'
    '<script src="/static/vendor/chartjs/chart.umd.min.js" defer></script>'
    '<script src="/static/console/console.js" defer></script>'
)


def serve(page: Page, path: str, body: str) -> None:
    """Answers `path` on the live server's origin with `body`, under the console's CSP."""
    html = f'<!doctype html><html><head><meta charset="utf-8">{SCRIPTS}</head><body>{body}</body></html>'
    page.route(
        f"**{path}",
        lambda route: route.fulfill(
            status=200,
            content_type="text/html",
            body=html,
            headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY},
        ),
    )


def chart(name: str, data: list[float | None]) -> str:
    spec = {
        "kind": "line",
        "unit": "calls/s",
        "x": [1_700_000_000_000 + 60_000 * i for i in range(len(data))],
        "series": [{"label": "calls", "data": data}],
    }
    return (
        f'<script id="{name}" type="application/json">{json.dumps(spec)}</script>'
        f'<div class="chart"><canvas data-chart="{name}"></canvas></div>'
    )


def test_inline_code_blocked_by_the_csp_and_script_errors_are_caught(page, console_log):
    serve(page, "/harness/unsafe/", '<p style="color: red">x</p><script>window.ran = true;</script>')
    page.goto("/harness/unsafe/")
    page.evaluate("setTimeout(() => { throw new Error('boom from a handler'); })")
    page.wait_for_timeout(100)
    assert page.evaluate("window.ran === undefined")  # the inline script was refused
    found = "\n".join(console_log.unexpected())
    assert "CSP violation: script-src-elem blocked inline" in found
    assert "CSP violation: style-src-attr blocked inline" in found
    assert "page error: boom from a handler" in found
    console_log.errors.clear()  # seen: the page fixture must not fail the test for them


def test_charts_with_data_pass_and_empty_charts_fail(page):
    serve(page, "/harness/charts/", chart("with-data", [1.0, None, 3.0]) + chart("empty", [None, None, None]))
    page.goto("/harness/charts/")
    with pytest.raises(AssertionError, match=r"drawn without data: \['empty'\]"):
        assert_charts_drawn(page, at_least=2)
    assert page.eval_on_selector("canvas[data-chart=with-data]", "c => c.dataset.drawn") == "2"


def test_a_page_with_fewer_charts_than_expected_fails(page):
    serve(page, "/harness/one-chart/", chart("only", [1.0, 2.0]))
    page.goto("/harness/one-chart/")
    assert assert_charts_drawn(page) == {"only": 2}
    with pytest.raises(pytest.fail.Exception, match="charts not drawn"):
        assert_charts_drawn(page, at_least=2, timeout_ms=500)
