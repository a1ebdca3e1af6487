"""The /metrics benchmark's figures (bench/metrics.py) and its part of the report: target rows, console lines, its
section of docs/benchmarks.md and its method. No database here: the figures are plain data."""

from __future__ import annotations

from dataclasses import dataclass

from bench.stats import median

SCRAPE_MS = 500.0  # issue 39: a scrape of 1,000 servers in at most 500 ms of server time
SCRAPE_BYTES = 5_000_000  # and 5 MB


@dataclass(frozen=True)
class MetricsRun:
    servers: int
    statements: int
    snapshots: int  # written for the fleet
    scrape_ms: list[float]  # an operator's scrape, built and encoded (OpenMetrics), per run
    scrape_bytes: int
    series: int  # samples in one scrape
    text_ms: list[float]  # the same in Prometheus' text format
    selector_ms: list[float]  # baseline: fleet_summary alone over the same window (the fleet page's read)
    organization_ms: list[float]  # one organization's token (a tenth of the fleet)
    organization_servers: int
    history_s: float  # writing the fleet's history
    elapsed_s: float = 0.0


def _ms(values: list[float]) -> str:
    return f"{median(values):.0f} / {max(values):.0f}" if values else "–"


def checks(run: MetricsRun) -> list[tuple[str, str, str, bool]]:
    return [
        (
            f"/metrics scrape of {run.servers:,} servers by an operator's token, built and encoded (OpenMetrics; "
            "median / max), and its size",
            f"≤ {SCRAPE_MS:g} ms, ≤ {SCRAPE_BYTES / 1e6:g} MB",
            f"{_ms(run.scrape_ms)} ms, {run.scrape_bytes / 1e6:.2f} MB, {run.series:,} samples "
            f"(the fleet selector alone {_ms(run.selector_ms)} ms)",
            bool(run.scrape_ms) and max(run.scrape_ms) <= SCRAPE_MS and run.scrape_bytes <= SCRAPE_BYTES,
        )
    ]


def summary_lines(run: MetricsRun) -> list[str]:
    return [
        f"  metrics: {run.servers:,} servers, operator's scrape {_ms(run.scrape_ms)} ms ({run.scrape_bytes:,} bytes, "
        f"{run.series:,} samples), Prometheus text {_ms(run.text_ms)} ms, fleet selector alone "
        f"{_ms(run.selector_ms)} ms; an organization's ({run.organization_servers} servers) "
        f"{_ms(run.organization_ms)} ms"
    ]


def markdown(run: MetricsRun, table) -> list[str]:
    rows = [
        ["an operator's scrape, OpenMetrics (every server, the console's health)", _ms(run.scrape_ms)],
        ["the same, Prometheus' text format 0.0.4", _ms(run.text_ms)],
        [f"an organization's token ({run.organization_servers} servers)", _ms(run.organization_ms)],
        ["baseline: fleet_summary alone over the same window (the fleet page's read)", _ms(run.selector_ms)],
    ]
    return [
        "",
        "### 10. /metrics for Prometheus",
        "",
        f"{run.servers:,} servers of {run.statements} statements, {run.snapshots:,} snapshots written through the "
        f"bulk path ({run.history_s:.0f} s), a snapshot every 5 minutes over the last day. One scrape: "
        f"{run.scrape_bytes:,} bytes, {run.series:,} samples. Each row is 7 scrapes, median / max ms.",
        "",
        *table(rows, ["what", "ms"]),
    ]


METHOD = """- **/metrics (10).** `bench/metrics.py`: the read-tier benchmark's fleet model (bench/fleet.py) for 1,000
  servers, registered and rolled up through the product; each scrape is `console.views.metrics.scrape` for the
  user of the token and prometheus_client's encoder, as the view runs them without the cache (its HTTP handling
  aside); the baseline is the fleet selector alone over the same window."""
