"""Debian's headless chromium for the browser tests and screenshots: where it is, how to launch it,
and whether the fonts the console's CSS names are there (packages ``chromium fonts-dejavu-core``,
installed by ``make system-packages``; Playwright's own browser downloads are never used)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

#: Where Debian's package puts the browser; PGCONSOLE_CHROMIUM overrides it.
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
#: The families static/console/console.css asks for first (fonts-dejavu-core).
CSS_FONTS = ("DejaVu Sans", "DejaVu Sans Mono")
INSTALL_HINT = "apt-get install -y chromium fonts-dejavu-core (or: make system-packages, as root)"
#: What a person sees on a laptop; screenshots are taken at this size too.
VIEWPORT = {"width": 1440, "height": 900}


class BrowserMissing(RuntimeError):
    """Chromium or the console's fonts are not installed."""


def chromium_path() -> str:
    """The chromium executable; BrowserMissing (with the install command) when there is none."""
    candidates = [os.environ["PGCONSOLE_CHROMIUM"]] if os.environ.get("PGCONSOLE_CHROMIUM") else CHROMIUM_PATHS
    for candidate in candidates:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise BrowserMissing(f"no chromium at {', '.join(candidates)}: {INSTALL_HINT}")


def launch_args() -> list[str]:
    """Command-line switches for chromium here."""
    # Root in a container has no user namespaces for chromium's sandbox: without this it will not start.
    return ["--no-sandbox"]


def missing_fonts() -> list[str]:
    """The CSS font families fontconfig does not have (chromium would draw a fallback instead)."""
    fc_match = shutil.which("fc-match")
    if fc_match is None:
        return list(CSS_FONTS)
    missing = []
    for family in CSS_FONTS:
        # fc-match always answers with some font: the family it picked tells whether ours is there.
        picked = subprocess.run([fc_match, "-f", "%{family}", family], capture_output=True, text=True, check=False)
        if family not in picked.stdout.split(","):
            missing.append(family)
    return missing


def check() -> str:
    """The chromium path, after checking the fonts too; BrowserMissing says what to install."""
    path = chromium_path()
    if fonts := missing_fonts():
        raise BrowserMissing(f"fonts missing: {', '.join(fonts)}: {INSTALL_HINT}")
    return path


# True once every chart canvas of the page is drawn (static/console/console.js sets data-drawn); the
# first time it is, remembers when (ms since the navigation started: performance.now()).
_ALL_DRAWN_JS = """() => {
  const cs = [...document.querySelectorAll("canvas[data-chart]")];
  if (!cs.length || cs.some((c) => c.dataset.drawn === undefined)) return false;
  return (window.__pgconsoleDrawnAt ??= performance.now());
}"""


def fully_drawn_ms(page, url: str, *, timeout_ms: float = 30_000) -> float:
    """Opens `url` in a Playwright page and returns the milliseconds from the start of the navigation
    until every chart on it was drawn (the console's "fully drawn" time, measured in the browser)."""
    page.goto(url, wait_until="commit")
    return float(page.wait_for_function(_ALL_DRAWN_JS, timeout=timeout_ms, polling="raf").json_value())
