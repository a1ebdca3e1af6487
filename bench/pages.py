"""Benchmark 5: the console's pages over the read-tier benchmark's history, server-side.

Each page is requested in this process through Django's test client (the whole request: middleware,
views, selectors, templates), as a superuser, with DEBUG off and static files collected as in
production. For every range from 1 hour to 30 days: the fleet page (200 servers), the server page and
the top-statements fragment (an htmx request), with the fragment's size in bytes. Ranges are given as
custom ranges in the URL (the history ends in January 2025, not now)."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta

from bench.measured import WINDOWS, Measured, measure

TARGET_MS = 150
FRAGMENT_TARGET_BYTES = 150 * 1024
BROWSER_TARGET_MS = 1500
BROWSER_RUNS = 10


def _range(length: timedelta, end: datetime) -> str:
    fmt = "%Y-%m-%dT%H:%M"
    # The page works in minutes (datetime-local): the window ends at the minute after the last snapshot.
    end = end.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return f"range=custom&start={(end - length).strftime(fmt)}&end={end.strftime(fmt)}"


class _AllQueries:
    """Queries of a page: the ORM's (inventory, sessions) and the selectors' own cursor's."""

    def __init__(self):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from readtier import db

        self._orm = CaptureQueriesContext(connection)
        self._selectors = db.counting()
        self.queries = 0

    def __enter__(self):
        self._orm.__enter__()
        self._counter = self._selectors.__enter__()
        return self

    def __exit__(self, *exc):
        self._selectors.__exit__(*exc)
        self._orm.__exit__(*exc)
        self.queries = len(self._orm.captured_queries) + self._counter.queries


def _collect_static() -> str:
    from django.conf import settings
    from django.core.management import call_command

    root = tempfile.mkdtemp(prefix="bench-static-")
    settings.STATIC_ROOT = root
    call_command("collectstatic", interactive=False, verbosity=0)
    return root


def run(*, server_id: int, end: datetime, runs: int, warmup: int, log=print) -> list[Measured]:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    _collect_static()
    user, _ = get_user_model().objects.update_or_create(username="bench-pages", defaults={"is_superuser": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    pages = (
        ("fleet page", lambda: reverse("fleet"), {}),
        ("server page", lambda: reverse("server", args=[server_id]), {}),
        (
            "top statements fragment",
            lambda: reverse("server-statements", args=[server_id]),
            {"HTTP_HX_REQUEST": "true"},
        ),
    )
    out = []
    for label, url_of, headers in pages:
        for window, length, _ in WINDOWS:
            m = Measured(label, f"{window}", TARGET_MS, window=window)
            try:
                url = f"{url_of()}?{_range(length, end)}"
            except Exception as exc:  # the page is not there (yet): a finding, not a crash
                m.missing = f"no URL: {type(exc).__name__}: {exc}"
                out.append(m)
                continue
            sizes = []

            def get(url=url, headers=headers, sizes=sizes):
                response = client.get(url, **headers)
                if response.status_code != 200:
                    raise RuntimeError(f"{url} answered {response.status_code}")
                sizes.append(len(response.content))
                return response

            measure(m, get, warmup=warmup, runs=runs, counting=_AllQueries)
            if sizes:
                m.bytes = max(sizes)
                m.info = f"{m.bytes:,} bytes"
            out.append(m)
        log(f"    {label}: " + ", ".join(f"{m.window} {m.p95:.0f}" if m.ms else f"{m.window} -" for m in out[-5:]))
    return out


def run_browser(*, server_id: int, end: datetime, runs: int = BROWSER_RUNS, log=print) -> list[Measured]:
    """The server page in Debian's chromium (Playwright), served by a live server thread of this
    process: milliseconds from the start of the navigation until every chart is drawn
    (devenv.browser.fully_drawn_ms), per range; one warm-up, then `runs` navigations."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.testcases import LiveServerThread
    from django.urls import reverse

    from devenv import browser

    user, _ = get_user_model().objects.update_or_create(username="bench-pages", defaults={"is_superuser": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    cookie = client.cookies["sessionid"]
    out = []
    try:
        executable = browser.check()
        from playwright.sync_api import sync_playwright
    except Exception as exc:  # no browser here: say so in the report
        m = Measured("server page in the browser", "every range", BROWSER_TARGET_MS)
        m.missing = f"not measured: {exc}"
        return [m]
    # The app serves its static files itself (WhiteNoise, from the collected STATIC_ROOT), as in production.
    server = LiveServerThread("localhost", lambda app: app)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    if server.error:
        raise server.error
    base = f"http://localhost:{server.port}"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=executable, headless=True, args=browser.launch_args())
            context = chromium.new_context(viewport=browser.VIEWPORT)
            context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base}])
            page = context.new_page()
            for window, length, _ in WINDOWS:
                m = Measured("server page in the browser", window, BROWSER_TARGET_MS, window=window)
                url = f"{base}{reverse('server', args=[server_id])}?{_range(length, end)}"
                browser.fully_drawn_ms(page, url)  # warm-up
                m.ms = [browser.fully_drawn_ms(page, url) for _ in range(runs)]
                m.info = f"{runs} navigations, charts drawn"
                out.append(m)
            log("    server page in the browser, fully drawn: " + ", ".join(f"{m.window} {m.median:.0f}" for m in out))
            chromium.close()
    finally:
        server.terminate()
    return out
