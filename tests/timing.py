"""Where the suite's time goes, printed at the end of every run (`make test` adds pytest's own --durations=30):
the seconds each test folder took (setup, call and teardown of its tests, summed over the pytest workers), the
CPU seconds its tests' processes used meanwhile, its tests, and the run's wall time; then the test files that
used the most CPU (a file is what a pytest worker is handed, and where a module's world is built once). The
suite's growth shows at every run, folder by folder.

CPU: the pytest worker's own (every thread) and that of the processes it started and reaped in the test (a
Celery worker, gunicorn, `manage.py`: counted when they end), from getrusage. Not counted: the servers shared
across tests (the history store, the monitored clusters, Redis), whose work for a test is real but not its
process's. On two cores a run bound by the CPU shows CPU seconds near twice the wall time; one bound by waits,
far less.

A folder is the first level under tests/ (tests/console, tests/production...); the files directly in tests/
are "tests/*.py"."""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

#: Not printed for a run of fewer tests than this (a developer's narrowed run).
MIN_TESTS = 20
#: How many test files the CPU list names.
TOP_FILES = 15


def folder_of(nodeid: str) -> str:
    """The folder a test is counted in: 'tests/console/api/test_x.py::t' -> 'tests/console'."""
    parts = nodeid.split("::", 1)[0].split("/")
    if len(parts) <= 2:
        return "tests/*.py"
    return "/".join(parts[:2])


CPU_PROPERTY = "cpu_s"


def cpu_s() -> float:
    """CPU seconds of this process and of its reaped children so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Folder:
    seconds: float = 0.0
    cpu_s: float = 0.0
    tests: set[str] = field(default_factory=set)


class CpuPerPhase:
    """In each process that runs tests: the CPU seconds of each phase (setup, call, teardown), on its report."""

    def __init__(self) -> None:
        self.started = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        self.started = cpu_s()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self.started = cpu_s()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        self.started = cpu_s()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        # A list of its own: the item's is shared by the reports of its three phases.
        report.user_properties = [*report.user_properties, (CPU_PROPERTY, cpu_s() - self.started)]


class Timing:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.folders: dict[str, Folder] = defaultdict(Folder)
        self.busy: dict[str, float] = {}  # seconds of tests per worker
        self.files: dict[str, Folder] = defaultdict(Folder)  # the same sums per test file

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cpu = sum(v for k, v in report.user_properties if k == CPU_PROPERTY)
        for sums in (self.folders[folder_of(report.nodeid)], self.files[report.nodeid.split("::", 1)[0]]):
            sums.seconds += report.duration
            sums.cpu_s += cpu
            sums.tests.add(report.nodeid)
        node = getattr(report, "node", None)  # the xdist worker that ran it, on the controller
        worker = node.gateway.id if node is not None else "main"
        self.busy[worker] = self.busy.get(worker, 0.0) + report.duration

    def table(self, wall_s: float, workers: int) -> list[str]:
        total = sum(f.seconds for f in self.folders.values())
        rows = sorted(self.folders.items(), key=lambda kv: -kv[1].seconds)
        width = max(len(name) for name, _ in rows)
        cpu = sum(f.cpu_s for f in self.folders.values())
        lines = [f"{'folder':<{width}}  {'tests':>6}  {'seconds':>8}  {'share':>6}  {'CPU s':>7}"]
        for name, f in rows:
            share = f.seconds / total if total else 0.0
            lines.append(f"{name:<{width}}  {len(f.tests):>6}  {f.seconds:>8.1f}  {share:>6.1%}  {f.cpu_s:>7.1f}")
        tests = sum(len(f.tests) for f in self.folders.values())
        lines.append(f"{'all':<{width}}  {tests:>6}  {total:>8.1f}  {1:>6.0%}  {cpu:>7.1f}")
        busy = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(self.busy.items()))
        plural = "s" if workers != 1 else ""
        lines.append(f"wall time {wall_s:.0f} s on {workers} pytest worker{plural} (in tests: {busy})")
        return lines

    def heaviest_files(self) -> list[str]:
        """The test files that used the most CPU, with their seconds."""
        rows = sorted(self.files.items(), key=lambda kv: -kv[1].cpu_s)[:TOP_FILES]
        return [f"{f.cpu_s:7.1f} CPU s {f.seconds:7.1f} s  {name}" for name, f in rows]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        if sum(len(f.tests) for f in self.folders.values()) < MIN_TESTS:
            return
        workers = getattr(config.option, "numprocesses", None) or 1
        terminalreporter.write_sep("=", "time per folder")
        for line in self.table(time.monotonic() - self.started, int(workers)):
            terminalreporter.write_line(line)
        terminalreporter.write_sep("=", f"the {TOP_FILES} test files with the most CPU")
        for line in self.heaviest_files():
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    # Where tests run: an xdist worker, or the one process of a plain run.
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(CpuPerPhase(), "pgconsole-cpu")
    # Only where the reports are gathered: the controller of an xdist run, or the one process of a plain run.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Timing(), "pgconsole-timing")
