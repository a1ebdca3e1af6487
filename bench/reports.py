"""Benchmark 7: the weekly report and the audit export over the read-tier benchmark's history.

Each build runs in a fresh worker process pinned to one core (`python -m bench.reports worker ...`), as a
Celery worker would run it, so its peak memory (VmHWM) is its own. The organization holds
the 5,000-statement server and servers of the fleet (moved into it once the other benchmarks are done):
- weekly report: 20 servers, ISO week 2025-W01 (the read tier's last, partly covered week), charts
  rendered and the MIME message of one recipient built;
- audit export: 5 servers over the 30 days up to the history's end, all four formats and the zip.
The baseline in the same process is the selectors' part alone (the digest, the export's content), so
the ratio says what rendering costs on top of the reads."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

WEEKLY_TARGET_S = 10.0
EXPORT_TARGET_S = 30.0
MEMORY_TARGET_MB = 500.0
WEEKLY_SERVERS = 20
EXPORT_SERVERS = 5
WEEK = "2025-W01"
RUNS = 3


@dataclass
class BuildRun:
    name: str  # weekly report | audit export
    label: str
    target_s: float
    seconds: list[float] = field(default_factory=list)
    baseline_s: list[float] = field(default_factory=list)  # the selectors alone, same process
    peak_mb: list[float] = field(default_factory=list)
    info: str = ""
    missing: str = ""

    @property
    def worst_s(self) -> float:
        return max(self.seconds) if self.seconds else float("nan")

    @property
    def worst_mb(self) -> float:
        return max(self.peak_mb) if self.peak_mb else float("nan")


def _worker(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.reports", "worker", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ.copy(),
    )
    if out.returncode != 0:
        raise RuntimeError((out.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(*, long_server_id: int, fleet_ids: list[int], end: datetime, runs: int = RUNS, log=print) -> list[BuildRun]:
    from inventory.models import Organization, Server

    org, _ = Organization.objects.get_or_create(name="bench-reports")
    weekly_ids = [long_server_id, *fleet_ids[: WEEKLY_SERVERS - 1]]
    Server.objects.filter(pk__in=weekly_ids).update(organization=org)
    jobs = [
        (
            BuildRun(
                "weekly report", f"{len(weekly_ids)} servers ({WEEK}), charts and the MIME message", WEEKLY_TARGET_S
            ),
            ["weekly", str(org.pk), WEEK, end.isoformat()],
        ),
        (
            BuildRun(
                "audit export", f"{EXPORT_SERVERS} servers × 30 d, PDF + XLSX + CSV + JSON and the zip", EXPORT_TARGET_S
            ),
            [
                "export",
                str(org.pk),
                (end - timedelta(days=30)).isoformat(),
                end.isoformat(),
                ",".join(str(i) for i in weekly_ids[:EXPORT_SERVERS]),
            ],
        ),
    ]
    results = []
    for r, args in jobs:
        try:
            for _ in range(runs):
                got = _worker(args)
                r.seconds.append(got["seconds"])
                r.baseline_s.append(got["baseline_seconds"])
                r.peak_mb.append(got["peak_mb"])
                r.info = got["info"]
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as exc:
            r.missing = f"failed: {exc}"
        log(
            f"    {r.name}: "
            + (f"worst {r.worst_s:.2f} s, peak {r.worst_mb:.0f} MB ({r.info})" if r.seconds else r.missing)
        )
        results.append(r)
    return results


def checks(results: list[BuildRun]) -> list[tuple[str, str, str, bool | None]]:
    rows = []
    for r in results:
        if not r.seconds:
            rows.append((f"{r.name}: {r.label}", f"≤ {r.target_s:g} s", r.missing, False))
            continue
        rows.append(
            (
                f"{r.name}: {r.label}, one core, worst of {len(r.seconds)} fresh processes",
                f"≤ {r.target_s:g} s",
                f"{r.worst_s:.2f} s (selectors alone {max(r.baseline_s):.2f} s)",
                r.worst_s <= r.target_s,
            )
        )
        rows.append(
            (
                f"{r.name}: peak memory of the worker process (VmHWM)",
                f"≤ {MEMORY_TARGET_MB:g} MB",
                f"{r.worst_mb:.0f} MB",
                r.worst_mb <= MEMORY_TARGET_MB,
            )
        )
    return rows


def markdown(results: list[BuildRun]) -> list[str]:
    lines = [
        "",
        "### 7. Weekly report and audit export",
        "",
        __doc__.split("\n\n", 1)[1].strip(),
        "",
        "| build | runs (s) | selectors alone (s) | rendering / selectors | peak memory (MB) | what it made |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if not r.seconds:
            lines.append(f"| {r.name} | {r.missing} | | | | |")
            continue
        ratio = (sum(r.seconds) - sum(r.baseline_s)) / sum(r.baseline_s) if sum(r.baseline_s) else float("nan")
        lines.append(
            f"| {r.name}: {r.label} | {', '.join(f'{s:.2f}' for s in r.seconds)} | "
            f"{', '.join(f'{s:.2f}' for s in r.baseline_s)} | {ratio:.2f}× | "
            f"{', '.join(f'{m:.0f}' for m in r.peak_mb)} | {r.info} |"
        )
    return lines


# -- the worker process ----------------------------------------------------------------------------


def _one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _weekly(org_id: int, week_label: str, now: datetime) -> dict:
    from reports.digest import organization_digest
    from reports.mail import weekly_message
    from reports.weekly import weekly_report
    from reports.weeks import parse_week

    week = parse_week(week_label, time_zone="UTC")
    t0 = time.perf_counter()
    digest = organization_digest(organization_id=org_id, week=week, now=now)
    baseline = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = weekly_report(organization_id=org_id, week=week, now=now)
    message = weekly_message(report, to="bench@example.org", unsubscribe_url="http://127.0.0.1/u/x").message()
    size = len(message.as_bytes())
    seconds = time.perf_counter() - t0
    info = f"{len(digest.servers)} servers, {len(report.images)} charts, {size / 1024:.0f} KB of mail"
    return {"seconds": seconds, "baseline_seconds": baseline, "info": info}


def _export(org_id: int, start: datetime, end: datetime, server_ids: list[int]) -> dict:
    import tempfile
    from pathlib import Path

    from exports.audit import audit_content
    from exports.services import audit_export_write
    from readtier import Window

    window = Window(start, end)
    t0 = time.perf_counter()
    audit_content(organization_id=org_id, server_ids=server_ids, window=window)
    baseline = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="bench-export-") as out:
        t0 = time.perf_counter()
        written = audit_export_write(
            organization_id=org_id,
            server_ids=server_ids,
            window=window,
            formats=["pdf", "xlsx", "csv", "json"],
            out_dir=Path(out),
        )
        seconds = time.perf_counter() - t0
    size = {w.name.rsplit(".", 1)[-1]: w.size_bytes for w in written if w.name.endswith((".zip", ".pdf", ".xlsx"))}
    size["json"] = next(w.size_bytes for w in written if w.name == "audit.json")
    info = f"{len(written)} files; " + ", ".join(f"{k} {v / 1024:.0f} KB" for k, v in sorted(size.items()))
    return {"seconds": seconds, "baseline_seconds": baseline, "info": info}


def _peak_rss_mb() -> float:
    """This process's own peak resident set: VmHWM, the high-water mark of the memory it exec'd into.
    getrusage's ru_maxrss is no good here: Linux carries the parent's peak across fork/vfork and exec (a
    child of the benchmark, which holds the fleet's history, read 489 MB for every build)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(argv: list[str]) -> None:
    _one_core()
    import django

    django.setup()
    kind, org_id = argv[0], int(argv[1])
    if kind == "weekly":
        got = _weekly(org_id, argv[2], datetime.fromisoformat(argv[3]))
    else:
        got = _export(
            org_id,
            datetime.fromisoformat(argv[2]),
            datetime.fromisoformat(argv[3]),
            [int(i) for i in argv[4].split(",")],
        )
    got["peak_mb"] = _peak_rss_mb()
    print(json.dumps(got))


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    worker(sys.argv[2:])
