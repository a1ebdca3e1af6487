"""Fixtures of the production-path tests: the fault tests' own world (tests/production/fault_world.py), started
once for the session at first use, and per test a group of the console's processes running against it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.processes import Processes, processes
from tests.production.fault_world import FaultWorld, start_world, stop_world


@pytest.fixture(scope="session")
def fault_world(cluster_lock, tmp_path_factory) -> Iterator[FaultWorld]:
    world = start_world(tmp_path_factory.mktemp("fault-world"))
    try:
        yield world
    finally:
        stop_world(world)


@dataclass
class Faults:
    world: FaultWorld
    procs: Processes

    def logs(self) -> str:
        return self.procs.logs()


@pytest.fixture
def faults(fault_world, tmp_path) -> Iterator[Faults]:
    """The world with an empty broker and a group for the test's worker and beat; afterwards the processes are
    stopped and every server the test registered is disabled (the next test's beat would collect it). What a
    test stopped and did not start again (it failed midway) is started first: one failure is not four."""
    if not fault_world.redis.answers():
        fault_world.redis.start()
    for cluster in (fault_world.history.cluster, fault_world.primary):
        if not cluster.is_running():
            cluster.start()
    fault_world.redis.flush()
    with processes(tmp_path, fault_world.env()) as procs:
        yield Faults(fault_world, procs)
    fault_world.disable_all()
