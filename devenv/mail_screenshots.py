"""Screenshots of a weekly report mail as mail clients show it: its HTML (``manage.py reports preview --out
FILE.html``, charts inline) in Debian's headless chromium at 600 px (a desktop client's reading pane) and
375 px (a phone), the whole height:

    .venv/bin/python -m devenv.mail_screenshots FILE.html --out docs/screenshots

writes weekly-report.png and weekly-report-narrow.png. tests/reports/test_weekly_screenshots.py takes them
of the known history's report (and writes them to docs/screenshots when WEEKLY_SCREENSHOTS_DIR says so)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from devenv import browser as chromium

WIDTHS = {"weekly-report": 600, "weekly-report-narrow": 375}
# Measured in the page: how wide it lays out, and each image's drawn and natural widths.
_LAYOUT_JS = """() => ({
  scrollWidth: document.documentElement.scrollWidth,
  images: [...document.images].map((i) => [i.getBoundingClientRect().width, i.naturalWidth]),
})"""


@dataclass(frozen=True)
class Shot:
    path: Path
    width: int  # the window's
    scroll_width: int  # the page's: wider than the window means a reader scrolls sideways
    images: list[tuple[float, int]]  # (drawn width, natural width; 0: not loaded)


def take(html: str, out: Path) -> list[Shot]:
    """Saves a PNG per width of WIDTHS under `out`; returns what each showed."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium.check(), headless=True, args=chromium.launch_args())
        try:
            for name, width in WIDTHS.items():
                page = b.new_page(viewport={"width": width, "height": 800}, locale="en-US")
                page.set_content(html, wait_until="load")
                page.evaluate("() => document.fonts.ready.then(() => true)")
                layout = page.evaluate(_LAYOUT_JS)
                path = out / f"{name}.png"
                page.screenshot(path=str(path), type="png", full_page=True)
                shots.append(Shot(path, width, layout["scrollWidth"], [tuple(i) for i in layout["images"]]))
                page.close()
        finally:
            b.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devenv.mail_screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the mail's HTML (manage.py reports preview --out FILE.html)")
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args(argv)
    try:
        for shot in take(args.html.read_text(encoding="utf-8"), args.out):
            wide = "" if shot.scroll_width <= shot.width else f"  (wider than the window: {shot.scroll_width} px)"
            print(f"{shot.path}  {shot.width} px wide  {shot.path.stat().st_size // 1024} KB{wide}")
    except (OSError, chromium.BrowserMissing) as exc:
        print(f"mail_screenshots: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
