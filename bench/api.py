"""Benchmark 6: the REST API over the read-tier benchmark's history, end to end through the HTTP stack:
Django's test client sends a personal token (`Authorization: Bearer`), so every request runs the
middleware, DRF's token authentication and throttling (counters in Redis), the selectors and the JSON
serialization. Top statements for every window from 1 hour to 30 days (a page of 100, with its size in
bytes), a statement's 30-day series, and the fleet summary of 200 servers. The objects that exist before the
requests are frozen out of the garbage collector's reach, as console/wsgi.py does in a web worker."""

from __future__ import annotations

import gc
from datetime import datetime, timedelta

from bench.measured import WINDOWS, Measured, measure

TOP_TARGET_MS = 100
SERIES_TARGET_MS = 60
FLEET_TARGET_MS = 200
PAGE_TARGET_BYTES = 100 * 1024
TOP_PAGE_SIZE = 100


def _window(length: timedelta, end: datetime) -> dict[str, str]:
    return {"from": (end - length).isoformat(), "to": end.isoformat()}


def run(
    *, server_id: int, statement_id: int, fleet_ids: list[int] | None, end: datetime, runs: int, warmup: int, log=print
) -> list[Measured]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.tokens import token_create

    user, _ = get_user_model().objects.update_or_create(username="bench-api", defaults={"is_superuser": True})
    _, secret = token_create(user=user, name="bench")
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {secret}")
    calls: list[tuple[Measured, str, dict]] = []
    for label, length, _ in WINDOWS:
        calls.append(
            (
                Measured("api top statements", f"{label}, page of {TOP_PAGE_SIZE}", TOP_TARGET_MS, window=label),
                f"/api/v1/servers/{server_id}/statements/",
                {**_window(length, end), "order_by": "total", "page_size": TOP_PAGE_SIZE},
            )
        )
    month = _window(timedelta(days=30), end)
    calls.append(
        (
            Measured("api statement series", "30 d", SERIES_TARGET_MS, window="30 d"),
            f"/api/v1/statements/{statement_id}/series/",
            month,
        )
    )
    if fleet_ids:
        calls.append(
            (
                Measured("api fleet", f"{len(fleet_ids)} servers, 24 h", FLEET_TARGET_MS, window="24 h"),
                "/api/v1/fleet/",
                {**_window(timedelta(days=1), end), "page_size": 500},
            )
        )
    # As console/wsgi.py does in a worker: what exists before the requests (here also this process's history
    # build) is frozen, so the collector's full collections scan only what the requests make.
    gc.collect()
    gc.freeze()
    try:
        return _run_calls(client, calls, runs=runs, warmup=warmup, log=log)
    finally:
        gc.unfreeze()


def _run_calls(client, calls, *, runs: int, warmup: int, log) -> list[Measured]:
    out = []
    for m, url, params in calls:
        sizes: list[int] = []

        def get(url=url, params=params, sizes=sizes):
            response = client.get(url, params)
            if response.status_code != 200:
                kind = response.get("Content-Type", "")
                detail = response.json().get("message", "") if kind.startswith("application/json") else "no such URL"
                raise RuntimeError(f"{url} answered {response.status_code}: {detail[:200]}")
            sizes.append(len(response.content))
            return response

        try:
            measure(m, get, warmup=warmup, runs=runs, counting=None)
        except RuntimeError as exc:  # an endpoint not there (yet): a finding, not a crash
            m.missing = str(exc)
        if sizes:
            m.bytes = max(sizes)
            over = m.selector == "api top statements" and m.bytes > PAGE_TARGET_BYTES
            m.info = f"{m.bytes:,} bytes" + (f" (over {PAGE_TARGET_BYTES // 1024} KB)" if over else "")
        out.append(m)
        log(f"    {m.selector} {m.label}: " + (f"p95 {m.p95:.0f} ms, {m.info}" if m.ms else m.missing))
    return out
