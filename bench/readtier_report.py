"""The read-tier benchmark's part of the report: target rows, console lines, docs/benchmarks.md section."""

from __future__ import annotations

from datetime import datetime

from bench.measured import WINDOWS, Measured
from bench.readtier import DEEP_PAGE, PAGE_SIZE, TEXT


def _top(res: dict) -> dict[str, list[Measured]]:
    out: dict[str, list[Measured]] = {}
    for m in res["measured"]:
        if m.selector == "top_statements":
            out.setdefault(m.window, []).append(m)
    return out


def checks(res: dict) -> list[tuple[str, str, str, bool | None]]:
    rows = []
    for label, _, target in WINDOWS:
        ms = _top(res).get(label, [])
        ok = [m for m in ms if m.ms]
        if not ok:
            rows.append((f"`top_statements`, {label} window", f"p95 ≤ {target} ms", "not measured", False))
            continue
        worst = max(ok, key=lambda m: m.p95)
        rows.append(
            (
                f"`top_statements`, {label} window: worst p95 of {len(ok)} calls (every order, with and "
                f"without a text filter, page 1 and {DEEP_PAGE})",
                f"p95 ≤ {target} ms",
                f"{worst.p95:.1f} ms ({worst.order}{', text' if worst.text else ''}, page {worst.page})",
                worst.p95 <= target and len(ok) == len(ms),
            )
        )
    for m in res["measured"]:
        if m.selector == "top_statements" or m.target_ms is None:
            continue
        got = f"{m.p95:.1f} ms (median {m.median:.1f}, {m.queries} queries)" if m.ms else m.missing
        rows.append((f"`{m.selector}`, {m.label}", f"p95 ≤ {m.target_ms:g} ms", got, m.passed or False))
    from bench import reports as reports_bench

    return rows + _page_checks(res.get("pages", [])) + reports_bench.checks(res.get("builds", []))


def _page_checks(pages: list[Measured]) -> list[tuple[str, str, str, bool | None]]:
    """Per page, the worst p95 over the ranges; the fragment's largest size."""
    from bench.pages import BROWSER_TARGET_MS, FRAGMENT_TARGET_BYTES, TARGET_MS

    rows = []
    by_page: dict[str, list[Measured]] = {}
    for m in pages:
        by_page.setdefault(m.selector, []).append(m)
    for page, ms in by_page.items():
        ok = [m for m in ms if m.ms]
        if not ok:
            rows.append((f"{page}, every range 1 h – 30 d", f"p95 ≤ {TARGET_MS} ms", ms[0].missing, False))
            continue
        worst = max(ok, key=lambda m: m.p95)
        if "browser" in page:
            rows.append(
                (
                    f"{page}: fully drawn after navigation (Debian chromium), worst p95 over the ranges",
                    f"≤ {BROWSER_TARGET_MS} ms",
                    f"{worst.p95:.0f} ms ({worst.window}, median {worst.median:.0f})",
                    worst.p95 <= BROWSER_TARGET_MS and len(ok) == len(ms),
                )
            )
            continue
        target = worst.target_ms or TARGET_MS
        where = "through the HTTP stack with a token" if page.startswith("api") else "server-side"
        ranges = "every range 1 h – 30 d" if len(ms) > 1 else ms[0].label
        rows.append(
            (
                f"{page}, {where}, {ranges}: worst p95",
                f"p95 ≤ {target:g} ms",
                f"{worst.p95:.1f} ms ({worst.window}"
                + (f", {worst.queries} queries)" if worst.queries is not None else ")"),
                worst.p95 <= target and len(ok) == len(ms),
            )
        )
        if page == "api top statements":
            from bench.api import PAGE_TARGET_BYTES

            biggest = max(ok, key=lambda m: m.bytes)
            rows.append(
                (
                    f"{page}: JSON size of a page of 100, largest over the ranges",
                    f"≤ {PAGE_TARGET_BYTES // 1024} KB",
                    f"{biggest.bytes / 1024:.1f} KB ({biggest.window})",
                    biggest.bytes <= PAGE_TARGET_BYTES,
                )
            )
        if "fragment" in page:
            biggest = max(ok, key=lambda m: m.bytes)
            rows.append(
                (
                    f"{page}: HTML size, largest over the ranges",
                    f"≤ {FRAGMENT_TARGET_BYTES // 1024} KB",
                    f"{biggest.bytes / 1024:.1f} KB ({biggest.window})",
                    biggest.bytes <= FRAGMENT_TARGET_BYTES,
                )
            )
    return rows


def _ms(m: Measured | None) -> str:
    return f"{m.median:.1f} / {m.p95:.1f}" if m and m.ms else "–"


def _d(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M}"


def markdown(res: dict, table) -> list[str]:
    size, h, fl = res["size"], res["history"], res["fleet"]
    sec = res["seconds"]
    L = [
        "",
        f"### 4. Read tier: selectors over {size.days} days of one server and a fleet of {size.fleet_servers}",
        "",
        f"One server, {h.statements:,} synthetic statements (the footprint benchmark's model, 10% changing per "
        f"minute), 1-minute snapshots from {_d(h.first_taken_at)} to {_d(h.last_taken_at)} UTC, default retention "
        "(raw 3 days, hourly 60), daily long enough to reach those dates (bench/env.py). Written in "
        f"{sec['history'] / 60:.1f} min:",
        "",
    ]
    if h.bulk:
        L.append(
            f"- {_d(h.bulk[0])} – {_d(h.bulk[1])} ({h.snapshots_bulk:,} snapshots) by the bulk writer "
            "(bench/bulk.py: the same generator's deltas, blocks encoded byte for byte as `codec.encode`, "
            "snapshot rows with the server totals columns and wait rows COPYed per hour), then per UTC day "
            "`rollups.roll_up(now=...)` (the project's rollup builds the day's hours and the day from those "
            "rows) and `partitions.drop_expired(now=...)`;"
        )
    L.append(
        f"- {_d(h.real[0])} – {_d(h.real[1])} ({h.snapshots_real:,} snapshots) through `server_collect` "
        "(bench/synthetic.py's generator in place of the monitored server), `rollups.roll_up(now=...)` "
        "just after each hour, `partitions.drop_expired(now=...)` after each day and at the end."
    )
    rows = res["tier_rows"]
    L += [
        "",
        "Stored for this server at the end: " + ", ".join(f"`{k}` {v:,} rows" for k, v in rows.items()) + ".",
    ]
    if fl:
        L += [
            "",
            f"Fleet: {len(fl.server_ids)} servers of {fl.statements} statements, 1-minute snapshots from "
            f"{_d(fl.first_taken_at)} to {_d(fl.last_taken_at)} ({fl.snapshots:,} snapshots): baselines through "
            "`server_collect`, deltas by the bulk writer, then one `rollups.roll_up(now=...)` for all; no wait "
            f"events. Written in {sec['fleet'] / 60:.1f} min.",
        ]
    L += [
        "",
        f"Each call: {size.warmup} warm-up runs (the last one counts the selector's queries with "
        f"`selectors.db.counting()`), then {size.runs} timed runs; wall time of the call in this process "
        "(Django, the history store on the same machine). Windows end one second after the last snapshot. "
        f'Text filter: `text="{TEXT}"`; pages of {PAGE_SIZE}.',
        "",
    ]
    rows = []
    top = _top(res)
    for label, _, target in WINDOWS:
        for text in (False, True):
            for page in (1, DEEP_PAGE):
                ms = [m for m in top.get(label, []) if m.text == text and m.page == page and m.ms]
                if not ms:
                    continue
                worst = max(ms, key=lambda m: m.p95)
                q = sorted({m.queries for m in ms})
                rows.append(
                    [
                        label,
                        "yes" if text else "",
                        str(page),
                        f"{min(m.median for m in ms):.1f} – {max(m.median for m in ms):.1f}",
                        f"{worst.p95:.1f} ({worst.order})",
                        "/".join(map(str, q)),
                        f"{target}",
                        ms[0].info,
                    ]
                )
    L += ["`top_statements` (10 orders each row):", ""]
    L += table(
        rows,
        [
            "window",
            "text filter",
            "page",
            "median ms, range over orders",
            "worst p95 ms (order)",
            "queries",
            "target p95 ms",
            "matching statements",
        ],
    )
    orders = [m.order for m in top.get(WINDOWS[0][0], []) if not m.text and m.page == 1]
    rows = []
    for order in orders:
        row = [order]
        for label, _, _ in WINDOWS:
            m = next((m for m in top.get(label, []) if m.order == order and not m.text and m.page == 1), None)
            row.append(_ms(m))
        rows.append(row)
    L += ["", "Per order, page 1 without filter (median / p95 ms):", ""]
    L += table(rows, ["order", *(w for w, _, _ in WINDOWS)])
    rows = []
    for b in res["baseline"]:
        new = next((m for m in top.get(b.window, []) if m.order == "total" and not m.text and m.page == 1), None)
        ratio = f"{new.median / b.median:.3f}×" if new and new.ms and b.ms else "–"
        rows.append([b.window, _ms(new), _ms(b), ratio, b.info])
    L += [
        "",
        f"Baseline in the same run: the read path before the tier (5b72573, bench/baseline.py: decode every "
        "raw block and every old blob rollup wholly inside the window, merge in Python), order total, "
        f"{PAGE_SIZE} rows, over the same snapshots and blob rollups built from the same blocks "
        f"(1 warm-up, then {res['size'].runs} timed runs, or {res['size'].baseline_runs} where a call takes over "
        "0.3 s: a ratio of medians, not a p95 target):",
        "",
    ]
    L += table(rows, ["window", "new median / p95 ms", "old median / p95 ms", "new / old (medians)", "old path read"])
    L += [
        "",
        "Same top 50 (statement ids and execution time) from both paths: "
        + ", ".join(f"{k} {v}" for k, v in res["agreement"].items())
        + " (longer windows start before the raw retention, where the old path leaves the expired edge "
        "out and the new one reads it from the hour that holds it).",
    ]
    rows = []
    for m in res["measured"]:
        if m.selector == "top_statements":
            continue
        rows.append(
            [
                f"`{m.selector}`",
                m.label,
                _ms(m) if m.ms else m.missing,
                str(m.queries or "–"),
                f"{m.target_ms:g}" if m.target_ms else "–",
                m.info,
            ]
        )
    L += ["", "The other selectors:", ""]
    L += table(rows, ["selector", "call", "median / p95 ms", "queries", "target p95 ms", "result"])
    pages = res.get("pages", [])
    if pages:
        rows = [
            [
                m.selector,
                m.window,
                _ms(m) if m.ms else m.missing,
                str(m.queries or "–"),
                f"{m.bytes:,}" if m.bytes else "–",
            ]
            for m in pages
        ]
        L += [
            "",
            "### 5. Console pages (server-side)",
            "",
            "bench/pages.py, on the history above: each page requested through Django's test client in this "
            "process (middleware, view, selectors, template), as a superuser, DEBUG off and static files "
            "collected; ranges given in the URL as custom ranges. The fleet page lists the 200 servers of the "
            f"fleet (sorted by status, 50 a page) and the single server; 2 warm-ups, {res['size'].runs} runs. "
            "Queries: the ORM's and the selectors' together. \"Server page in the browser\": Debian's chromium "
            "(headless, Playwright, 1440×900) on a live server thread of the benchmark process, milliseconds "
            "from the start of the navigation until every chart of the page is drawn (devenv/browser.py "
            "fully_drawn_ms), one warm-up then 10 navigations per range.",
            "",
        ]
        L += table(rows, ["page", "range", "median / p95 ms", "queries", "bytes"])
        L += [
            "",
            'Rows starting with "api" are bench/api.py: the REST API through Django\'s test client with a '
            "personal token (token authentication, throttling in Redis, selectors, JSON), 2 warm-ups, "
            f"{res['size'].runs} runs each; top statements a page of 100.",
        ]
    if res.get("builds"):
        from bench import reports as reports_bench

        L += reports_bench.markdown(res["builds"])
    return L


METHOD = """- **Read tier (4).** `bench/readtier.py`. One synthetic server (`bench/synthetic.py`'s model) with
  30 days of 1-minute snapshots ending 2025-01-04 13:37 UTC: the last 3 days through `server_collect`
  and the periodic rollup after each hour, the 27 before by a bulk writer (`bench/bulk.py`: the same
  generator, blocks encoded exactly as `codec.encode` does, checked on a sample of each batch, rows
  COPYed) with the project's `rollups.roll_up` and `partitions.drop_expired` once per synthetic day.
  A fleet of 200 servers x 500 statements over the last 2 days (bulk writer; one roll_up). Every
  selector call is timed in the benchmark process (2 warm-ups, then 40 runs, 100 for the REST API's calls;
  median and p95 by linear interpolation); queries counted with `selectors.db.counting()`. The baseline is the pre-tier
  `top_statements` (commit 5b72573) over the same raw snapshots and blob rollups it would have had,
  built here from the same blocks in bench-only tables."""
