"""Port map: the one place where the project's ports are chosen, and how to wait for a port that
a closed connection still holds."""

from __future__ import annotations

import socket
import time
from typing import Any

from .binaries import MAJORS

#: History store shared by the demo and the tests.
HISTORY_PORT = 54320

#: Monitored clusters of the tests: 55400 + major (55412 ... 55418).
TEST_PORT_BASE = 55400
#: Extra single-purpose test clusters: 55500 + major (one per major; taken:
#: 14 = the evict cluster, 16 = the scratch cluster of tests/test_devenv.py).
TEST_EXTRA_PORT_BASE = 55500
#: The extra PG 14 test cluster with a tiny pg_stat_statements.max (55514).
TEST_EVICT_PORT = TEST_EXTRA_PORT_BASE + 14
#: The throwaway cluster of tests/advisor/test_hostile_names_in_scripts.py (the advisor's scripts run by psql): 55520.
TEST_SCRIPTS_PORT = TEST_EXTRA_PORT_BASE + 20
#: The throwaway cluster of tests/test_hostile_users.py (issue 52's attacks through the console's paths): 55522.
TEST_ATTACK_PORT = TEST_EXTRA_PORT_BASE + 22
#: The fault tests' own world (tests/production/fault_world.py): their history store, monitored clusters and
#: Redis, which they stop, kill and fill without touching anything the other tests share: 55540 + n.
TEST_FAULT_PORT_BASE = TEST_EXTRA_PORT_BASE + 40
#: Throwaway clusters of tests/advisor/test_changes_apply.py (ALTER SYSTEM checks): 55600 + major.
TEST_ALTER_PORT_BASE = 55600
#: Throwaway clusters of tests/advisor/test_end_to_end_rules.py: 55700 + major.
TEST_THROWAWAY_PORT_BASE = 55700
#: Every test range above (55400-55799) is worker 0's when the suite runs on several pytest workers (pytest-xdist,
#: `make test`): worker n's clusters are n * TEST_SLOT_STRIDE above (tests/slots.py), up to TEST_SLOTS workers.
TEST_PORT_LAST = TEST_THROWAWAY_PORT_BASE + 99
TEST_SLOT_STRIDE = 2000
TEST_SLOTS = 3
#: Monitored clusters of the demo: 56400 + major (56412 ... 56418).
DEMO_PORT_BASE = 56400

#: Default Redis (celery broker) used by the tests and the demo.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


# (Not named test_*: pytest would collect them when imported into a test module.)
def port_for_test(major: int) -> int:
    """Port of the monitored test cluster of ``major``."""
    return TEST_PORT_BASE + major


def port_for_extra_test(major: int) -> int:
    """Port of the extra single-purpose test cluster of ``major``."""
    return TEST_EXTRA_PORT_BASE + major


def port_for_demo(major: int) -> int:
    """Port of the monitored demo cluster of ``major``."""
    return DEMO_PORT_BASE + major


#: The ranges above (and the benchmark's 57000-57199) lie inside Linux's ephemeral range (32768-60999), so a
#: client connection of the machine may take one as its local port and hold it while a cluster wants to
#: start there (seen once: the demo's 56418 "in use" for 70 s in a full test run). Reserved from the
#: kernel's choice where we may (root, a writable /proc/sys).
RESERVED_RANGES = (
    (HISTORY_PORT, HISTORY_PORT),
    *((TEST_PORT_BASE + n * TEST_SLOT_STRIDE, TEST_PORT_LAST + n * TEST_SLOT_STRIDE) for n in range(TEST_SLOTS)),
    (DEMO_PORT_BASE, DEMO_PORT_BASE + 99),
    (57000, 57199),  # bench/env.py's BENCH_PORT_BASE and its history store (devenv does not import bench)
)
RESERVED_PORTS_FILE = "/proc/sys/net/ipv4/ip_local_reserved_ports"


def _reserved_items(text: str) -> list[str]:
    """The kernel's reserved-ports list (``"1000,2000-2010\\n"``) as its items."""
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def merge_reserved(current: str, ranges=RESERVED_RANGES) -> str:
    """The kernel's reserved-ports list with ``ranges`` added; nothing removed."""
    items = _reserved_items(current)
    for low, high in ranges:
        item = str(low) if low == high else f"{low}-{high}"
        if item not in items:
            items.append(item)
    return ",".join(items)


def reserve_ports(path: str = RESERVED_PORTS_FILE) -> bool:
    """Add the project's ranges to the kernel's reserved ports; False where that is not allowed here."""
    try:
        with open(path) as f:
            current = f.read()
        wanted = merge_reserved(current)
        if wanted != ",".join(_reserved_items(current)):
            with open(path, "w") as f:
                f.write(wanted)
    except OSError:
        return False
    return True


PORTS: dict[str, Any] = {
    "history": HISTORY_PORT,
    "test": {m: port_for_test(m) for m in MAJORS},
    "test-extra": {m: port_for_extra_test(m) for m in MAJORS},
    "test-evict": TEST_EVICT_PORT,
    "test-faults": tuple(range(TEST_FAULT_PORT_BASE, TEST_FAULT_PORT_BASE + 10)),
    "demo": {m: port_for_demo(m) for m in MAJORS},
    "redis": 6379,
}


def _port_in_use(port: int) -> bool:
    """Whether postgres could not bind the port. Tried the way postgres binds (SO_REUSEADDR), not by
    connecting: a connect to a free port in the ephemeral range can connect to itself (TCP
    simultaneous open), which once made a free port look taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


PORT_WAIT_S = 70  # longer than TIME_WAIT (60 s on Linux)


def _wait_for_port(port: int, timeout_s: float = PORT_WAIT_S) -> bool:
    """Whether the port is (or becomes) free within timeout_s. Our ports lie in Linux's ephemeral
    range (32768-60999), so a client connection closed a moment ago may still hold one in TIME_WAIT
    (it cannot be bound until that ends, at most 60 s later); a real listener keeps it."""
    deadline = time.monotonic() + timeout_s
    while _port_in_use(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(1)
    return True
