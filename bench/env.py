"""The benchmark's private world: its own history store and its own monitored cluster.

* History: PostgreSQL 17 cluster ``bench-history`` on port 57100 with production durability
  (``fsync``, ``synchronous_commit`` and ``full_page_writes`` on: the shared development store on
  54320 runs with them off), database ``pgconsole_bench`` created fresh at every run and migrated
  programmatically. Django is pointed at it through DATABASE_URL before setup, so the tests' and
  the demo's database is never touched. BENCH_DATABASE_URL points the run at another store.
* Monitored: one PostgreSQL 17 cluster ``bench-pg17`` under .run/, started with devenv.
  Ports: the benchmarks use 57000 + major (here 57017) and 57100 (history). devenv's port map
  (devenv/ports.py) reserves 55400+ (tests), 55500+ (extra test clusters), 56400+ (demo) and
  54320 (history); 57000+ is free and used by nothing but bench/.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BENCH_PORT_BASE = 57000  # bench-only monitored clusters: 57000 + major (see the module docstring)
BENCH_MAJOR = 17
BENCH_PORT = BENCH_PORT_BASE + BENCH_MAJOR
BENCH_CLUSTER = f"bench-pg{BENCH_MAJOR}"
BENCH_DB = os.environ.get("BENCH_DATABASE_NAME", "pgconsole_bench")
APP_DB = "app"
MONITOR_USER = "monitor"
MONITOR_PASSWORD = "monitor-pw"


HISTORY_CLUSTER = "bench-history"
HISTORY_PORT = BENCH_PORT_BASE + 100
# What a production history store runs with (devenv's clusters turn these off for speed).
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def history_spec():
    from devenv.fleet import ClusterSpec
    from devenv.history import HISTORY_MAJOR

    return ClusterSpec(
        name=HISTORY_CLUSTER,
        major=HISTORY_MAJOR,
        port=HISTORY_PORT,
        settings=dict(DURABLE),
        preload=["pg_stat_statements"],
        fresh=True,
    )


def _admin_url() -> str:
    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url.rsplit("/", 1)[0] + "/postgres"
    return f"postgresql://postgres@127.0.0.1:{HISTORY_PORT}/postgres"


def configure_environment() -> str:
    """Environment for Django, set before django.setup(). Returns the history DATABASE_URL."""
    url = os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:{HISTORY_PORT}/{BENCH_DB}")
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    # The 1-second pg_stat_activity sampling is excluded from the timed snapshots (the collection
    # benchmark switches it back on, at runtime, for the one figure that shows what it costs).
    os.environ["COLLECTOR_ACTIVITY_SAMPLES"] = "0"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    # As in production (docker-compose sets DEBUG=false): with DEBUG on, Django's cursor wrapper
    # also records every query, which is not what a worker pays.
    os.environ["DEBUG"] = "false"
    # The REST API benchmark sends hundreds of requests a minute with one token: throttling still runs (its
    # counters in Redis are part of what a request costs) but at a rate the benchmark never reaches. Set here,
    # before django.setup() reads the settings.
    os.environ.setdefault("API_THROTTLE_RATE", "100000/min")
    # The monitored clusters run on this machine, which the network policy refuses outside DEBUG.
    os.environ.setdefault("MONITOR_ALLOW_LOOPBACK", "true")
    # The synthetic histories are dated from November 2024 on (bench/readtier.py, FOOTPRINT_DAY, INGEST_DAY), far
    # from today so that their partitions are their own: the daily tier is kept long enough that the API and the
    # exports still take them (past the default 730 days, they refused them as before the history's retention).
    days = (datetime.now(UTC).date() - date(2024, 11, 1)).days + 30
    os.environ.setdefault("HISTORY_DAILY_RETENTION_DAYS", str(max(730, days)))
    return url


def recreate_history_database() -> None:
    """Drop and create the benchmark history database (never the tests' or the demo's)."""
    import psycopg

    if BENCH_DB in ("pgconsole", "test_pgconsole", "postgres"):
        raise SystemExit(f"refusing to use {BENCH_DB!r} as the benchmark database")
    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def drop_history_database() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


def setup_django() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def monitored_spec():
    """PostgreSQL 17, pg_stat_statements.max=10000 (no eviction at 5,000 entries), a monitoring role
    with pg_monitor that authenticates with SCRAM, as docs/monitoring-role.md asks."""
    from devenv.fleet import ClusterSpec, monitored_setup

    setup = monitored_setup(dbname=APP_DB, monitor_user=MONITOR_USER, monitor_password=MONITOR_PASSWORD)

    return ClusterSpec(
        name=BENCH_CLUSTER,
        major=BENCH_MAJOR,
        port=BENCH_PORT,
        settings={"pg_stat_statements.max": 10000, "shared_buffers": "256MB"},
        preload=["pg_stat_statements"],
        hba=[f"host all {MONITOR_USER} 127.0.0.1/32 scram-sha-256"],
        fresh=True,
        setup=setup,
    )


ADVICE_MAJOR = 15  # Debian's PostgreSQL, the one with a hypopg package (postgresql-15-hypopg)
ADVICE_CLUSTER = f"bench-pg{ADVICE_MAJOR}"


def advice_spec():
    """PostgreSQL 15 with hypopg in its app database, for the index advice costed by the planner (bench/schema.py)."""
    from devenv.fleet import ClusterSpec, monitored_setup

    setup = monitored_setup(
        dbname=APP_DB,
        monitor_user=MONITOR_USER,
        monitor_password=MONITOR_PASSWORD,
        extensions=("pg_stat_statements", "hypopg"),
    )
    return ClusterSpec(
        name=ADVICE_CLUSTER,
        major=ADVICE_MAJOR,
        port=BENCH_PORT_BASE + ADVICE_MAJOR,
        settings={"pg_stat_statements.max": 10000},
        preload=["pg_stat_statements"],
        hba=[f"host all {MONITOR_USER} 127.0.0.1/32 scram-sha-256"],
        fresh=True,
        setup=setup,
    )


@dataclass
class Machine:
    nproc: int
    cpu_model: str
    mem_gib: float
    os: str
    python: str
    postgres_monitored: str = ""
    postgres_history: str = ""
    history_durability: str = ""


def machine() -> Machine:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    osname = platform.platform()
    try:
        pretty = (
            dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
            .get("PRETTY_NAME", "")
            .strip('"')
        )
        debian = Path("/etc/debian_version").read_text().strip()
        osname = f"{pretty} (debian_version {debian})"
    except OSError:
        pass
    nproc = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or os.cpu_count() or 0)
    return Machine(nproc=nproc, cpu_model=cpu, mem_gib=mem, os=osname, python=platform.python_version())


def code_version() -> str:
    """The commit measured, and whether the code under test had uncommitted changes then."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return proc.stdout.rstrip() if proc.returncode == 0 else ""  # leading spaces are porcelain's status

    head = git("rev-parse", "--short=12", "HEAD") or "unknown commit"
    code = (
        "accounts advisor alerts bench console devenv exports history inventory presentation readings readtier reports"
    ).split()
    dirty = git("status", "--porcelain", "--", *code)
    if not dirty:
        return f"commit {head}, {'/'.join(code)} unmodified"
    files = [line[3:] for line in dirty.splitlines()]
    return f"commit {head} plus uncommitted changes in {', '.join(files[:8])}" + (" ..." if len(files) > 8 else "")


def stop_on_signals(world) -> dict:
    """SIGINT and SIGTERM set `world.stop` and say why in `world.ended` (a second one only says to wait); while
    `world.running` is false (still starting) they go straight to the clean-up. Returns the handlers replaced,
    to put back."""

    def on_signal(signum, frame) -> None:
        if world.stop.is_set():
            os.write(2, f"{signal.Signals(signum).name}: already stopping, please wait\n".encode())
            return
        world.stop.set()
        world.ended = f"interrupted ({signal.Signals(signum).name})"
        if not world.running:
            raise KeyboardInterrupt  # still starting: straight to the clean-up

    return {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
