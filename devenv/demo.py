"""The pieces of ``manage.py demo`` that do not need Django: the demo clusters, their
workloads (devenv/workloads.py), the child processes (celery worker, beat, web server) and
the lock that keeps two demos apart.

Two monitored clusters (ports from the port map, data under ``.run/demo-pg<major>``, reused
between runs):

* ``pg16-dealloc-storm`` (PostgreSQL 16, ``pg_stat_statements.max = 100``): the deallocation
  storm of seed 000 and two-phase commits with distinct GIDs (seed 001);
* ``pg18-planning`` (PostgreSQL 18, ``pg_stat_statements.track_planning = on``): a
  planning-heavy join and one hot prepared statement from 8 clients (seeds 002, 003).

Each has a database ``app`` (owned by the role ``app``) with pg_stat_statements, and a role
``monitor`` (member of pg_monitor) that must log in with its password (SCRAM).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import workloads
from .cluster import Cluster
from .fleet import ClusterSpec, monitored_setup, start_many, stop_many
from .paths import RUN_DIR
from .ports import port_for_demo

APP_DB = "app"
APP_USER = "app"
MONITOR_USER = "monitor"
#: The demo servers listen on 127.0.0.1 only; a fixed password keeps registrations valid
#: across runs.
MONITOR_PASSWORD = "demo-monitor-pw"
ORGANIZATION = "demo"
INTERVAL_S = 15


def interval_s() -> int:
    """The demo servers' interval: INTERVAL_S, or DEMO_INTERVAL_S (down to the product's 5 s) for a quicker look;
    its test takes 5 s, so that the storm's alert is sent within half a minute instead of a whole one."""
    return int(os.environ.get("DEMO_INTERVAL_S", INTERVAL_S))


#: The advisor evaluates the demo's servers every minute (300 s in production): its advice shows within minutes.
ADVISOR_INTERVAL_S = 60
#: Beat evaluates the alert rules every 15 s (60 s in production): an alert is sent soon after its condition.
ALERTS_EVALUATE_S = 15
#: The demo organization's alert rules, by kind: the demo's, NOT the product's defaults (alerts/defaults.py says
#: why those are longer), so that the storm server's alerts are seen within the demo's first minutes: the
#: deallocation storm over 2 minutes instead of 15 and sent at once (no 5-minute hold), the advisor's critical
#: advice sent at once.
ALERT_RULES: dict[str, dict[str, Any]] = {
    "dealloc": {"dealloc_minutes": 2, "hold_minutes": 0},
    "advisor": {"hold_minutes": 0},
}
WEBHOOK_CHANNEL = "Demo webhook sink"
EMAIL_CHANNEL = "Demo admin mail"
LOCK_PATH = RUN_DIR / "demo.lock"
BEAT_SCHEDULE = RUN_DIR / "demo-celerybeat-schedule"


@dataclass(frozen=True)
class DemoServer:
    name: str  # registered name
    major: int
    settings: dict[str, Any]
    case: str  # one line: what it shows

    @property
    def cluster_name(self) -> str:
        return f"demo-pg{self.major}"

    @property
    def port(self) -> int:
        return port_for_demo(self.major)


DEALLOC_SERVER = DemoServer(
    name="pg16-dealloc-storm",
    major=16,
    settings={"pg_stat_statements.max": 100, "max_prepared_transactions": 100},
    case="pg_stat_statements.max=100: 128 distinct statements from 16 clients evict entries "
    "all the time (seed 000); two-phase commits with distinct GIDs (seed 001)",
)
PLANNING_SERVER = DemoServer(
    name="pg18-planning",
    major=18,
    settings={"pg_stat_statements.track_planning": "on", "max_prepared_transactions": 100},
    case="track_planning=on: a join of 11 tables whose planning costs far more than its "
    "execution, and one hot prepared statement from 8 clients (seeds 002, 003)",
)
SERVERS: tuple[DemoServer, ...] = (DEALLOC_SERVER, PLANNING_SERVER)

# --------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------


_setup_monitored = monitored_setup(
    dbname=APP_DB, monitor_user=MONITOR_USER, monitor_password=MONITOR_PASSWORD, db_owner=APP_USER
)


def cluster_spec(server: DemoServer, *, fresh: bool = False) -> ClusterSpec:
    return ClusterSpec(
        name=server.cluster_name,
        major=server.major,
        port=server.port,
        settings=dict(server.settings),
        preload=["pg_stat_statements"],
        # Before initdb's trust lines: the monitor must use its password.
        hba=[f"host all {MONITOR_USER} 127.0.0.1/32 scram-sha-256"],
        fresh=fresh,
        setup=_setup_monitored,
    )


def start_clusters(*, fresh: bool = False) -> dict[str, Cluster]:
    """Start (or reuse) the demo clusters; returns registered server name -> Cluster."""
    started = start_many([cluster_spec(s, fresh=fresh) for s in SERVERS])
    return {s.name: started[s.cluster_name] for s in SERVERS}


def stop_clusters(clusters: dict[str, Cluster] | list[Cluster]) -> None:
    """Fast shutdown (immediate/kill as a fallback)."""
    stop_many(list(clusters.values()) if isinstance(clusters, dict) else clusters, mode="fast")


def monitor_dsn(c: Cluster) -> str:
    return c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD)


def app_dsn(c: Cluster) -> str:
    return c.dsn(APP_DB, APP_USER)


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    server: str  # registered server name
    function: Callable[..., None]
    unit: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    counter: workloads.Counter = field(init=False)
    thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.counter = workloads.Counter(self.unit)


def demo_workloads() -> list[Workload]:
    return [
        Workload("dealloc-storm", DEALLOC_SERVER.name, workloads.dealloc_storm, "tx"),
        Workload("two-phase", DEALLOC_SERVER.name, workloads.two_phase, "tx"),
        Workload("planning-heavy", PLANNING_SERVER.name, workloads.planning_heavy, "q"),
        Workload("hot-prepared", PLANNING_SERVER.name, workloads.hot_prepared, "q"),
    ]


class WorkloadSet:
    """The demo workloads in background threads, each against its server's database ``app``."""

    def __init__(self, clusters: dict[str, Cluster], *, scale: float = 1.0) -> None:
        self.clusters = clusters
        self.scale = scale
        self.stop_event = threading.Event()
        self.items = demo_workloads()
        self._last: tuple[float, list[int]] | None = None

    def start(self) -> None:
        for w in self.items:
            dsn = app_dsn(self.clusters[w.server])
            w.thread = threading.Thread(
                target=w.function,
                args=(dsn, self.stop_event),
                kwargs={**w.kwargs, "scale": self.scale, "counter": w.counter},
                name=f"workload-{w.name}",
                daemon=True,
            )
            w.thread.start()
        self._last = (time.monotonic(), [0] * len(self.items))

    def stop(self, timeout: float = 15.0) -> list[str]:
        """Set the stop event and wait; returns the names of workloads still running."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for w in self.items:
            if w.thread is not None:
                w.thread.join(max(0.0, deadline - time.monotonic()))
        return [w.name for w in self.items if w.thread is not None and w.thread.is_alive()]

    def rates(self) -> list[tuple[Workload, float]]:
        """(workload, units per second) since the previous call (or the start)."""
        now = time.monotonic()
        values = [w.counter.value for w in self.items]
        if self._last is None:
            return [(w, 0.0) for w in self.items]
        t0, v0 = self._last
        self._last = (now, values)
        span = max(now - t0, 1e-6)
        return [(w, (v - p) / span) for w, v, p in zip(self.items, values, v0, strict=True)]


# --------------------------------------------------------------------------
# Child processes
# --------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not on Linux
    _libc = None


def _child_preexec() -> None:
    # Die with the demo even if it is killed with SIGKILL (no orphaned worker or web server).
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class Child:
    name: str
    argv: list[str]
    proc: subprocess.Popen


class Children:
    """Child processes in their own process group (a terminal's Ctrl-C reaches only the demo,
    which then stops them in order); each gets SIGTERM if the demo dies."""

    def __init__(self) -> None:
        self.items: list[Child] = []

    def start(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None
    ) -> Child:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=_child_preexec,
        )
        child = Child(name, argv, proc)
        self.items.append(child)
        return child

    def exited(self) -> list[tuple[Child, int]]:
        return [(c, c.proc.returncode) for c in self.items if c.proc.poll() is not None]

    def terminate(self, timeout: float = 20.0) -> list[tuple[Child, int | None]]:
        """SIGTERM every child (worker: warm shutdown), SIGKILL after ``timeout``; returns
        (child, returncode or None when it had to be killed)."""
        for c in self.items:
            if c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    c.proc.terminate()
        deadline = time.monotonic() + timeout
        out: list[tuple[Child, int | None]] = []
        for c in self.items:
            try:
                rc: int | None = c.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait()
                rc = None
            out.append((c, rc))
        return out


def celery_argv(*args: str) -> list[str]:
    """``.venv/bin/celery ...`` (the celery next to this Python), or ``python -m celery``."""
    exe = Path(sys.executable).parent / "celery"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "celery"]
    return base + ["-A", "console", "--quiet", *args]  # --quiet: no startup banner


def worker_argv() -> list[str]:
    return celery_argv(
        "worker",
        "--pool",
        "threads",
        "--concurrency",
        "4",
        "--loglevel",
        "warning",
        "--hostname",
        "demo@%h",
        "--without-gossip",
        "--without-mingle",
    )


def beat_argv() -> list[str]:
    return celery_argv("beat", "--loglevel", "warning", "--schedule", str(BEAT_SCHEDULE))


def sampler_argv(manage_py: Path) -> list[str]:
    return [sys.executable, str(manage_py), "sample_waits"]


def web_argv(manage_py: Path, port: int) -> list[str]:
    return [sys.executable, str(manage_py), "runserver", f"127.0.0.1:{port}", "--noreload"]


# --------------------------------------------------------------------------
# One demo at a time
# --------------------------------------------------------------------------


class DemoBusy(RuntimeError):
    pass


@contextlib.contextmanager
def demo_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Held for the demo's lifetime: a second demo (or the demo test) fails clearly instead of
    sharing the demo clusters."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise DemoBusy(f"another demo is running (pid {holder}; lock {path}); stop it first") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def wait_for_port(port: int, child: Child, timeout: float = 30.0) -> bool:
    """Wait until ``port`` accepts connections; False if ``child`` exited or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return True
        if child.proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False
