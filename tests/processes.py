"""The product's own processes, started by the tests as production starts them: a Celery worker, beat,
gunicorn, manage.py commands. Each writes its own log; a test stops (or kills) only what it started."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def database_url(settings_dict: dict | None = None) -> str:
    """The test database (or `settings_dict`'s) as a DATABASE_URL for a child process."""
    if settings_dict is None:
        from django.db import connection

        settings_dict = connection.settings_dict
    d = settings_dict
    password = f":{d['PASSWORD']}" if d.get("PASSWORD") else ""
    return f"postgres://{d['USER']}{password}@{d['HOST']}:{d['PORT']}/{d['NAME']}"


def console_env(**extra: str) -> dict[str, str]:
    """What a child process of the console needs to run against the tests' own stores: the test database, the
    tests' Redis and this process's CREDENTIALS_KEY (what it encrypts, the child decrypts), and `extra`."""
    from django.conf import settings

    return {
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CREDENTIALS_KEY": settings.CREDENTIALS_KEY,
        **extra,
    }


def celery(*args: str) -> list[str]:
    """`celery -A console ...` with the celery of this virtualenv."""
    return [str(BIN / "celery"), "-A", "console", *args]


def worker_argv(*, name: str = "worker", concurrency: int = 2) -> list[str]:
    """A threaded worker as docker-compose.yml runs it (fewer threads), with its own node name."""
    return celery(
        "worker",
        "--pool",
        "threads",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "info",
        "--hostname",
        f"{name}@%h",
    )


def beat_argv(schedule: Path) -> list[str]:
    return celery("beat", "--schedule", str(schedule), "--loglevel", "info")


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout_s: float = 20) -> int | None:
        """SIGTERM (a worker's warm shutdown, beat's schedule saved), SIGKILL after `timeout_s`; the exit code,
        None when it had to be killed."""
        if not self.alive():
            return self.popen.returncode
        with contextlib.suppress(ProcessLookupError):
            self.popen.terminate()
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL, as the kernel's OOM killer or a pulled plug would: nothing runs after it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)


@dataclass
class Processes:
    """Processes of one test, with a common environment; `stop_all` stops what is still running, newest first."""

    folder: Path
    env: dict[str, str]
    started: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: list[str], **env: str) -> Proc:
        log = self.folder / f"{name}.log"
        count = sum(1 for p in self.started if p.name == name)
        if count:  # the same process started again: a log of its own
            log = self.folder / f"{name}.{count}.log"
        with open(log, "w") as out:
            popen = subprocess.Popen(
                argv, cwd=ROOT, env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        proc = Proc(name, argv, log, popen)
        self.started.append(proc)
        return proc

    def run(self, name: str, argv: list[str], *, timeout_s: float = 120, **env: str) -> str:
        """A one-shot command (migrate, collectstatic...): its output; AssertionError with it when it fails."""
        done = subprocess.run(
            argv,
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{name} exited with {done.returncode}:\n{output[-4000:]}"
        return output

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.stop()

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.text()[-tail:]}" for p in self.started)


@contextlib.contextmanager
def processes(folder: Path, env: dict[str, str]) -> Iterator[Processes]:
    group = Processes(folder, {**os.environ, "PYTHONUNBUFFERED": "1", **env})
    try:
        yield group
    finally:
        group.stop_all()


def wait_until(predicate: Callable[[], object], timeout_s: float, *, every_s: float = 0.25) -> float | None:
    """Poll until `predicate()` is true: the seconds it took, or None when it was not within `timeout_s` (for a
    fixture that drives a system and leaves the verdict to the tests)."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            return None
        time.sleep(every_s)
    return time.monotonic() - started


def wait_for(
    predicate: Callable[[], object],
    timeout_s: float,
    *,
    what: str,
    logs: Callable[[], str] | None = None,
    every_s: float = 0.25,
) -> float:
    """Poll until `predicate()` is true; the seconds it took. Fails the test with `what` and the logs."""
    started = time.monotonic()
    while True:
        if predicate():
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            import pytest

            pytest.fail(f"{what}: not within {timeout_s:.0f} s" + (f"\n{logs()}" if logs else ""), pytrace=False)
        time.sleep(every_s)


def wait_for_more(
    count: Callable[[], int], more: int, timeout_s: float, *, what: str, logs: Callable[[], str] | None = None
) -> float:
    """Poll until `count()` has grown by `more` from what it is now (beat ticked `more` times again, `more`
    snapshots were stored): a window that a check of "nothing else happens meanwhile" needs, measured in the
    events it must span rather than in seconds. The seconds it took."""
    start = count()
    return wait_for(lambda: count() >= start + more, timeout_s, what=f"{what} ({more} more)", logs=logs)


def wait_ready(proc: Proc, timeout_s: float = 60) -> float:
    """Until a Celery worker says it is ready (its queues consumed): a test whose first task must not wait for the
    worker's start-up, which takes seconds on a loaded machine. The seconds it took."""
    return wait_for(lambda: " ready." in proc.text(), timeout_s, what=f"{proc.name} ready", logs=proc.text)


def succeeded(proc: Proc, task: str) -> int:
    """How many times a worker's log says `task` succeeded."""
    return len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] succeeded", proc.text()))


def age_beat_schedule(path: Path, *, by: timedelta) -> list[str]:
    """Write beat's schedule file as if every entry had last run `by` ago (a beat started after a long stop):
    the next beat started on it runs every entry at once. The names of the entries."""
    from celery.beat import PersistentScheduler

    from console.celery import app

    app.finalize(auto=True)  # its beat_schedule is installed once the app is finalized (console/celery.py)
    scheduler = PersistentScheduler(app=app, schedule_filename=str(path))
    try:
        then = app.now() - by
        for entry in scheduler.schedule.values():
            entry.last_run_at = then
        scheduler.sync()
        return sorted(scheduler.schedule)
    finally:
        scheduler.close()
