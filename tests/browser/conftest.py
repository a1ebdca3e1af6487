"""Browser tests: Playwright drives Debian's headless chromium (devenv/browser.py) against
pytest-django's live server, which runs the real console in a thread of this process.

* ``browser``       chromium, launched once for the package's tests
* ``console_log``   every console error, page error, CSP violation and 5xx answer of the test's page;
                    the test fails on any that it did not ``allow()``
* ``page``          a fresh browser context (1440×900, UTC, the live server as base URL) and its page
* ``member``        member(role="dba", org="acme", username=...) -> a user (password PASSWORD) in that organization
* ``logged_in``     logged_in(user) -> ``page`` carrying that user's session cookie
* ``console_page``  ``page`` logged in as a DBA of organization "acme"
* ``synthetic_server``  synthetic_server(name, org="acme", hours=26, texts={}) -> a server whose history up to now
                    was written through the real collection path (tests/history_world.py), removed afterwards

``assert_charts_drawn(page)`` checks that every chart canvas was drawn with data.
The tests use the live server, so they run with real transactions (pytest-django's transactional_db).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from bench import synthetic
from console.services import server_delete
from devenv import browser as chromium
from inventory.models import Membership, Organization, Server
from tests import history_world

PASSWORD = "browser-pass-1"
#: A statement text as a hostile monitored server could send it: it must be shown, never run.
HOSTILE_TEXT = "SELECT '<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">' FROM orders"
#: Short: a missing element fails a test in seconds, not after Playwright's default 30 s.
TIMEOUT_MS = 5_000

# Reports a blocked resource or inline code with its directive; chromium's own report is a console
# error too, this one names the directive the same way in every chromium version. An init script is
# injected by the browser itself, so the page's CSP does not apply to it.
_CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline code"}`);
});
"""


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Chromium, from the first browser test to the last (the package scope ends Playwright's loop
    before any other test of the session runs: see below)."""
    try:
        executable = chromium.check()
    except chromium.BrowserMissing as e:
        pytest.fail(str(e), pytrace=False)
    # Playwright's sync API keeps an asyncio loop marked as running in this thread (parked in a greenlet
    # between calls), so Django's guard against blocking calls from async code refuses every ORM call
    # made in this thread, the tests' own and pytest-django's flush ("You cannot call this from an async
    # context"). None of them is made from a coroutine or runs while the loop does, so the guard is
    # lifted (DJANGO_ALLOW_ASYNC_UNSAFE, read by every thread of the process; the live server's thread
    # runs no loop and never needed it) for exactly as long as Playwright runs: no other test sees it.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=executable, headless=True, args=chromium.launch_args())
            try:
                yield b
            finally:
                b.close()


@dataclass
class ConsoleLog:
    """What a page reported as going wrong; ``allow(pattern)`` accepts messages the test expects."""

    errors: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]

    def watch(self, page: Page) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("response", self._on_response)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location.get("url", "")
            self.errors.append(f"console error: {message.text}" + (f" ({where})" if where else ""))

    def _on_response(self, response: Response) -> None:
        if response.status >= 500:
            self.errors.append(f"HTTP {response.status}: {response.request.method} {response.url}")


@pytest.fixture
def console_log() -> ConsoleLog:
    return ConsoleLog()


@pytest.fixture
def page(browser: Browser, live_server, console_log: ConsoleLog) -> Iterator[Page]:
    context = browser.new_context(
        base_url=live_server.url, viewport=chromium.VIEWPORT, timezone_id="UTC", locale="en-US"
    )
    context.add_init_script(_CSP_LISTENER)
    context.set_default_timeout(TIMEOUT_MS)
    p = context.new_page()
    console_log.watch(p)
    try:
        yield p
    finally:
        context.close()
    if problems := console_log.unexpected():
        pytest.fail("the browser reported:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def member(transactional_db) -> Callable[..., User]:
    """member(role="dba", org="acme", username=None) -> a new user with that role in that organization."""
    made = 0

    def make(role: str = Membership.Role.DBA, org: str = "acme", username: str | None = None) -> User:
        nonlocal made
        made += 1
        user = User.objects.create_user(username or f"{role}-{made}", password=PASSWORD)
        organization, _ = Organization.objects.get_or_create(name=org)
        Membership.objects.create(organization=organization, user=user, role=role)
        return user

    return make


@pytest.fixture
def logged_in(page: Page, live_server) -> Callable[[User], Page]:
    """logged_in(user) -> the page with that user's session (the login form has its own tests)."""

    def login(user: User) -> Page:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
        return page

    return login


@pytest.fixture
def console_page(member, logged_in) -> Page:
    """A page logged in as a DBA of organization "acme"."""
    return logged_in(member(role=Membership.Role.DBA, org="acme", username="dba"))


@pytest.fixture
def synthetic_server(transactional_db, monkeypatch) -> Iterator[Callable[..., Server]]:
    """synthetic_server(name, org="acme", hours=26, step_min=30, n=30, texts={}, outage=None, storm_from=None)
    -> a server of organization `org` with `n` statements and a snapshot every `step_min` minutes over the last
    `hours` hours (so that the 1h to 24h ranges all have data), rolled up as the periodic task does. `texts`
    replaces the text of statement i (0 <= i < n) by the given one, as a monitored server would send it;
    `outage` and `storm_from` as tests/history_world.build takes them."""
    made: list[Server] = []

    def make(
        name: str,
        *,
        org: str = "acme",
        hours: int = 26,
        step_min: float = 30,
        n: int = 30,
        texts: dict[int, str] | None = None,
        outage: tuple[datetime, datetime] | None = None,
        storm_from: datetime | None = None,
    ) -> Server:
        now = timezone.now()
        with monkeypatch.context() as mp:
            if texts:
                plain = synthetic._text
                mp.setattr(synthetic, "_text", lambda rng, size, i: texts[i] if i in texts else plain(rng, size, i))
            server = history_world.build(
                name,
                n=n,
                start=now - timedelta(hours=hours),
                end=now,
                step=timedelta(minutes=step_min),
                last_rollup_at=now,
                outage=outage,
                storm_from=storm_from,
            )
        organization, _ = Organization.objects.get_or_create(name=org)
        Server.objects.filter(pk=server.pk).update(organization=organization)
        made.append(server)
        server.refresh_from_db()
        return server

    yield make
    for server in made:
        server_delete(server=server)


def assert_charts_drawn(page: Page, *, at_least: int = 1, timeout_ms: float = TIMEOUT_MS) -> dict[str, int]:
    """Waits until every ``canvas[data-chart]`` is drawn, and checks each has data (static/console/console.js
    sets ``data-drawn`` to the number of non-null points) and a size. Returns {chart id: points}."""
    script = "cs => cs.map(c => [c.dataset.chart, c.dataset.drawn ?? null, c.width, c.height])"
    try:
        page.wait_for_function(
            "n => { const cs = [...document.querySelectorAll('canvas[data-chart]')];"
            " return cs.length >= n && cs.every(c => c.dataset.drawn !== undefined); }",
            arg=at_least,
            timeout=timeout_ms,
        )
    except PlaywrightError:
        canvases = page.eval_on_selector_all("canvas[data-chart]", script)
        pytest.fail(f"charts not drawn (want at least {at_least}): {canvases}", pytrace=False)
    canvases = page.eval_on_selector_all("canvas[data-chart]", script)
    empty = [name for name, drawn, _, _ in canvases if int(drawn) <= 0]
    assert not empty, f"charts drawn without data: {empty}"
    flat = [name for name, _, width, height in canvases if width == 0 or height == 0]
    assert not flat, f"charts with no size on the page: {flat}"
    return {name: int(drawn) for name, drawn, _, _ in canvases}
