"""python -m bench [--quick] [--only NAME ...] [--keep] [--no-docs] [--markdown PATH] [--scale-levels N,N,...]
[--soak DURATION]

Runs the nine benchmarks (collection time, history footprint, ingest throughput, read tier, fleet scale, alert
evaluation, plans of the top statements, the schema reading, a /metrics scrape of 1,000 servers), prints the
figures and writes docs/benchmarks.md. Starts its own history
store with production durability (PostgreSQL 17 on port 57100, database pgconsole_bench) and its own monitored
PostgreSQL 17 on port 57017 (bench/env.py), both stopped at the end.

The fleet scale (bench/scale.py, `--only scale` alone) runs beat and celery workers as docker-compose.yml
starts them over N servers on 3 more clusters, N stepped up (100, 250, 500, 1,000, then 1,500 while it keeps
up; --scale-levels or BENCH_SCALE_LEVELS), BENCH_SCALE_MINUTES (5) measured per level, once with one
collection worker and again with two (BENCH_SCALE_WORKERS=1: the first alone), then 1,000 servers with plans off
and on again, back to back (BENCH_SCALE_PLANS_OFF=0: not), then once more with the web server asked for /metrics
every 15 s (BENCH_SCALE_SCRAPE=0: not): 80 to 95 minutes. It writes its own section of
docs/benchmarks.md (any whole run that is not --quick, alone or in a `make bench`).

The alert evaluation (bench/alerts.py, `--only alerts` alone: about 15 minutes) times every default rule over
an organization of 500 servers with 8 days of history, as the workers evaluate it, and the regression rule's
baselines read both ways; it writes its own section of docs/benchmarks.md too.

The plans of the top statements (bench/plans.py, half a minute) run on the same monitored cluster: a day of
plan rounds at the PLANS defaults, a worst case for storage and a locked table, beside EXPLAINs by hand.

With --soak DURATION (2h, 10m, 600) only the soak runs (bench/soak.py): a worker, beat and gunicorn
under the demo's workloads for that long, their memory, snapshot lag, errors and history growth; a
run of 2 hours or more writes its own section of docs/benchmarks.md, a shorter one only --markdown PATH.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import env, report, scale, scale_report, soak

NAMES = ("collection", "footprint", "ingest", "readtier", "scale", "alerts", "plans", "schema", "metrics")
# Synthetic days (UTC) of the footprint and ingest runs: far from "now", so that their partitions
# are theirs alone (the collection benchmark writes today's).
FOOTPRINT_DAY = datetime(2025, 1, 15, tzinfo=UTC)
INGEST_DAY = datetime(2025, 2, 15, tzinfo=UTC)
# The read-tier benchmark's history runs from 2024-12-05 to 2025-01-04 (bench/readtier.py); it runs
# last and empties the history tables first.


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="few snapshots, small levels (a smoke test; no docs)")
    p.add_argument("--only", nargs="+", choices=NAMES, help="run only these benchmarks")
    p.add_argument("--keep", action="store_true", help="keep the benchmark database and clusters running")
    p.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    p.add_argument("--markdown", metavar="PATH", help="also write the report to PATH (any run, --quick and --only too)")
    p.add_argument(
        "--skip-uniform-footprint",
        action="store_true",
        help="do not measure the footprint again with a uniform 10%% (the worst case for rollups)",
    )
    p.add_argument(
        "--scale-levels",
        type=scale.parse_levels,
        metavar="N,N,...",
        help="the fleet sizes of the scale benchmark (default 100,250,500,1000,1500; env BENCH_SCALE_LEVELS)",
    )
    p.add_argument(
        "--soak",
        metavar="DURATION",
        type=soak.parse_duration,
        help="run only the soak for DURATION (2h, 10m, 600): worker, beat and gunicorn under load",
    )
    args = p.parse_args(argv)
    command = " ".join([os.path.relpath(sys.executable), "-m", "bench", *(sys.argv[1:] if argv is None else argv)])
    if args.soak is not None:
        _run_keys()
        return soak.run(args.soak, markdown=args.markdown, no_docs=args.no_docs, keep=args.keep, command=command)
    only = set(args.only or NAMES)

    started = time.perf_counter()
    env.configure_environment()
    _run_keys()
    from devenv.fleet import start_many, stop_many

    specs = [] if os.environ.get("BENCH_DATABASE_URL") else [env.history_spec()]
    if only & {"collection", "plans", "schema"}:
        specs.append(env.monitored_spec())
    if "schema" in only:
        specs.append(env.advice_spec())
    clusters = list(start_many(specs).values())
    print(f"clusters up in {time.perf_counter() - started:.1f}s: {', '.join(c.name for c in clusters)}", flush=True)
    try:
        return _run(args, only, clusters, started, command)
    finally:
        if clusters and not args.keep:
            stop_many(clusters)


def _run_keys() -> None:
    """Keys for this run only: Django runs with DEBUG off (as in production), which refuses the
    development keys, and the benchmark's database is recreated each run, so nothing outlives them."""
    from console import keys

    os.environ.setdefault("SECRET_KEY", keys.generate_secret_key())
    os.environ.setdefault("CREDENTIALS_KEY", keys.generate_credentials_key())


def _scale_size(args) -> tuple[tuple[int, ...], float]:
    """The scale benchmark's levels and minutes per level: the option, the environment, --quick, the defaults."""
    levels = args.scale_levels or (
        scale.parse_levels(os.environ["BENCH_SCALE_LEVELS"]) if os.environ.get("BENCH_SCALE_LEVELS") else None
    )
    minutes = float(os.environ.get("BENCH_SCALE_MINUTES") or 0) or None
    if args.quick:
        return levels or scale.QUICK_LEVELS, minutes or scale.QUICK_MINUTES
    return levels or scale.LEVELS, minutes or scale.MINUTES


def _write(results: dict, path, *, main_report: bool) -> None:
    """The report to ``path``: the main one (keeping the fleet-scale section it held) and the fleet-scale section
    of this run, if any."""
    path = Path(path)
    kept = scale_report.section(path.read_text()) if path.exists() else ""
    if main_report:
        report.write_markdown(results, path)
        if kept:
            scale_report.write_section(kept, path)
    if results.get("scale") is not None:
        scale_report.write_section(results["scale"], path)
    print(f"\nwrote {path}")


def _run(args, only: set[str], clusters: list, started: float, command: str) -> int:
    write_docs = not args.no_docs and not args.quick and only == set(NAMES)
    print(f"benchmark history database: {env.BENCH_DB} (recreated)", flush=True)
    env.recreate_history_database()
    env.setup_django()

    now = datetime.now(UTC)
    results: dict = {
        "machine": env.machine(),
        "started_at": now,
        "code": env.code_version(),
        "date": os.environ.get("BENCH_DATE") or now.date().isoformat(),
    }
    try:
        if "collection" in only:
            from bench import collection

            cluster = next(c for c in clusters if c.name == env.BENCH_CLUSTER)
            results["machine"].postgres_monitored = cluster.execute("SELECT version()")[0][0]
            print(
                f"[1/9] collection time: monitored {cluster.name} (PostgreSQL {cluster.major}, port {cluster.port})",
                flush=True,
            )
            if args.quick:
                results["collection"] = collection.run(
                    cluster, levels=(100, 500), snapshots={100: 5, 500: 20}, sampled=1, breakdown=5, all_changed=2
                )
            else:
                results["collection"] = collection.run(cluster)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "footprint" in only:
            from bench import footprint

            print("[2/9] history footprint: 1,440 synthetic 1-minute snapshots of 5,000 entries", flush=True)
            results["footprint"] = footprint.run(day=FOOTPRINT_DAY)
            if not args.skip_uniform_footprint and not args.quick:
                print("      again with a uniform 10% per minute", flush=True)
                results["footprint_uniform"] = footprint.run(day=FOOTPRINT_DAY, uniform=True)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "ingest" in only:
            from bench import ingest

            print("[3/9] ingest throughput of the delta writer at 5,000 entries", flush=True)
            if args.quick:
                results["ingest"] = ingest.run(day=INGEST_DAY, snapshots=30, warmup=3, all_changed=5, breakdown=5)
            else:
                results["ingest"] = ingest.run(day=INGEST_DAY)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "readtier" in only:
            from bench import readtier

            print(
                "[4/9] read tier: selectors over 30 days of one 5,000-statement server and a fleet of 200", flush=True
            )
            results["readtier"] = readtier.run(size=readtier.QUICK if args.quick else readtier.FULL)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "scale" in only:
            levels, minutes = _scale_size(args)
            sizes = ", ".join(map(str, levels))
            workers = " then ".join(str(n) for n in scale.WORKER_COUNTS)
            print(f"[5/9] fleet scale: {sizes} servers, {minutes:g} min each, {workers} collection workers", flush=True)
            history = next((c for c in clusters if c.name == env.HISTORY_CLUSTER), None)
            results["scale"] = scale.run(
                levels=levels, minutes=minutes, history=history, keep=args.keep, command=command
            )
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "alerts" in only:
            from bench import alerts

            size = alerts.QUICK if args.quick else alerts.FULL
            print(f"[6/9] alert evaluation: {size.servers} servers, {size.days} days of history", flush=True)
            results["alerts"] = alerts.run(size=size)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "plans" in only:
            from bench import plans

            cluster = next(c for c in clusters if c.name == env.BENCH_CLUSTER)
            results["machine"].postgres_monitored = cluster.execute("SELECT version()")[0][0]
            print(
                f"[7/9] plans of the top statements: monitored {cluster.name} (PostgreSQL {cluster.major}), "
                "a day of rounds at the defaults, a worst case for storage, a locked table",
                flush=True,
            )
            results["plans"] = plans.run(cluster, quick=args.quick)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "schema" in only:
            from bench import schema

            cluster = next(c for c in clusters if c.name == env.BENCH_CLUSTER)
            results["machine"].postgres_monitored = cluster.execute("SELECT version()")[0][0]
            print(
                f"[8/9] schema reading: monitored {cluster.name} (PostgreSQL {cluster.major}), databases of "
                "1,000 and 12,000 tables",
                flush=True,
            )
            advice = next(c for c in clusters if c.name == env.ADVICE_CLUSTER)
            results["schema"] = schema.run(cluster, advice, quick=args.quick)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        if "metrics" in only:
            from bench import metrics

            print("[9/9] /metrics: a scrape of a fleet of 1,000 servers", flush=True)
            results["metrics"] = metrics.run(quick=args.quick)
            print(f"      done at {time.perf_counter() - started:.0f}s", flush=True)
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute(
                "SELECT version(), current_setting('fsync'), current_setting('synchronous_commit'), "
                "current_setting('full_page_writes')"
            )
            version, fsync, sync_commit, fpw = cur.fetchone()
            machine = results["machine"]
            machine.postgres_history = version
            machine.history_durability = (
                f"fsync = {fsync}, synchronous_commit = {sync_commit}, full_page_writes = {fpw}"
            )
    finally:
        if not args.keep:
            env.drop_history_database()
    results["elapsed_s"] = time.perf_counter() - started
    print()
    if only - {"scale", "alerts"}:
        print(report.text(results))
    ran = results.get("scale")
    if ran is not None:
        print(scale_report.text(ran))
    if results.get("alerts") is not None:
        from bench import alerts_report

        print(alerts_report.text(results["alerts"]))
        section = alerts_report.markdown_section(
            results["alerts"], machine=results["machine"], code=results["code"], command=command, date=results["date"]
        )
        if not args.no_docs and not args.quick:
            alerts_report.write_section(section, report.DOC)
        if args.markdown:
            alerts_report.write_section(section, args.markdown)
    if not args.no_docs and not args.quick:
        # The fleet scale writes its section alone too, as the soak does; an interrupted one keeps the last.
        whole_scale = ran is not None and not ran.interrupted
        if write_docs or whole_scale:
            _write({**results, "scale": ran if whole_scale else None}, report.DOC, main_report=write_docs)
    if args.markdown:
        _write(results, args.markdown, main_report=bool(only - {"scale", "alerts"}))
    # A missed target is a finding, not a failure of the command: exit 0, the report says FAIL.
    return 0


if __name__ == "__main__":
    sys.exit(main())
