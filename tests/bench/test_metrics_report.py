"""bench/metrics_report.py: the /metrics benchmark's target row passes within 500 ms and 5 MB and fails past
either, and its report lines carry the figures."""

from bench.metrics_report import MetricsRun, checks, markdown, summary_lines


def _run(**changes) -> MetricsRun:
    figures = dict(
        servers=1000,
        statements=20,
        snapshots=288_000,
        scrape_ms=[120.0, 140.0, 180.0],
        scrape_bytes=1_500_000,
        series=17_000,
        text_ms=[110.0, 130.0, 150.0],
        selector_ms=[60.0, 70.0, 80.0],
        organization_ms=[20.0, 25.0, 30.0],
        organization_servers=100,
        history_s=90.0,
    )
    return MetricsRun(**{**figures, **changes})


def test_the_target_row():
    ((what, target, measured, ok),) = checks(_run())
    assert ok and "1,000 servers" in what and target == "≤ 500 ms, ≤ 5 MB"
    assert measured.startswith("140 / 180 ms, 1.50 MB, 17,000 samples (the fleet selector alone 70 / 80 ms)")
    assert not checks(_run(scrape_ms=[120.0, 501.0]))[0][3]  # one scrape over the time
    assert not checks(_run(scrape_bytes=5_000_001))[0][3]
    assert not checks(_run(scrape_ms=[]))[0][3]  # nothing measured is no pass


def test_the_report_lines():
    (line,) = summary_lines(_run())
    assert "operator's scrape 140 / 180 ms (1,500,000 bytes" in line and "(100 servers) 25 / 30 ms" in line
    section = "\n".join(markdown(_run(), lambda rows, header: [" | ".join(header)] + [" | ".join(r) for r in rows]))
    assert "### 10. /metrics for Prometheus" in section and "288,000 snapshots" in section
