"""Requests the console sends out (webhooks, Slack, PagerDuty): to an address the network policy allows, the
one that was checked (no second lookup a DNS answer could turn elsewhere), with no redirect followed (a redirect
could lead anywhere the policy refuses), and over by one deadline for the whole request: connecting, the TLS
handshake, sending and every read of the answer share ALERTS_TIMEOUT_S. A socket timeout alone bounds each read,
so a receiver answering a byte every few seconds would hold a worker's thread as long as it liked. The name's
lookup is inside that deadline too: getaddrinfo waits as long as the resolver does (no timeout of Python's
bounds it), so it runs in a thread of its own that the request waits for until the deadline, and no longer
(network_policy.within).

An answer is one of: delivered (2xx), refused for good (4xx but 408 and 429: the request will not do better
the next time), or worth a retry (5xx, 408, 429, a timeout, a connection that failed)."""

from __future__ import annotations

import http.client
import io
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from django.conf import settings

from inventory import network_policy

USER_AGENT = "pgconsole-alerts/1"
log = logging.getLogger(__name__)
T = TypeVar("T")


class OutboundError(Exception):
    """A URL the console will not send to, or that could not be sent to; `retry`: whether a later try may do."""

    def __init__(self, message: str, *, retry: bool):
        super().__init__(message)
        self.message, self.retry = message, retry


@dataclass(frozen=True)
class Answer:
    status: int
    body: str  # the first KB, for the delivery's record

    @property
    def delivered(self) -> bool:
        return 200 <= self.status < 300

    @property
    def retry(self) -> bool:
        return self.status >= 500 or self.status in (408, 429)


def url_problem(url: str) -> str | None:
    """What is wrong with a URL as written (None: an http or https URL with a host and nothing hidden in it)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme not in ("https", "http"):
        return "the URL must start with https:// (or http:// on a private network)"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username or parts.password:
        return "the URL must not carry a user name or password (use the signing secret)"
    if parts.scheme == "http" and not settings.ALERTS_ALLOW_PLAIN_HTTP:
        return "the URL must use https (ALERTS_ALLOW_PLAIN_HTTP allows http on a private network)"
    return network_policy.host_problem(parts.hostname)


def _target(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of a URL that passed url_problem."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname or "", port, path


def check_url(url: str, *, timeout_s: float | None = None) -> None:
    """At save time: the URL is well formed and every address its host resolves to now is allowed, the lookup
    within `timeout_s` (ALERTS_TIMEOUT_S): a name that takes longer is refused, as a receiver would be."""
    if problem := url_problem(url):
        raise OutboundError(problem, retry=False)
    _, host, port, _ = _target(url)
    timeout = timeout_s if timeout_s is not None else settings.ALERTS_TIMEOUT_S
    try:
        network_policy.within(host, lambda: network_policy.check(host, port), time.monotonic() + timeout)
    except network_policy.Late as exc:
        raise OutboundError(exc.words(host, timeout), retry=False) from exc
    except network_policy.Refused as exc:
        raise OutboundError(exc.message, retry=False) from exc
    except network_policy.Unresolvable as exc:
        raise OutboundError(f"the host {host} does not resolve: {exc}", retry=False) from exc


class _Deadline:
    """A connected socket whose every wait ends by one moment (time.monotonic()): before each send and each
    read its timeout is set to what is left, and nothing is waited for once it has passed. Only what
    http.client uses of a socket."""

    def __init__(self, sock: socket.socket, deadline: float):
        self._sock, self._deadline = sock, deadline
        self._files, self._closed = 0, False  # as a socket: closed once it and every file made of it are

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(left)

    def sendall(self, data: bytes) -> None:
        self._arm()
        self._sock.sendall(data)  # a timeout bounds the whole of sendall (Python 3.5 on)

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        self._arm()
        return self._sock.recv_into(buffer, nbytes)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        assert mode == "rb", mode  # http.client reads its answer so, and writes with sendall
        self._files += 1
        return io.BufferedReader(socket.SocketIO(self, "rb"))  # type: ignore[arg-type]

    def _decref_socketios(self) -> None:  # socket.SocketIO's close
        self._files -= 1
        if self._closed and self._files <= 0:
            self._sock.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._closed = True
        if self._files <= 0:
            self._sock.close()


def _connected(address: str, port: int, deadline: float) -> socket.socket:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request's deadline passed")
    return socket.create_connection((address, port), left)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the address the policy checked, the certificate verified for the URL's host name, the whole
    request over by `deadline`."""

    def __init__(self, address: str, host: str, port: int, deadline: float, context: ssl.SSLContext):
        super().__init__(host, port, context=context)
        self._address, self._deadline = address, deadline

    def connect(self) -> None:
        sock = _connected(self._address, self.port, self._deadline)
        sock.settimeout(max(self._deadline - time.monotonic(), 0.001))  # the handshake, as a whole (CPython)
        self.sock = _Deadline(self._context.wrap_socket(sock, server_hostname=self.host), self._deadline)


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, address: str, host: str, port: int, deadline: float):
        super().__init__(host, port)
        self._address, self._deadline = address, deadline

    def connect(self) -> None:
        self.sock = _Deadline(_connected(self._address, self.port, self._deadline), self._deadline)


def post(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float | None = None) -> Answer:
    """POST `body` to `url` (checked again now against the policy) within `timeout_s` (ALERTS_TIMEOUT_S) from
    now, the name's lookup included; an Answer, or OutboundError."""
    timeout = timeout_s if timeout_s is not None else settings.ALERTS_TIMEOUT_S
    deadline = time.monotonic() + timeout
    if problem := url_problem(url):
        raise OutboundError(problem, retry=False)
    scheme, host, port, path = _target(url)
    try:
        address = network_policy.within(host, lambda: network_policy.dial_address(host, port), deadline)
    except network_policy.Late as exc:
        raise OutboundError(exc.words(host, timeout), retry=True) from exc
    except network_policy.Refused as exc:
        raise OutboundError(exc.message, retry=False) from exc
    except network_policy.Unresolvable as exc:
        raise OutboundError(f"the host {host} does not resolve: {exc}", retry=True) from exc
    if scheme == "https":
        conn: http.client.HTTPConnection = _PinnedHTTPS(address, host, port, deadline, ssl.create_default_context())
    else:
        conn = _PinnedHTTP(address, host, port, deadline)
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
        )
        response = conn.getresponse()
        text = response.read(1024).decode("utf-8", "replace")
        return Answer(response.status, text)
    except TimeoutError as exc:
        raise OutboundError(f"no answer from {host} within {timeout:g} s", retry=True) from exc
    except ssl.SSLCertVerificationError as exc:  # the receiver's own certificate: its owner must know why
        raise OutboundError(
            f"could not send to {host}: its certificate does not verify ({exc.verify_message})", retry=True
        ) from exc
    except (OSError, http.client.HTTPException) as exc:
        # The OS's words (refused, no route, reset...) would let a tenant map the console's network through a
        # receiver it names: the record says the connection failed; the log has the words.
        log.warning("alerts: could not send to %s (%s:%s): %s", host, address, port, exc)
        raise OutboundError(f"could not send to {host}: the connection failed", retry=True) from exc
    finally:
        conn.close()
