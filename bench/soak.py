"""python -m bench --soak DURATION: the product as production runs it (a celery worker, beat and gunicorn) for
hours under the demo's workloads, with a client reading the pages and the API; records the resident memory of
every process, snapshot lag, errors and history growth (bench/soak_watch.py watches, bench/soak_report.py
judges and reports).

Its own world: the benchmark's durable history store (bench/env.py, port 57100, database recreated and
migrated), the demo's two monitored servers on bench ports (57016, 57018; data under .run/bench-soak-pg*, so a
running `make demo` is not disturbed), Redis database 12 (flushed), gunicorn on 127.0.0.1:57180, the
processes' logs under .run/soak/. Everything it starts is stopped at the end, and on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench import env, soak_report
from bench.soak_report import Error, SoakRun
from bench.soak_watch import Client, LogWatch, Sampler, child_pids, snapshot_times

if TYPE_CHECKING:
    from devenv.demo import Children, WorkloadSet
    from devenv.fleet import ClusterSpec

WEB_PORT = env.BENCH_PORT_BASE + 180
# A Redis database of its own: 0 is the default (the demo, the other benchmarks), 5 tests/test_demo.py's, 7
# tests/collectors/test_tasks.py's, 9 the tests'. A worker of another database's beat would take our tasks.
REDIS_URL = "redis://127.0.0.1:6379/12"
ORGANIZATION = "soak"
ADMIN_USER = "soak-admin"
SAMPLE_EVERY_S = 30.0
LOG_DIR = env.REPO / ".run" / "soak"
MIN_DURATION_S = 60.0
FIRST_SNAPSHOT_WAIT_S = 90.0
# What bench/env.configure_environment tunes for the timed benchmarks; the soak runs with the production
# defaults of these (or what the caller's environment says).
_TIMED_ONLY = ("COLLECTOR_ACTIVITY_SAMPLES", "LOG_LEVEL", "API_THROTTLE_RATE")
ELAPSED = "the duration elapsed"

_UNIT_S = {"h": 3600, "min": 60, "m": 60, "s": 1}
_PARTS = re.compile(r"(\d+(?:\.\d+)?)(h|min|m|s)")


def parse_duration(text: str) -> float:
    """'2h', '10m', '90s', '1h30m' or plain seconds ('600') -> seconds (at least a minute)."""
    s = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        seconds = float(s)
    elif re.fullmatch(r"(?:\d+(?:\.\d+)?(?:h|min|m|s))+", s):
        seconds = sum(float(n) * _UNIT_S[unit] for n, unit in _PARTS.findall(s))
    else:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 2h, 10m, 1h30m or 600 (seconds)")
    if seconds < MIN_DURATION_S:
        raise argparse.ArgumentTypeError(f"{text!r}: at least {MIN_DURATION_S:.0f} s (two memory samples)")
    return seconds


@dataclass
class World:
    """What the soak starts, for the run and for the clean-up (which stops whatever of it is there)."""

    tmp: Path
    cluster_specs: list[ClusterSpec]  # the history store's (unless BENCH_DATABASE_URL), the monitored ones'
    children: Children
    stop: threading.Event = field(default_factory=threading.Event)
    ended: str = ELAPSED
    running: bool = False  # started: a signal now ends the run instead of the start-up
    redis_started: bool = False
    workloads: WorkloadSet | None = None
    servers: dict[str, int] = field(default_factory=dict)  # registered name -> id
    pids: dict[str, int] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    password: str = ""
    token: str = ""


def monitored_specs() -> dict[str, ClusterSpec]:
    """Registered server name -> the demo's cluster spec on a bench port, with a data directory of its own."""
    from devenv import demo

    ports = {s.name: env.BENCH_PORT_BASE + s.major for s in demo.SERVERS}
    return {
        s.name: replace(demo.cluster_spec(s, fresh=True), name=f"bench-soak-pg{s.major}", port=ports[s.name])
        for s in demo.SERVERS
    }


def run(
    duration_s: float, *, markdown: str | None = None, no_docs: bool = False, keep: bool = False, command: str = ""
) -> int:
    """Start the world, run it for ``duration_s``, stop everything, report. The keys are the caller's
    (bench/__main__ sets keys for this run only). A missed target is a finding: 0 all the same."""
    from devenv import demo

    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "gunicorn").exists():
        raise SystemExit(f"no gunicorn in {bin_dir}: `make install` (pyproject.toml declares it)")
    for port in (WEB_PORT, *([] if os.environ.get("BENCH_DATABASE_URL") else [env.HISTORY_PORT])):
        if demo.port_open(port):  # the history store is recreated: never under a running `make bench`
            raise SystemExit(f"port {port} is in use: is a benchmark or another soak running?")
    specs = monitored_specs()
    history = [] if os.environ.get("BENCH_DATABASE_URL") else [env.history_spec()]
    world = World(
        tmp=Path(tempfile.mkdtemp(prefix="bench-soak-")),
        cluster_specs=[*history, *specs.values()],
        children=demo.Children(),
    )
    _environment(str(world.tmp / "static"))

    previous = env.stop_on_signals(world)
    result: SoakRun | None = None
    try:
        names = ", ".join(s.name for s in world.cluster_specs)
        print(f"soak for {soak_report.duration_text(duration_s)}: starting {names}", flush=True)
        _start(world, specs)
        result = _measure(world, duration_s, command)
    except KeyboardInterrupt:
        print(f"\n{world.ended} while starting: stopping what was started", flush=True)
    finally:
        world.stop.set()
        _stop(world, keep=keep)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if result is None:
        return 1
    print()
    print(soak_report.text(result))
    paths = [Path(markdown)] if markdown else []
    if not no_docs and not result.interrupted and duration_s >= soak_report.FULL_RUN_S:
        paths.append(soak_report.report.DOC)
    for path in paths:
        print(f"wrote {soak_report.write_section(result, path)}")
    return 0


# --------------------------------------------------------------------------
# Start
# --------------------------------------------------------------------------


def _environment(static_root: str) -> None:
    """Django's environment, for this process and the ones it starts (set before django.setup())."""
    from devenv import demo

    caller = {name: os.environ.get(name) for name in _TIMED_ONLY}
    env.configure_environment()
    for name, value in caller.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    os.environ.update(REDIS_URL=REDIS_URL, STATIC_ROOT=static_root, ADVISOR_INTERVAL_S=str(demo.ADVISOR_INTERVAL_S))


def _start(world: World, specs: dict) -> None:
    """Redis, the clusters, the history database (fresh, migrated), the servers and the users, the workloads,
    then the worker, beat and gunicorn; returns once gunicorn's workers are up and every server has a snapshot."""
    from django.core.management import call_command

    from devenv import demo
    from devenv.fleet import start_many
    from devenv.redis import ensure_redis

    world.redis_started = ensure_redis(REDIS_URL) == "started"
    _flush_redis()
    started = start_many(world.cluster_specs)
    clusters = {server: started[spec.name] for server, spec in specs.items()}
    env.recreate_history_database()
    env.setup_django()
    call_command("collectstatic", interactive=False, verbosity=0)  # DEBUG off: gunicorn serves STATIC_ROOT
    world.servers = _register(clusters)
    world.password, world.token = _admin()
    world.workloads = demo.WorkloadSet(clusters, scale=1.0)
    world.workloads.start()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name, argv in _argv(world.tmp / "celerybeat-schedule").items():
        world.logs[name] = LOG_DIR / f"{name}.log"
        world.children.start(name, _logged(argv, world.logs[name]), env=child_env, cwd=env.REPO)
    world.pids = {c.name: c.proc.pid for c in world.children.items}
    if not demo.wait_for_port(WEB_PORT, world.children.items[-1], timeout=60):
        raise SystemExit(f"gunicorn did not listen on {WEB_PORT}: see {world.logs['gunicorn']}")
    _wait_until_up(world)


def _register(clusters: dict) -> dict[str, int]:
    """The demo's servers in organization "soak", every 15 s, through `manage.py servers add`."""
    from django.core.management import call_command

    from devenv import demo
    from inventory.models import Server

    for s in demo.SERVERS:
        args = f"add {s.name} --org {ORGANIZATION} --interval {demo.INTERVAL_S} --cpus {os.cpu_count()} --tag soak"
        call_command("servers", *args.split(), "--dsn", demo.monitor_dsn(clusters[s.name]), stdout=io.StringIO())
    return dict(Server.objects.filter(organization__name=ORGANIZATION).order_by("name").values_list("name", "pk"))


def _admin() -> tuple[str, str]:
    """An admin of the organization and a read-only API token of theirs (`manage.py tokens create`)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from inventory.models import Membership, Organization
    from inventory.services import membership_add

    password = secrets.token_urlsafe(16)
    get_user_model().objects.create_superuser(ADMIN_USER, "soak@bench.invalid", password)
    organization = Organization.objects.get(name=ORGANIZATION)
    membership_add(organization=organization, username=ADMIN_USER, role=Membership.Role.ADMIN)
    out = io.StringIO()
    call_command("tokens", *f"create {ADMIN_USER} --name soak --read-only".split(), stdout=out, stderr=io.StringIO())
    return password, out.getvalue().strip()


def _argv(schedule: Path) -> dict[str, list[str]]:
    """As docker-compose.yml runs them (the web server on a bench port, with its access log as there)."""
    bin_dir = Path(sys.executable).parent
    celery = f"{bin_dir / 'celery'} -A console"
    return {
        "worker": f"{celery} worker --pool threads --concurrency 8 --loglevel info".split(),
        "beat": [*f"{celery} beat --loglevel info --schedule".split(), str(schedule)],
        "gunicorn": [
            str(bin_dir / "gunicorn"),
            *f"console.wsgi --bind 127.0.0.1:{WEB_PORT} --workers 2 --threads 4 --access-logfile -".split(),
        ],
    }


def _logged(argv: list[str], log: Path) -> list[str]:
    # sh execs the program (same pid, same process group) with its output in the log file.
    return ["/bin/sh", "-c", f'exec "$@" >{shlex.quote(str(log))} 2>&1', "sh", *argv]


def _wait_until_up(world: World) -> None:
    """gunicorn's two workers, and a first snapshot of every server: the run starts from there."""
    from history.models import Snapshot

    deadline = time.monotonic() + FIRST_SNAPSHOT_WAIT_S
    while not world.stop.wait(1.0) and time.monotonic() < deadline:
        have = set(Snapshot.objects.values_list("server_id", flat=True).distinct())
        if len(child_pids(world.pids["gunicorn"])) >= 2 and set(world.servers.values()) <= have:
            return


# --------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------


def _measure(world: World, duration_s: float, command: str) -> SoakRun:
    """The run itself: the client reads and the sampler samples until the time is up (or a process exits, or a
    signal comes); then the figures, read before anything stops."""
    from devenv import demo

    t0 = time.time()
    pids = world.pids
    processes = {"celery worker": pids["worker"], "celery beat": pids["beat"], "gunicorn master": pids["gunicorn"]}
    sampler = Sampler(
        t0=t0, processes=processes, web_master=pids["gunicorn"], servers=world.servers, logs=LogWatch(world.logs)
    )
    client = Client(
        base=f"http://127.0.0.1:{WEB_PORT}",
        username=ADMIN_USER,
        password=world.password,
        token=world.token,
        servers=world.servers,
        t0=t0,
        stop=world.stop,
    )
    client.thread.start()
    counts = [w.counter.value for w in world.workloads.items]
    print(
        f"up: console http://127.0.0.1:{WEB_PORT}/ (user {ADMIN_USER}, password {world.password}); logs in "
        f"{os.path.relpath(LOG_DIR)}/",
        flush=True,
    )
    world.running = True
    _loop(world, duration_s, t0, sampler, client)
    end = time.time()
    world.stop.set()
    client.thread.join(Client.TIMEOUT_S)
    rates = [
        (w.name, (w.counter.value - c) / (end - t0), w.unit, w.counter.errors)
        for w, c in zip(world.workloads.items, counts, strict=True)
    ]
    lags = [
        soak_report.server_lag(
            name, snapshot_times(server_id), demo.INTERVAL_S, until=end, newest_ages=sampler.newest_ages[name]
        )
        for name, server_id in world.servers.items()
    ]
    with client.lock:
        failures, requests, ms = list(client.failures), client.requests, list(client.ms)
    return SoakRun(
        started_at=datetime.fromtimestamp(t0, UTC),
        duration_s=duration_s,
        elapsed_s=end - t0,
        ended=world.ended,
        command=command,
        code=env.code_version(),
        machine=env.machine(),
        interval_s=demo.INTERVAL_S,
        samples=sampler.samples,
        lags=lags,
        errors=sorted(sampler.errors + failures, key=lambda e: e.at_s),
        requests=requests,
        failed_requests=len(failures),
        request_ms=ms,
        workloads=rates,
        interrupted=world.ended.startswith("interrupted"),
    )


def _loop(world: World, duration_s: float, t0: float, sampler: Sampler, client: Client) -> None:
    status_every = 300.0 if duration_s >= soak_report.HOUR_S else 60.0
    next_sample = next_status = t0
    while time.time() - t0 < duration_s:
        if time.time() >= next_sample:
            sample = sampler.sample()
            next_sample += SAMPLE_EVERY_S
            if sample.at_s + t0 >= next_status:
                next_status += status_every
                rss = ", ".join(f"{k} {v / 1024:.0f}" for k, v in sample.rss_kb.items())
                print(
                    f"[{soak_report.clock(sample.at_s)}] RSS MiB: {rss}; history tables "
                    f"{sample.history_bytes / 1e6:.1f} MB; {client.requests} requests; "
                    f"{len(sampler.errors) + len(client.failures)} errors",
                    flush=True,
                )
        exited = world.children.exited()
        for child, rc in exited:
            sampler.errors.append(Error("process", time.time() - t0, f"{child.name} exited with code {rc}"))
            world.ended = f"{child.name} exited with code {rc}"
        if exited or world.stop.wait(min(1.0, max(0.0, next_sample - time.time()))):
            break
    sampler.sample()  # at the end, before anything stops


# --------------------------------------------------------------------------
# Stop
# --------------------------------------------------------------------------


def _flush_redis() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def _stop(world: World, *, keep: bool) -> None:
    """Stop (in this order) the processes, the workloads, the clusters; each step even if one before failed."""
    from devenv.cluster import cluster
    from devenv.fleet import stop_many
    from devenv.redis import stop_redis

    def step(what: str, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - go on with the rest of the clean-up
            print(f"  could not {what}: {type(exc).__name__}: {exc}", flush=True)

    for c, rc in world.children.terminate():
        if rc is None:
            print(f"  {c.name} did not stop in time: killed", flush=True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, signal.SIGKILL)  # anything left in its process group (a gunicorn worker)
    if world.workloads is not None and (left := world.workloads.stop()):
        print(f"  workloads still running: {', '.join(left)}", flush=True)
    step("flush the Redis database", _flush_redis)
    if not keep:
        step("drop the history database", env.drop_history_database)
        running = [c for s in world.cluster_specs if (c := cluster(s.name, s.major, s.port, s.base)).is_running()]
        step("stop the clusters", stop_many, running)
    if world.redis_started:
        step("stop Redis", stop_redis, REDIS_URL)
    shutil.rmtree(world.tmp, ignore_errors=True)
    print("stopped everything the soak started" + (", but the clusters (--keep)" if keep else ""), flush=True)
