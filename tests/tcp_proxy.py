"""A TCP proxy on 127.0.0.1 for tests: it forwards to a server until told to go silent.

Silent means what a dead host or a cut network path looks like to a client: the sockets stay open
and every byte is dropped, in both directions, without a FIN or an RST. (The local kernel still
acknowledges the bytes, so only a client-side time limit can notice, which is what the tests want.)
Trickling is a server that answers, one byte every few seconds: never silent, never done.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

TRIGGER_MAX = 256  # the longest trigger recognised across two reads


@dataclass(eq=False)
class _Pair:
    client: socket.socket
    upstream: socket.socket | None  # None: accepted while silent, never connected further
    dead: bool = False  # once silent, a connection stays so (its streams have lost bytes)
    tail: bytes = b""  # the end of what the client sent, for a trigger split across reads
    trickling: bool = False  # the server's bytes reach the client one at a time
    held: bytearray = field(default_factory=bytearray)  # the server's bytes not relayed yet
    next_byte_at: float = 0.0

    def other(self, sock: socket.socket) -> socket.socket | None:
        return self.upstream if sock is self.client else self.client


class TcpProxy:
    """`with TcpProxy(port) as proxy:` forwards 127.0.0.1:proxy.port to 127.0.0.1:port.

    `go_silent()` drops everything from now on, on open and new connections; `go_silent_on(b"...")`
    does it the moment the client sends those bytes (they are dropped too), to cut a conversation at
    a chosen step; `trickle_on(b"...", every_s)` relays the server's bytes one every `every_s`
    seconds from the moment the client sends those bytes (on that connection); `forward_again()`
    relays new connections normally (the silent ones stay silent); `retarget(port)` sends new
    connections to another server."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.silenced = threading.Event()  # set when the proxy went silent
        self._trigger: bytes | None = None
        self._trickle: tuple[bytes, float] | None = None  # (trigger, seconds between bytes)
        self._silent = False
        self._cut = False
        self._lock = threading.Lock()
        self._pairs: dict[socket.socket, _Pair] = {}
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name=f"tcp-proxy-{self.port}", daemon=True)

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def go_silent(self) -> None:
        with self._lock:
            self._go_silent()

    def go_silent_on(self, trigger: bytes) -> None:
        with self._lock:
            self._trigger = trigger

    def trickle_on(self, trigger: bytes, every_s: float) -> None:
        with self._lock:
            self._trickle = (trigger, every_s)

    def retarget(self, port: int, host: str = "127.0.0.1") -> None:
        """New connections go to another server from now on (a virtual IP moved in a failover); the open ones
        are cut, as a failover cuts them."""
        with self._lock:
            self.target = (host, port)
            self._cut = True  # done by the proxy's own thread, which owns the sockets

    def forward_again(self) -> None:
        with self._lock:
            self._silent = False
            self._trigger = None
            self._trickle = None
            self.silenced.clear()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for pair in list(self._pairs.values()):
            self._drop(pair)
        self._selector.close()
        self._listener.close()

    def _go_silent(self) -> None:
        self._silent = True
        for pair in self._pairs.values():
            pair.dead = True
        self.silenced.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                cut, self._cut = self._cut, False
            if cut:
                for pair in set(self._pairs.values()):
                    self._drop(pair)
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                else:
                    self._relay(sock)
            self._release_trickles()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        with self._lock:
            silent = self._silent
        upstream = None
        if not silent:
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()  # as a real proxy would: the server refused
                return
        pair = _Pair(client, upstream, dead=silent)
        for sock in (client, upstream):
            if sock is not None:
                sock.setblocking(True)
                self._pairs[sock] = pair
                self._selector.register(sock, selectors.EVENT_READ)

    def _relay(self, sock: socket.socket) -> None:
        pair = self._pairs.get(sock)
        if pair is None:
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(pair)
            return
        with self._lock:
            if sock is pair.client:
                seen = pair.tail + data
                if not pair.dead and self._trigger is not None and self._trigger in seen:
                    self._go_silent()
                if not pair.trickling and self._trickle is not None:
                    pair.trickling = self._trickle[0] in seen
                pair.tail = seen[-TRIGGER_MAX:]
            dead = pair.dead
        if dead:
            return  # dropped: nothing is answered, nothing is closed
        if pair.trickling and sock is pair.upstream:
            pair.held += data
            return
        try:
            pair.other(sock).sendall(data)
        except OSError:
            self._drop(pair)

    def _release_trickles(self) -> None:
        now = time.monotonic()
        with self._lock:
            every_s = self._trickle[1] if self._trickle is not None else 0.0
        for pair in set(self._pairs.values()):
            if pair.trickling and pair.held and not pair.dead and now >= pair.next_byte_at:
                try:
                    pair.client.sendall(pair.held[:1])
                except OSError:
                    self._drop(pair)
                    continue
                del pair.held[:1]
                pair.next_byte_at = now + every_s

    def _drop(self, pair: _Pair) -> None:
        for sock in (pair.client, pair.upstream):
            if sock is not None and self._pairs.pop(sock, None) is not None:
                try:
                    self._selector.unregister(sock)
                except (KeyError, ValueError):
                    pass
                sock.close()
