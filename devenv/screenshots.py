"""Screenshots of the console's pages for docs/console.md, taken on a running demo (``make demo``):

    .venv/bin/python -m devenv.screenshots --url http://127.0.0.1:8000 --user admin --password X --out docs/screenshots

Debian's headless chromium (devenv/browser.py) logs in through the login form, then saves a PNG of each
page at 1440×900 (the full page where it is taller), once every chart on it is drawn: login, fleet, the
server page of the demo's dealloc-storm server (24h, and the last hour or --recent minutes), its top statements
by calls compared with the previous period, the hottest statement of the planning server (first by total
time), planning vs execution, the advisor (the fleet's and the dealloc-storm server's recommendations),
server management with a "test connection" result, the organization, its alerts, alert channels and
alert rules, and the preferences. Run it after a few minutes of demo (five minutes for the advisor's
two-phase-commit family), so that the seed cases show; docs/console.md's were taken after the demo was stopped
a few minutes and started again, so that a gap is on them."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urljoin

from devenv import browser as chromium

#: The demo's servers (devenv/demo.py): the seed cases the pictures show.
DEALLOC_SERVER = "pg16-dealloc-storm"
PLANNING_SERVER = "pg18-planning"
ORGANIZATION = "demo"
#: A PNG larger than this is reported: docs/console.md shows them all.
MAX_BYTES = 600_000
TIMEOUT_MS = 30_000
#: The recent range of the pages with charts: the last hour, every snapshot (a demo younger than that is drawn
#: from its first snapshot on); --recent MINUTES takes a custom range instead.
RECENT = "range=1h"
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # console/ranges.py
_SERVER_ID = re.compile(r"/servers/(\d+)/")
_ORGANIZATION_ID = re.compile(r"/organizations/(\d+)/")


class ScreenshotError(RuntimeError):
    """A page did not show what the screenshot needs (no demo running, wrong password...)."""


def _wait_drawn(page) -> None:
    """Every chart canvas drawn (static/console/console.js sets data-drawn), and the fonts loaded."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('canvas[data-chart]')].every((c) => c.dataset.drawn !== undefined)",
        timeout=TIMEOUT_MS,
    )
    page.evaluate("() => document.fonts.ready.then(() => true)")


def _id_of_link(page, text: str, pattern: re.Pattern[str]) -> int:
    """The id in the href of the first link whose text is `text`."""
    link = page.get_by_role("link", name=text, exact=True).first
    href = link.get_attribute("href", timeout=TIMEOUT_MS) or ""
    found = pattern.search(href)
    if not found:
        raise ScreenshotError(f"no link to {text!r} on {page.url}")
    return int(found.group(1))


def _first_statement(page) -> int:
    row = page.locator("#top-statements tbody tr[data-statement]").first
    value = row.get_attribute("data-statement", timeout=TIMEOUT_MS)
    if not value:
        raise ScreenshotError(f"no statement in the table of {page.url}")
    return int(value)


def _recent_range(page, minutes: int) -> str:
    """URL parameters of a custom range: the last `minutes` before the end of the range the page shows
    (read from its own "to" field, so in the user's time zone, whatever it is)."""
    end = page.locator("#range-end").input_value()
    start = datetime.strptime(end, LOCAL_FORMAT) - timedelta(minutes=minutes)
    return f"range=custom&start={start.strftime(LOCAL_FORMAT)}"


def take(
    *, url: str, user: str, password: str, out: Path, recent_min: int | None = None, log: Callable[[str], None] = print
) -> list[Path]:
    """Logs in and saves every screenshot under `out`; returns the files written."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    base = url.rstrip("/") + "/"
    written: list[Path] = []
    errors: list[str] = []

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium.check(), headless=True, args=chromium.launch_args())
        context = b.new_context(viewport=chromium.VIEWPORT, locale="en-US", timezone_id="UTC")
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(f"{page.url}: page error: {e}"))
        page.on("console", lambda m: m.type == "error" and errors.append(f"{page.url}: console error: {m.text}"))

        def shot(name: str) -> None:
            _wait_drawn(page)
            path = out / f"{name}.png"
            page.screenshot(path=str(path), type="png", full_page=True)
            size = path.stat().st_size
            log(f"{path}  {size // 1024} KB  {page.url}" + ("  (larger than wanted)" if size > MAX_BYTES else ""))
            written.append(path)

        def go(path: str) -> None:
            response = page.goto(urljoin(base, path.lstrip("/")))
            if response is None or response.status >= 400:
                raise ScreenshotError(f"{path}: HTTP {response.status if response else 'no response'}")

        go("/")
        shot("login")
        page.fill("#id_username", user)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        if page.locator("#id_password").count():
            raise ScreenshotError("the login failed: check --user and --password (the demo prints them)")

        go("/fleet/")
        shot("fleet")
        dealloc = _id_of_link(page, DEALLOC_SERVER, _SERVER_ID)
        planning = _id_of_link(page, PLANNING_SERVER, _SERVER_ID)

        go(f"/servers/{dealloc}/?range=24h")
        shot("server")
        recent = RECENT if recent_min is None else _recent_range(page, recent_min)
        go(f"/servers/{dealloc}/?{recent}")
        shot("server-recent")

        go(f"/servers/{dealloc}/statements/?{recent}&order=calls&compare=1")
        shot("top-statements")

        go(f"/servers/{planning}/statements/?{recent}")
        statement = _first_statement(page)
        go(f"/statements/{statement}/?{recent}")
        shot("statement")

        go(f"/servers/{planning}/planning/?{recent}")
        shot("planning")

        go("/advisor/")
        shot("advisor")
        go(f"/servers/{dealloc}/advisor/")
        shot("advisor-server")

        go(f"/manage/servers/{dealloc}/edit/")
        page.get_by_role("button", name="Test connection").click()
        # Queued for the demo's worker: the fragment polls until the report replaces it (no hx-get any more).
        page.locator("#check-result:not([hx-get]) .check-summary").wait_for(timeout=60_000)
        shot("servers")

        go("/organizations/")
        organization = _id_of_link(page, ORGANIZATION, _ORGANIZATION_ID)
        go(f"/organizations/{organization}/")
        shot("organization")
        # Its alerts (console/views/alerts.py): the storm server's, sent to the demo's webhook receiver and mail.
        go(f"/organizations/{organization}/alerts/")
        shot("alerts")
        go(f"/organizations/{organization}/alerts/channels/")
        shot("alert-channels")
        go(f"/organizations/{organization}/alerts/rules/")
        shot("alert-rules")

        go("/preferences/")
        shot("preferences")
        b.close()

    for error in errors:
        log(f"warning: {error}")
    return written


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import Error as PlaywrightError

    parser = argparse.ArgumentParser(
        prog="python -m devenv.screenshots",
        description="Screenshots of the console's pages for docs/console.md, taken on a running demo (make demo).",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the console (default %(default)s)")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", required=True, help="the demo prints it at start")
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument(
        "--recent",
        type=int,
        default=None,
        metavar="MINUTES",
        help="a custom range of the last MINUTES for the recent pages (default: the last hour)",
    )
    args = parser.parse_args(argv)
    try:
        take(url=args.url, user=args.user, password=args.password, out=args.out, recent_min=args.recent)
    except (ScreenshotError, chromium.BrowserMissing, PlaywrightError) as exc:  # no demo there: net::ERR_...
        print(f"screenshots: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
