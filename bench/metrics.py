"""Benchmark 10: what a /metrics scrape of a fleet costs the console (console/views/metrics.py).

A fleet of SERVERS servers (the read-tier benchmark's model, bench/fleet.py: a snapshot every 5 minutes over the
last day, written through the bulk path and rolled up with the project's code) in one organization, a tenth of it
in another. Timed in this process, REPS times each: an operator's scrape (every server and the console's health)
built and encoded as OpenMetrics and as Prometheus' text, an organization's token's, and the baseline, the fleet
selector alone over the same window.
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import User
from django.utils import timezone
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from bench import fleet as fleet_history
from bench.metrics_report import MetricsRun
from console.views.metrics import scrape
from inventory.models import Membership, Organization, Server
from readtier import Window, fleet_summary

SERVERS, STATEMENTS, REPS = 1_000, 20, 7


def _timed(call, reps: int) -> tuple[list[float], object]:
    out, value = [], None
    for _ in range(reps):
        started = time.perf_counter()
        value = call()
        out.append((time.perf_counter() - started) * 1000)
    return out, value


def run(*, quick: bool = False, log=print) -> MetricsRun:
    started = time.perf_counter()
    servers, reps = (100, 3) if quick else (SERVERS, REPS)
    now = timezone.now().replace(second=0, microsecond=0)
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as workdir:
        pending = fleet_history.start(
            servers=servers,
            statements=STATEMENTS,
            days=1,
            last_taken_at=now,
            workdir=Path(workdir),
            step_s=300,
            prefix="bench-metrics",
            log=log,
        )
        fl = fleet_history.finish(pending, log=log)
    history_s = time.perf_counter() - started
    fleet = Server.objects.filter(pk__in=fl.server_ids)
    fleet.update(last_attempt_at=now, last_success_at=now, consecutive_failures=0)
    ours, theirs = (Organization.objects.create(name=f"bench-metrics-{k}-{int(time.time())}") for k in "ab")
    fleet.update(organization=ours)
    tenth = fl.server_ids[: servers // 10]
    Server.objects.filter(pk__in=tenth).update(organization=theirs)
    stamp = int(time.time())
    operator = User.objects.create_superuser(f"bench-metrics-operator-{stamp}", password=None)
    viewer = User.objects.create_user(f"bench-metrics-viewer-{stamp}", password=None)
    Membership.objects.create(user=viewer, organization=theirs, role=Membership.Role.VIEWER)
    scrape_ms, body = _timed(lambda: generate_openmetrics(scrape(operator)), reps)
    text_ms, _ = _timed(lambda: generate_latest(scrape(operator)), reps)
    organization_ms, _ = _timed(lambda: generate_openmetrics(scrape(viewer)), reps)
    window = Window(timezone.now() - timedelta(minutes=5), timezone.now())
    selector_ms, _ = _timed(lambda: fleet_summary(server_ids=fl.server_ids, window=window), reps)
    series = sum(len(f.samples) for f in text_string_to_metric_families(generate_latest(scrape(operator)).decode()))
    log(f"  metrics: {servers} servers, scrape {sorted(scrape_ms)[len(scrape_ms) // 2]:.0f} ms, {len(body):,} bytes")
    return MetricsRun(
        servers=servers,
        statements=STATEMENTS,
        snapshots=fl.snapshots,
        scrape_ms=scrape_ms,
        scrape_bytes=len(body),
        series=series,
        text_ms=text_ms,
        selector_ms=selector_ms,
        organization_ms=organization_ms,
        organization_servers=len(tenth),
        history_s=history_s,
        elapsed_s=time.perf_counter() - started,
    )
