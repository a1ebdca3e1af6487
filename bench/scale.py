"""python -m bench --only scale: N monitored servers collected every 60 s by beat and celery workers started as
docker-compose.yml starts them, N stepped up (100, 250, 500, 1,000, then 1,500 while the level before kept up),
once with one collection worker and again with two, as two hosts would run them, compose's plans worker among the
processes (beat's plans rounds every minute); then the one-worker 1,000 servers twice more, back to back, with plans
off and on again: the plans' rounds are judged by the two (issue 37: they never delay a collection); then once more
with compose's web server and a scraper asking it for /metrics every 15 s, as Prometheus would, an operator's whole
scrape each time, judged against the window before it (issue 39: the scrapes leave the lag unchanged). Per level: lag
against the due times, missed intervals, CPU per snapshot of every part, the history store's writes, Redis
traffic and the workers' memory (bench/scale_report.py judges and reports).

The fleet: each cluster holds 1,000 distinct statements (a small table each, so a queryid each) of which 100
run every minute in rotation (Churn), so a snapshot reads about 1,010 entries (the collector's own among them)
with about 100 changed; the servers are registered round-robin over the clusters, all on one DSN per cluster.

Its own world: the benchmark's durable history store (bench/env.py, port 57100, database recreated and
migrated), BENCH_SCALE_CLUSTERS (default 3) PostgreSQL 17 clusters to monitor on ports 57140 + i (data under
.run/bench-scale-*; inside the 57000-57199 range devenv/ports.py keeps for the benchmarks, where 57012-57018 are
the other benchmarks' and the soak's monitored clusters, 57100 the history store and 57180 the soak's web
server, 57181 this run's web server), Redis database 13 (flushed; the soak uses 12, the tests 5, 7 and 9), the
processes' logs under
.run/scale/. Everything it starts is stopped at the end, and on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench import env, scale_report
from bench.scale_report import (
    BEAT,
    BENCH,
    COLLECTION,
    HISTORY,
    MONITORED,
    OTHER_WORKERS,
    SAMPLER,
    WEB,
    ScaleRun,
    Step,
    Usage,
)
from bench.soak_watch import LogWatch, child_pids, rss_kb

if TYPE_CHECKING:
    from devenv.cluster import Cluster
    from devenv.demo import Children
    from devenv.fleet import ClusterSpec

REDIS_URL = "redis://127.0.0.1:6379/13"
ORGANIZATION = "scale"
INTERVAL_S = 60
MAJOR = 17
PORT_BASE = env.BENCH_PORT_BASE + 140
MAX_CLUSTERS = 10
STATEMENTS = 1000  # distinct statements per cluster
CHANGING_PER_MIN = 100  # of them run each minute: 10% of the entries change between two snapshots
LEVELS = (100, 250, 500, 1000, 1500)  # above TARGET_SERVERS only while the level before kept up
QUICK_LEVELS = (20, 50)
MINUTES = 5.0
QUICK_MINUTES = 2.0
# One collection worker, then two as two hosts would run them (BENCH_SCALE_WORKERS=1 for the first alone).
WORKER_COUNTS = tuple(int(n) for n in os.environ.get("BENCH_SCALE_WORKERS", "1,2").split(","))
# The plans worker's rounds every minute (PLANS_TICK_S; 15 minutes by default), so that every window holds some;
# then the one-worker target level with plans off and on again (BENCH_SCALE_PLANS_OFF=0 leaves those two out).
PLANS_TICK_S = os.environ.get("PLANS_TICK_S", "60")
PLANS_OFF_BASELINE = os.environ.get("BENCH_SCALE_PLANS_OFF", "1") != "0"
# Then the one-worker target level with /metrics scraped every SCRAPE_EVERY_S by an operator (BENCH_SCALE_SCRAPE=0:
# not), against the warm window before it (the plans' "on again", or one run for it when those are left out).
SCRAPE = os.environ.get("BENCH_SCALE_SCRAPE", "1") != "0"
SCRAPE_EVERY_S = 15.0
WEB_PORT = PORT_BASE + 41  # 57181, beside the soak's 57180
OPENMETRICS = "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5"
SAMPLE_EVERY_S = 5.0
WARMUP_MAX_S = 2.0 * INTERVAL_S
SETTLE_S = 15.0
READY_WAIT_S = 60.0
LOG_DIR = env.REPO / ".run" / "scale"
COMPOSE = env.REPO / "docker-compose.yml"
CELERY = Path(sys.executable).parent / "celery"
# What bench/env.configure_environment tunes for the timed benchmarks: the product's defaults here (wait
# sampling included), as production runs.
_TIMED_ONLY = ("COLLECTOR_ACTIVITY_SAMPLES", "LOG_LEVEL", "API_THROTTLE_RATE")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_levels(text: str) -> tuple[int, ...]:
    """'100,250,500' -> (100, 250, 500), ascending."""
    try:
        levels = tuple(sorted({int(x) for x in text.replace(" ", "").split(",") if x}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: server counts separated by commas, e.g. 100,250,500") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one level, each of 1 server or more")
    return levels


@dataclass
class Process:
    name: str
    role: str  # COLLECTION, OTHER_WORKERS, SAMPLER or BEAT
    argv: list[str]
    pid: int = 0  # once started


@dataclass
class World:
    """What the run starts, for the run and for the clean-up (which stops whatever of it is there)."""

    tmp: Path
    specs: list[ClusterSpec]
    children: Children
    history: Cluster | None
    stop: threading.Event = field(default_factory=threading.Event)
    ended: str = "every level measured"
    running: bool = False  # started: a signal now ends the run instead of the start-up
    redis_started: bool = False
    clusters: list[Cluster] = field(default_factory=list)
    churn: Churn | None = None
    server_ids: list[int] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    logs: LogWatch | None = None
    commands: dict[str, str] = field(default_factory=dict)
    token: str = ""  # an operator's API token, for the scrapes
    scraper: Scraper | None = None


def run(
    *, levels: tuple[int, ...], minutes: float, history: Cluster | None, keep: bool, command: str
) -> ScaleRun | None:
    """Start the world, measure the curve with one then two collection workers, stop everything. None when
    interrupted before anything was measured."""
    from devenv.demo import Children

    count = int(os.environ.get("BENCH_SCALE_CLUSTERS", "3"))
    if not 1 <= count <= MAX_CLUSTERS:
        raise SystemExit(f"BENCH_SCALE_CLUSTERS={count}: 1 to {MAX_CLUSTERS} (ports {PORT_BASE}+)")
    world = World(Path(tempfile.mkdtemp(prefix="bench-scale-")), cluster_specs(count, max(levels)), Children(), history)

    previous = env.stop_on_signals(world)
    started = time.time()
    steps: list[Step] = []
    try:
        _start(world, max(levels))
        world.running = True
        for workers in WORKER_COUNTS:
            if not world.stop.is_set():
                steps += _curve(world, workers, levels, minutes * 60)
        target = scale_report.TARGET_SERVERS
        if PLANS_OFF_BASELINE and target in levels and 1 in WORKER_COUNTS:
            # Plans off then on again, back to back, both as warm (the curves' first windows ran cold).
            for plans in (False, True):
                if not world.stop.is_set():
                    steps += [replace(s, again=plans) for s in _curve(world, 1, (target,), minutes * 60, plans=plans)]
        # Scraped at the target level, or the largest one below it that ran (a quick run's, a smoke test of it).
        at = max((n for n in levels if n <= target), default=None)
        if SCRAPE and at is not None and 1 in WORKER_COUNTS:
            if not (PLANS_OFF_BASELINE and at == target) and not world.stop.is_set():  # a warm unscraped window
                steps += [replace(s, again=True) for s in _curve(world, 1, (at,), minutes * 60)]
            if not world.stop.is_set():
                steps += _curve(world, 1, (at,), minutes * 60, scrape=True)
    except KeyboardInterrupt:
        print(f"\n{world.ended} while starting: stopping what was started", flush=True)
    finally:
        world.stop.set()
        _stop(world, keep=keep)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not steps:
        return None
    return ScaleRun(
        started_at=datetime.fromtimestamp(started, UTC),
        elapsed_s=time.time() - started,
        ended=world.ended,
        command=command,
        code=env.code_version(),
        machine=env.machine(),
        fleet=scale_report.Fleet(
            clusters=count,
            major=MAJOR,
            ports=f"{PORT_BASE}–{PORT_BASE + count - 1}",
            statements=STATEMENTS,
            changing_per_min=CHANGING_PER_MIN,
            interval_s=INTERVAL_S,
            phases=FIXED_PHASES if _phase_function() else FIRST_SNAPSHOT_PHASES,
        ),
        levels=levels,
        window_s=minutes * 60,
        steps=steps,
        commands=world.commands,
        interrupted=world.ended.startswith("interrupted"),
    )


# --------------------------------------------------------------------------
# The world
# --------------------------------------------------------------------------


def cluster_specs(count: int, max_servers: int) -> list[ClusterSpec]:
    from devenv.fleet import ClusterSpec, monitored_setup

    # Each worker process keeps a connection to every server it collected (collectors/connection.py), and
    # the two-worker levels run two of them; the wait sampler keeps one more per server; the rest is headroom
    # for the churn and a superuser.
    max_connections = max(600, (max(WORKER_COUNTS) + 1) * math.ceil(max_servers / count) + 100)
    setup = monitored_setup(dbname=env.APP_DB, monitor_user=env.MONITOR_USER, monitor_password=env.MONITOR_PASSWORD)
    return [
        ClusterSpec(
            name=f"bench-scale-{i + 1}",
            major=MAJOR,
            port=PORT_BASE + i,
            settings={"pg_stat_statements.max": 5000, "max_connections": max_connections},
            preload=["pg_stat_statements"],
            hba=[f"host all {env.MONITOR_USER} 127.0.0.1/32 scram-sha-256"],
            fresh=True,
            setup=setup,
        )
        for i in range(count)
    ]


class Churn:
    """Per cluster, STATEMENTS distinct statements (a small table each, so a queryid each), all run once at the
    start, then CHANGING_PER_MIN of them a minute in rotation, evenly spread: whenever a snapshot is taken,
    about that many of the cluster's entries changed since the one a minute before."""

    def __init__(self, clusters: list[Cluster], stop: threading.Event) -> None:
        self.clusters, self.stop = clusters, stop
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    @staticmethod
    def statement(k: int) -> str:
        return f"SELECT count(*) FROM scale.t{k % STATEMENTS:04d} WHERE id = %s"

    def seed(self) -> None:
        create = (
            "DO $$ BEGIN CREATE SCHEMA IF NOT EXISTS scale; FOR k IN 0..%s LOOP "
            "EXECUTE format('CREATE TABLE IF NOT EXISTS scale.t%%s (id int)', lpad(k::text, 4, '0')); END LOOP; END $$"
        )
        for c in self.clusters:
            with c.connect(env.APP_DB) as conn:
                conn.execute(create % (STATEMENTS - 1))  # one utility statement: the tables are no entries
                conn.execute("SELECT pg_stat_statements_reset()")
                for k in range(STATEMENTS):
                    conn.execute(self.statement(k), (k,))

    def start(self) -> None:
        for i, c in enumerate(self.clusters):
            first = i * STATEMENTS // len(self.clusters)
            thread = threading.Thread(target=self._loop, args=(c, first), name=f"churn-{c.name}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def _loop(self, c: Cluster, k: int) -> None:
        pause = 60.0 / CHANGING_PER_MIN
        try:
            with c.connect(env.APP_DB) as conn:
                next_at = time.monotonic()
                while not self.stop.wait(max(0.0, next_at - time.monotonic())):
                    conn.execute(self.statement(k), (k,))
                    k, next_at = k + 1, next_at + pause
        except Exception as exc:  # noqa: BLE001 - reported with the run's errors
            if not self.stop.is_set():
                self.errors.append(f"churn on {c.name}: {type(exc).__name__}: {exc}")

    def take_errors(self) -> list[str]:
        """The errors recorded since the last call."""
        taken, self.errors = self.errors, []
        return taken

    def join(self, timeout: float = 10.0) -> list[str]:
        """Wait for the threads (the stop event is set); the names of those still running."""
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self.threads if t.is_alive()]


def _register(clusters: list[Cluster], count: int) -> list[int]:
    """``count`` servers in organization "scale", round-robin over the clusters, disabled; their ids in order."""
    from inventory.connection import parse_dsn
    from inventory.models import Organization, Server

    organization = Organization.objects.create(name=ORGANIZATION)
    dsns = [c.dsn(env.APP_DB, env.MONITOR_USER, env.MONITOR_PASSWORD) for c in clusters]
    servers = []
    for i in range(count):
        connection = parse_dsn(dsns[i % len(dsns)])
        server = Server(
            organization=organization,
            name=f"scale-{i + 1:04d}",
            interval_s=INTERVAL_S,
            enabled=False,
            tags=["scale"],
            **connection.server_fields(),
        )
        server.set_password(connection.password)
        servers.append(server)
    Server.objects.bulk_create(servers, batch_size=500)
    return list(Server.objects.filter(organization=organization).order_by("name").values_list("pk", flat=True))


def _start(world: World, max_servers: int) -> None:
    """Redis, the clusters, the history database (fresh, migrated), the churn, the servers (all disabled)."""
    from django.core.management import call_command
    from django.db import connections

    from devenv.fleet import start_many
    from devenv.redis import ensure_redis

    world.redis_started = ensure_redis(REDIS_URL) == "started"
    _flush_redis()
    print(f"      starting {', '.join(s.name for s in world.specs)}", flush=True)
    world.clusters = list(start_many(world.specs).values())
    connections.close_all()
    env.recreate_history_database()
    call_command("migrate", verbosity=0, interactive=False)
    world.churn = Churn(world.clusters, world.stop)
    world.churn.seed()
    world.churn.start()
    world.server_ids = _register(world.clusters, max_servers)
    world.token = _operator_token()
    LOG_DIR.mkdir(parents=True, exist_ok=True)


def _operator_token() -> str:
    """An API token of a user who sees every organization: the scrape with the console's health, the largest."""
    from django.contrib.auth.models import User

    from accounts.tokens import token_create

    user = User.objects.create_superuser("scale-operator", password=None)
    return token_create(user=user, name="prometheus", read_only=True)[1]


class Scraper:
    """GET /metrics every SCRAPE_EVERY_S with an operator's token, asking for OpenMetrics as Prometheus does; each
    scrape's (start time, milliseconds to the whole answer, bytes, error or '')."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token, self.ended = url, token, threading.Event()
        self.done: list[tuple[float, float, int, str]] = []
        self.thread = threading.Thread(target=self._loop, name="scraper", daemon=True)

    def stop(self) -> None:
        self.ended.set()
        self.thread.join(SCRAPE_EVERY_S + 5)

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self.ended.wait(max(0.0, next_at - time.monotonic())):
            next_at += SCRAPE_EVERY_S
            at, started = time.time(), time.perf_counter()
            request = urllib.request.Request(
                self.url, headers={"Authorization": f"Bearer {self.token}", "Accept": OPENMETRICS}
            )
            try:
                with urllib.request.urlopen(request, timeout=scale_report.SCRAPE_TIMEOUT_S) as response:
                    body = response.read()
                error = "" if body.endswith(b"# EOF\n") else "no # EOF at the end"
            except OSError as exc:
                body, error = b"", f"{type(exc).__name__}: {exc}"
            self.done.append((at, (time.perf_counter() - started) * 1000, len(body), error))

    def between(self, start: float, end: float) -> list[tuple[float, float, int, str]]:
        return [d for d in self.done if start <= d[0] < end]


# --------------------------------------------------------------------------
# The processes, as docker-compose.yml starts them
# --------------------------------------------------------------------------


def _command(command) -> list[str]:
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else [str(x) for x in command]


def _option(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the option ``names`` (`--x v` or `--x=v`), if given."""
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
        for n in names:
            if arg.startswith(f"{n}="):
                return arg.split("=", 1)[1]
    return None


def _replace_option(argv: list[str], names: tuple[str, ...], value: str) -> list[str]:
    """``argv`` with the option ``names`` (`--x v` or `--x=v`) set to ``value``, in its place or at the end."""
    out, i, found = [], 0, False
    while i < len(argv):
        arg, i = argv[i], i + 1
        if arg in names and i < len(argv):
            out += [arg, value]
            i, found = i + 1, True
        elif "=" in arg and arg.split("=", 1)[0] in names:
            out.append(f"{arg.split('=', 1)[0]}={value}")
            found = True
        else:
            out.append(arg)
    return out if found else [*out, names[0], value]


def compose_processes(
    workers: int, schedule: Path, path: Path = COMPOSE, *, web_port: int | None = None
) -> list[Process]:
    """Beat and every celery worker of docker-compose.yml with its `command:`, the venv's celery, beat's
    schedule at ``schedule`` and a node name for each worker; the collection worker (the one consuming the
    "collection" queue, or the only one) ``workers`` times, as that many hosts would run it. With `web_port`, the
    web server too (the service whose command is gunicorn, the venv's), bound to 127.0.0.1 on that port."""
    import yaml

    services = yaml.safe_load(path.read_text())["services"]
    celery = {}
    for name, service in services.items():
        argv = _command(service.get("command"))
        if argv and Path(argv[0]).name == "celery":
            celery[name] = [str(CELERY), *argv[1:]]
    worker_services = [name for name, argv in celery.items() if "worker" in argv]
    queues = {name: (_option(celery[name], ("--queues", "-Q")) or "").split(",") for name in worker_services}
    collecting = [name for name in worker_services if "collection" in queues[name]] or worker_services
    out = [
        Process(name, BEAT, _replace_option(argv, ("--schedule", "-s"), str(schedule)))
        for name, argv in celery.items()
        if "beat" in argv
    ]
    for name in worker_services:
        role = COLLECTION if name in collecting else OTHER_WORKERS
        node, _, host = (_option(celery[name], ("--hostname", "-n")) or f"{name}@%h").partition("@")
        for i in range(1, (workers if role == COLLECTION else 1) + 1):
            argv = _replace_option(celery[name], ("--hostname", "-n"), f"{node}{i}@{host or '%h'}")
            out.append(Process(f"{name}{i}", role, argv))
    # Long-running console services that are not celery (the wait sampler): once each, with this Python.
    for name, service in services.items():
        argv = _command(service.get("command"))
        if argv[:2] == ["python", "manage.py"] and service.get("restart") != "no" and name not in celery:
            out.append(Process(name, SAMPLER, [sys.executable, str(env.REPO / "manage.py"), *argv[2:]]))
    if web_port is not None:
        web = [(n, argv) for n, s in services.items() if (argv := _command(s.get("command"))) and argv[0] == "gunicorn"]
        if not web:
            raise SystemExit(f"{path}: no service runs gunicorn (the web server the scrapes ask)")
        name, argv = web[0]
        gunicorn = [str(CELERY.parent / "gunicorn"), *argv[1:]]
        out.append(Process(name, WEB, _replace_option(gunicorn, ("--bind", "-b"), f"127.0.0.1:{web_port}")))
    if not any(p.role == COLLECTION for p in out) or not any(p.role == BEAT for p in out):
        raise SystemExit(f"{path}: no celery worker or no beat among the services' commands")
    return out


def _start_processes(world: World, workers: int, *, plans: bool = True, scrape: bool = False) -> None:
    from devenv.demo import Children, wait_for_port

    tag = f"{workers}w" + ("" if plans else "-plans-off") + ("-scraped" if scrape else "")
    tag += f"-{n}" if (n := len(list(world.tmp.glob(f"beat-{tag}*")))) else ""  # a curve run again: its own
    schedule = world.tmp / f"beat-{tag}" / "celerybeat-schedule"
    schedule.parent.mkdir()
    child_env = {k: v for k, v in os.environ.items() if k not in _TIMED_ONLY}
    child_env.update(REDIS_URL=REDIS_URL, PYTHONUNBUFFERED="1", PLANS_TICK_S=PLANS_TICK_S, ALLOWED_HOSTS="127.0.0.1")
    child_env["PLANS_ENABLED"] = child_env.get("PLANS_ENABLED", "true") if plans else "false"
    world.children = Children()
    world.processes = compose_processes(workers, schedule, web_port=WEB_PORT if scrape else None)
    world.commands = {}  # the last curve's, which starts every process of the ones before
    logs = {}
    for p in world.processes:
        logs[p.name] = LOG_DIR / f"{p.name}-{tag}.log"
        # sh execs the program (same pid, same process group) with its output in the log file.
        argv = ["/bin/sh", "-c", f'exec "$@" >{shlex.quote(str(logs[p.name]))} 2>&1', "sh", *p.argv]
        p.pid = world.children.start(p.name, argv, env=child_env, cwd=env.REPO).proc.pid
        world.commands[p.name] = shlex.join(p.argv).replace(str(CELERY), "celery").replace(str(world.tmp), "$TMP")
    world.logs = LogWatch(logs)
    deadline = time.monotonic() + READY_WAIT_S
    waiting = [p.name for p in world.processes if p.role in (COLLECTION, OTHER_WORKERS)]
    while waiting and time.monotonic() < deadline and not world.stop.wait(1.0):
        waiting = [name for name in waiting if " ready." not in logs[name].read_text(errors="replace")]
    if waiting:
        print(f"      not ready after {READY_WAIT_S:.0f} s: {', '.join(waiting)} (going on)", flush=True)
    if scrape:
        web = next(c for c in world.children.items if c.name in {p.name for p in world.processes if p.role == WEB})
        if not wait_for_port(WEB_PORT, web, timeout=READY_WAIT_S):
            raise SystemExit(f"the web server did not listen on {WEB_PORT}: see {logs[web.name]}")
        world.scraper = Scraper(f"http://127.0.0.1:{WEB_PORT}/metrics", world.token)
        world.scraper.thread.start()


def _stop_processes(world: World) -> None:
    if world.scraper is not None:
        world.scraper.stop()
        world.scraper = None
    for c, rc in world.children.terminate():
        if rc is None:
            print(f"      {c.name} did not stop in time: killed", flush=True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, signal.SIGKILL)  # anything left in its process group
    world.children.items.clear()
    world.processes = []


def _exited(world: World) -> bool:
    for child, rc in world.children.exited():
        world.ended = f"{child.name} exited with code {rc}"
        world.stop.set()
    return world.stop.is_set()


# --------------------------------------------------------------------------
# The curve
# --------------------------------------------------------------------------


def _curve(
    world: World, workers: int, levels: tuple[int, ...], window_s: float, *, plans: bool = True, scrape: bool = False
) -> list[Step]:
    """Every level with ``workers`` collection workers; above TARGET_SERVERS only while the level before kept up.
    `plans`: compose's plans worker and beat's plans rounds on (off: PLANS_ENABLED=false, the baseline). `scrape`:
    the web server too, asked for /metrics every SCRAPE_EVERY_S."""
    from inventory.models import Server

    what = f"{workers} collection worker{'s' if workers > 1 else ''}" + ("" if plans else ", plans off")
    what += f", /metrics every {SCRAPE_EVERY_S:g} s" if scrape else ""
    print(f"      {what}: starting beat and the workers" + (" and the web server" if scrape else ""), flush=True)
    _start_processes(world, workers, plans=plans, scrape=scrape)
    steps: list[Step] = []
    try:
        for n in levels:
            if world.stop.is_set():
                break
            if n > scale_report.TARGET_SERVERS and steps and not steps[-1].kept_up:
                print(f"      {n:,} servers not run: {steps[-1].servers:,} did not keep up", flush=True)
                break
            steps.append(_level(world, n, workers, window_s, plans=plans))
    finally:
        _stop_processes(world)
        Server.objects.filter(pk__in=world.server_ids).update(enabled=False, next_collect_at=None)
        _flush_redis()  # tasks left in the queue belong to this curve
    return steps


def _level(world: World, n: int, workers: int, window_s: float, *, plans: bool = True) -> Step:
    from django.db.models import Count

    from history.models import Snapshot
    from inventory.models import Server

    label = f"[{n:,} servers, {workers} worker{'s' if workers > 1 else ''}{'' if plans else ', plans off'}"
    label += ", scraped]" if world.scraper is not None else "]"
    new = list(Server.objects.filter(pk__in=world.server_ids[:n], enabled=False).values_list("pk", flat=True))
    since = datetime.now(UTC)
    Server.objects.filter(pk__in=new).update(enabled=True)
    print(f"      {label} {len(new):,} more enabled: warming up", flush=True)
    deadline = time.monotonic() + WARMUP_MAX_S
    while new and time.monotonic() < deadline and not world.stop.wait(SAMPLE_EVERY_S) and not _exited(world):
        warm = Snapshot.objects.filter(server_id__in=new, taken_at__gte=since).values("server_id")
        if warm.annotate(n=Count("id")).filter(n__gte=2).count() == len(new):
            break
    step = replace(_measure(world, world.server_ids[:n], workers, window_s, label), plans=plans)
    print(f"      {label} {scale_report.summary(step)}", flush=True)
    return step


def _measure(world: World, ids: list[int], workers: int, window_s: float, label: str) -> Step:
    from django.db.models import Avg, Sum

    from history.models import FailedCollection, Snapshot
    from inventory.models import Server

    before, start = _usage(world), time.time()
    sampler_log = path.stat().st_size if (path := _sampler_log(world)) is not None else 0
    rss: dict[str, int] = {}
    next_status = start + 60
    while (left := start + window_s - time.time()) > 0 and not _exited(world):
        for p in world.processes:
            if p.role != BEAT:
                rss[p.name] = max(rss.get(p.name, 0), _tree_rss_kb(p.pid))
        if time.time() >= next_status:
            taken = Snapshot.objects.filter(server_id__in=ids, taken_at__gte=datetime.fromtimestamp(start, UTC))
            print(f"      {label} {time.time() - start:.0f} s: {taken.count():,} snapshots", flush=True)
            next_status += 60
        world.stop.wait(min(SAMPLE_EVERY_S, left))
    end = time.time()
    usage = _usage(world) - before
    world.stop.wait(SETTLE_S)  # a snapshot taken just before the end is committed a moment later
    since, until = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    rows = Snapshot.objects.filter(server_id__in=ids, taken_at__gte=since, taken_at__lt=until).order_by()
    times: dict[int, list[float]] = {i: [] for i in ids}
    for server_id, taken_at in rows.values_list("server_id", "taken_at"):
        times[server_id].append(taken_at.timestamp())
    sizes = rows.filter(kind="delta").aggregate(entries=Avg("entries"), changed=Avg("changed"))
    phase_s = _phase_function()
    phases = {i: phase_s(i, INTERVAL_S) if phase_s else None for i in ids}
    sampled = rows.filter(kind="delta", waits_source="pg_stat_activity").aggregate(
        n=Sum("waits_samples"), s=Sum("interval_s")
    )
    looks = sampled["n"] / sampled["s"] * INTERVAL_S if sampled["s"] else None
    errors = FailedCollection.objects.filter(server_id__in=ids, at__gte=since, at__lt=until)
    lines = [f"{source}: {line.strip()}" for source, line in world.logs.errors()] if world.logs else []
    scrapes = world.scraper.between(start, end) if world.scraper is not None else []
    return Step(
        servers=len(ids),
        workers=workers,
        start=start,
        end=end,
        interval_s=INTERVAL_S,
        snapshots=sum(len(t) for t in times.values()),
        entries_mean=sizes["entries"] or 0.0,
        changed_mean=sizes["changed"] or 0.0,
        late=scale_report.lateness(times, phases, interval_s=INTERVAL_S, start=start, end=end),
        usage=usage,
        rss_max_kb=rss,
        failures=errors.count(),
        failing_servers=Server.objects.filter(pk__in=ids, consecutive_failures__gt=0).count(),
        log_errors=lines + (world.churn.take_errors() if world.churn else []),
        interrupted=world.stop.is_set(),
        scraped=world.scraper is not None,
        scrape_ms=[ms for _, ms, _, error in scrapes if not error],
        scrape_bytes_max=max((size for _, _, size, _ in scrapes), default=0),
        scrape_errors=[error for *_, error in scrapes if error],
        sampler_looks=looks,
        sampler_looks_expected=_activity_samples(),
        sampler_redis_connections=_sampler_redis_connections(),
        **_sampler_warnings_since(world, sampler_log),
    )


def _activity_samples() -> int:
    """The looks per interval the product's processes take: the default (this process runs with none)."""
    from collectors.waits.config import ACTIVITY_SAMPLES_DEFAULT

    return ACTIVITY_SAMPLES_DEFAULT


def _sampler_log(world: World) -> Path | None:
    """The wait sampler's log (compose runs one sampler), where it is written yet."""
    paths = [world.logs.paths[p.name] for p in world.processes if p.role == SAMPLER] if world.logs else []
    return paths[0] if len(paths) == 1 and paths[0].exists() else None


def _sampler_warnings_since(world: World, offset: int) -> dict[str, int | None]:
    """The warnings the wait sampler logged since `offset` bytes into its log: about Redis (looks at risk), and
    servers it could not look at (their first failure each time)."""
    if (path := _sampler_log(world)) is None:
        return {"sampler_warnings": None, "sampler_server_failures": None}
    with open(path, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    return {
        "sampler_warnings": sum(1 for line in lines if line.startswith("wait sampling:") and "Redis" in line),
        "sampler_server_failures": sum(
            1 for line in lines if line.startswith("wait sampling of server") and " fails" in line
        ),
    }


def _sampler_redis_connections() -> int:
    import redis
    from django.conf import settings

    from collectors.waits import sampler

    client = redis.Redis.from_url(settings.REDIS_URL)
    return sum(1 for c in client.client_list() if c.get("name") == sampler.CLIENT_NAME)


FIXED_PHASES = "each multiple of the interval since the epoch plus the server's phase (`collectors.scheduling.phase_s`)"
FIRST_SNAPSHOT_PHASES = "each server's first snapshot in a window, then every interval (no fixed phases in the product)"


def _phase_function() -> Callable[[int, int], float] | None:
    """``phase_s(server_id, interval_s)``, the seconds past each multiple of the interval at which the product
    collects a server; None where it has no fixed phases (then lateness() takes each server's first snapshot)."""
    try:
        from collectors.scheduling import phase_s
    except ImportError:
        return None
    return phase_s


# --------------------------------------------------------------------------
# Counters: /proc, the history store, Redis
# --------------------------------------------------------------------------


def _tree(pid: int | None) -> list[int]:
    out, todo = [], [pid] if pid else []
    while todo:
        p = todo.pop()
        out.append(p)
        todo += child_pids(p)
    return out


def _tree_cpu_s(pid: int | None) -> float:
    """utime + stime of a process and its descendants, with those of their children that ended (cutime,
    cstime): a backend that exits during a window still counts, in its postmaster."""
    ticks = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ticks += sum(int(x) for x in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[11:15])
    return ticks / _CLK_TCK


def _tree_rss_kb(pid: int) -> int:
    return sum(rss_kb(p) or 0 for p in _tree(pid))


def _usage(world: World) -> Usage:
    import redis
    from django.db import connection

    cpu = dict.fromkeys((COLLECTION, SAMPLER, BEAT, MONITORED, BENCH), 0.0)
    for p in world.processes:
        cpu[p.role] = cpu.get(p.role, 0.0) + _tree_cpu_s(p.pid)
    cpu[MONITORED] = sum(_tree_cpu_s(c.postmaster_pid()) for c in world.clusters)
    if world.history is not None:
        cpu[HISTORY] = _tree_cpu_s(world.history.postmaster_pid())
    own = os.times()
    cpu[BENCH] = own.user + own.system
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8, tup_inserted, tup_updated, sessions "
            "FROM pg_stat_database WHERE datname = current_database()"
        )
        wal, inserted, updated, sessions = cur.fetchone()
    stats = redis.Redis.from_url(REDIS_URL).info("stats")
    return Usage(
        cpu_s=cpu,
        machine_cpu_s=sum(ticks) / _CLK_TCK,  # user nice system idle iowait irq softirq steal
        idle_cpu_s=(ticks[3] + ticks[4]) / _CLK_TCK,
        wal_bytes=int(wal),
        rows_inserted=int(inserted),
        rows_updated=int(updated),
        history_sessions=int(sessions),
        redis_commands=int(stats["total_commands_processed"]),
        redis_in_bytes=int(stats["total_net_input_bytes"]),
        redis_out_bytes=int(stats["total_net_output_bytes"]),
    )


# --------------------------------------------------------------------------
# Stop
# --------------------------------------------------------------------------


def _flush_redis() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def _stop(world: World, *, keep: bool) -> None:
    """Stop (in this order) the processes, the churn, the clusters; each step even if one before failed. The
    history database is bench/__main__'s to drop."""
    from devenv.cluster import cluster
    from devenv.fleet import stop_many
    from devenv.redis import stop_redis

    def step(what: str, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - go on with the rest of the clean-up
            print(f"      could not {what}: {type(exc).__name__}: {exc}", flush=True)

    step("stop the processes", _stop_processes, world)
    if world.churn is not None and (left := world.churn.join()):
        print(f"      churn still running: {', '.join(left)}", flush=True)
    step("flush the Redis database", _flush_redis)
    if not keep:
        running = [c for s in world.specs if (c := cluster(s.name, s.major, s.port, s.base)).is_running()]
        step("stop the clusters", stop_many, running)
    if world.redis_started:
        step("stop Redis", stop_redis, REDIS_URL)
    shutil.rmtree(world.tmp, ignore_errors=True)
    kept = ", but the clusters (--keep)" if keep else ""
    print(f"      stopped everything the scale run started{kept}", flush=True)
