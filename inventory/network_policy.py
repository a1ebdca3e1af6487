"""Which addresses the console may dial as a monitored server.

A DBA types a host name; the console's workers then connect there with a password and report what the
connection said. Without a policy that maps (and reaches) the console's own network: the cloud metadata
service, the history store and Redis, link-local and loopback services. Refused always: link-local and
metadata addresses, unspecified, multicast and reserved addresses, the console's own history store and Redis,
Unix sockets and host lists. Loopback and private addresses: by configuration (MONITOR_ALLOW_LOOPBACK,
MONITOR_ALLOW_PRIVATE). The host is checked when a server is saved and again at every connection, against
the addresses it resolves to then (a name that resolved to an allowed address at save time may not any more),
and the connection goes to the address that was checked (libpq's hostaddr), not to a second lookup. The other
connections of one snapshot (each database's in the schema reading, a plan's second) dial that same address, checked
again, never a lookup of their own. A lookup is bounded by its caller's deadline (within()): getaddrinfo waits as
long as the resolver does, which no timeout of Python's bounds.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata and platform services outside the link-local range (which is refused whole): Alibaba's,
# AWS's IPv6 one and Azure's wire server.
METADATA = frozenset(ipaddress.ip_address(a) for a in ("100.100.100.200", "fd00:ec2::254", "168.63.129.16"))
_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
# A host name (RFC 1123 labels, a trailing dot allowed) or an IP literal; anything else is not a host.
_HOST_NAME = re.compile(
    r"(?=.{1,253}\.?$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?"
)  # noqa: E501


class Refused(Exception):
    """The policy does not let the console dial this host; the message says why, in the DBA's words."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Unresolvable(Exception):
    """The host name does not resolve (now): nothing to check, nothing to dial."""


def _literal(host: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def host_problem(host: str) -> str | None:
    """What is wrong with the host as written, before any lookup (None: a host name or an IP address)."""
    if not host:
        return "a host is required"
    if host.startswith(("/", "@")):
        return "Unix sockets are not monitored: give the server's host name or IP address"
    if "," in host:
        return "one host per server: register each server of a list on its own"
    if _literal(host) is None and not _HOST_NAME.fullmatch(host):
        return f"{host!r} is not a host name or an IP address"
    return None


def address_problem(address: IPAddress, port: int) -> str | None:
    """Why the console may not dial this address and port (None: it may)."""
    address = getattr(address, "ipv4_mapped", None) or address
    if address in METADATA or address.is_link_local:
        return f"{address} is a link-local or cloud metadata address"
    if address.is_unspecified or address.is_multicast or (address.version == 4 and address.is_reserved):
        return f"{address} is not the address of a server"
    if (address, port) in _internal() or (address.is_loopback and ("loopback", port) in _internal()):
        return f"{address}:{port} is the console's own history store or Redis"
    if address.is_loopback:
        return (
            None
            if settings.MONITOR_ALLOW_LOOPBACK
            else (f"{address} is a loopback address, refused by this console's network policy (MONITOR_ALLOW_LOOPBACK)")
        )
    if any(address in net for net in _PRIVATE):
        return (
            None
            if settings.MONITOR_ALLOW_PRIVATE
            else (f"{address} is a private address, refused by this console's network policy (MONITOR_ALLOW_PRIVATE)")
        )
    return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses the host name stands for now, literal or looked up; Unresolvable if none."""
    if (literal := _literal(host)) is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolvable(f"could not translate host name {host!r} to address: {exc}") from exc
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = _literal(sockaddr[0].split("%", 1)[0])
        if address is not None and address not in out:
            out.append(address)
    if not out:
        raise Unresolvable(f"could not translate host name {host!r} to address")
    return out


def check(host: str, port: int) -> None:
    """At save time: Refused if the host as written, or any address it resolves to now, is not allowed. A
    name that does not resolve yet is accepted (it is checked again at every connection)."""
    if problem := host_problem(host):
        raise Refused(problem)
    try:
        addresses = resolve(host, port)
    except Unresolvable:
        return
    for address in addresses:
        if problem := address_problem(address, port):
            raise Refused(_refusal(host, address, problem))


# Lookups under way in this process at once, those given up on included (each ends when the resolver does: its
# own timeouts, seconds to tens of seconds): past it a lookup is refused for now, so that names that never answer
# cannot pile up threads without end.
LOOKUPS_AT_ONCE = 64
_lookups = threading.BoundedSemaphore(LOOKUPS_AT_ONCE)
T = TypeVar("T")


class Late(Exception):
    """A lookup not over by its deadline, or not started (`crowded`: LOOKUPS_AT_ONCE were under way)."""

    def __init__(self, *, crowded: bool = False):
        super().__init__("crowded" if crowded else "late")
        self.crowded = crowded

    def words(self, host: str, timeout_s: float) -> str:
        if self.crowded:
            return f"the host {host} was not looked up: {LOOKUPS_AT_ONCE} slow lookups were under way"
        return f"the host {host} did not resolve within {timeout_s:g} s"


def within(host: str, lookup: Callable[[], T], deadline: float) -> T:
    """lookup() (one of this module's, which resolves `host`) by `deadline` (time.monotonic()), or Late. An IP
    address needs no lookup; a name's runs in a thread of its own, left to end by itself when it is late (a
    thread blocked in getaddrinfo cannot be stopped), its result dropped."""
    if _literal(host.strip("[]")) is not None:
        return lookup()
    if not _lookups.acquire(blocking=False):
        raise Late(crowded=True)
    done, box = threading.Event(), {}

    def run() -> None:
        try:
            box["value"] = lookup()
        except BaseException as exc:  # handed to the caller, if it still waits
            box["error"] = exc
        finally:
            _lookups.release()
            done.set()

    threading.Thread(target=run, name="policy-lookup", daemon=True).start()
    if not done.wait(max(deadline - time.monotonic(), 0.0)):
        raise Late()
    if "error" in box:
        raise box["error"]
    return box["value"]


def dial_address(host: str, port: int) -> str:
    """At connect time: the address to connect to (libpq's hostaddr), after every address the name resolves
    to now has passed; Refused or Unresolvable otherwise."""
    if problem := host_problem(host):
        raise Refused(problem)
    addresses = resolve(host, port)
    for address in addresses:
        if problem := address_problem(address, port):
            raise Refused(_refusal(host, address, problem))
    return str(addresses[0])


def recheck_address(host: str, address: str, port: int) -> str:
    """An address dialed before for this host (the snapshot's first connection's), checked against the policy
    again now, without a lookup: the other connections of one snapshot reach the server it reads, whatever the
    name resolves to meanwhile. Refused when the policy no longer allows it."""
    if problem := host_problem(host):
        raise Refused(problem)
    found = _literal(address.split("%", 1)[0])
    if found is None:
        raise Refused(f"{address!r} is not an IP address")
    if problem := address_problem(found, port):
        raise Refused(_refusal(host, found, problem))
    return str(found)


def _refusal(host: str, address: IPAddress, problem: str) -> str:
    said = "" if _literal(host) is not None else f"{host} resolves to {address}: "
    return f"the console does not connect there: {said}{problem}"


def _endpoint(host: str | None, port: int | None) -> set:
    """The (address, port) pairs of one of the console's own services; ("loopback", port) for a local one."""
    if not host or not port or host.startswith("/"):
        return set()
    try:
        addresses = resolve(host, port)
    except Unresolvable:
        return set()
    out: set = {(a, port) for a in addresses}
    if any(a.is_loopback or a.is_unspecified for a in addresses) or host == "localhost":
        out.add(("loopback", port))
    return out


@functools.cache
def _internal() -> frozenset:
    """The history store's and Redis's addresses and ports, from the console's settings (looked up once)."""
    db = settings.DATABASES["default"]
    redis_url = urlsplit(settings.REDIS_URL)
    found = _endpoint(db.get("HOST") or "localhost", int(db.get("PORT") or 5432))
    found |= _endpoint(redis_url.hostname, redis_url.port or 6379)
    return frozenset(found)
