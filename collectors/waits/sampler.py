"""Wait events of servers without pg_wait_sampling, sampled apart from their snapshots.

Sampling pg_stat_activity inside a snapshot held a worker thread for the whole span of the samples (ten
looks over a second: a thread-second per server per interval, which capped eight threads at about 460
servers a minute whatever the CPU). Here one process (`manage.py sample_waits`, compose's `sampler`)
serves every server from one asyncio loop: ACTIVITY_SAMPLES looks per interval, spread evenly over the
interval at the server's own phase, each over a connection kept for the purpose. The counts accumulate in
Redis, a hash per server; the snapshot takes and clears them in one transaction (`take`), so its samples
cover exactly the time since the previous snapshot, and span the interval instead of its first second.

The sampler says it is alive with a key that expires (`running`); while it is not, a snapshot samples
inline as before, so a console without it (or `manage.py collect` by hand) still sees wait events. A
second sampler on the same servers is harmless: both counts and sample numbers add up, their ratio (what
is stored) stays the same.

Sized for a fleet: the looks of every server are written to Redis together, one transaction carrying all the
looks taken while the previous one was on its way (a thousand servers looking ten times a minute make about 170
looks a second; written one transaction each, they held a hundred connections and were refused past the pool's
limit). At most REDIS_CONNECTIONS connections, waited for rather than refused. Its stop is bounded: SIGTERM ends it
within STOP_S even while the history store or Redis hangs under it (the servers' list is read in a thread of its
own that nothing waits for at exit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psycopg
import redis
import redis.asyncio
from django.conf import settings
from django.db import close_old_connections, connections

from collectors.connection import MarkedAsyncCursor, monitoring_target, sampler_application_name
from collectors.scheduling import phase_s
from collectors.waits import waits
from history.public import ServerState
from inventory.models import Server

log = logging.getLogger(__name__)

HEARTBEAT_S = 10.0  # how often the sampler says it is alive
HEARTBEAT_TTL_S = 3 * HEARTBEAT_S  # a sampler silent this long is taken for gone: snapshots sample inline
REFRESH_TIMEOUT_S = 60.0  # a read of the servers not back by then is left to itself; the sampler goes on
REDIS_CONNECTIONS = 4  # the writes (one at a time), the heartbeat, and room
MAX_PENDING_LOOKS = 100_000  # looks kept while Redis does not answer; the oldest are dropped beyond (and counted)
STOP_S = 5.0  # from SIGTERM to exit, whatever hangs
CLIENT_NAME = "pgconsole-sampler"  # its connections in Redis's CLIENT LIST
_FIELD_SEP = "\t"


def _key(server_id: int) -> str:
    return f"pgconsole:waits:{server_id}"


ALIVE_KEY = "pgconsole:waits:sampler"


# --- the snapshot's side ----------------------------------------------------------------------------

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
    return _client


def running() -> bool:
    """Whether a sampler said it was alive within HEARTBEAT_TTL_S (False too when Redis does not answer)."""
    try:
        return bool(_redis().exists(ALIVE_KEY))
    except redis.RedisError:
        return False


def take(server_id: int) -> tuple[bool, waits.WaitReading | None]:
    """In one round trip: whether a sampler is alive, and the server's samples taken since the last call, cleared
    (None when there are none: the sampler has not reached the server yet, or cannot connect to it)."""
    key = _key(server_id)
    with _redis().pipeline(transaction=True) as pipe:
        alive, counted, _ = pipe.exists(ALIVE_KEY).hgetall(key).delete(key).execute()
    n = int(counted.pop(b"n", 0))
    if n <= 0:
        return bool(alive), None
    counts: dict[waits.EventKey, int] = {}
    for name, value in counted.items():
        event_type, event, query_id = name.decode().split(_FIELD_SEP)
        counts[(event_type or None, event or None, int(query_id) if query_id else None)] = int(value)
    return bool(alive), waits.WaitReading(source="pg_stat_activity", counts=counts, n_samples=n)


def _field(event_type: str | None, event: str | None, query_id: int | None) -> str:
    return _FIELD_SEP.join((event_type or "", event or "", "" if query_id is None else str(query_id)))


# --- the sampler's side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One server to sample: where, how often."""

    server_id: int
    conninfo: str = field(repr=False)  # holds the password
    interval_s: int

    @property
    def period_s(self) -> float:
        return self.interval_s / max(settings.COLLECTOR["ACTIVITY_SAMPLES"], 1)


def jobs() -> list[Job]:
    """Enabled servers whose wait events come from pg_stat_activity (pg_wait_sampling servers keep a profile
    in their state and need no samples); a server whose password cannot be decrypted is left out (its
    snapshots say why)."""
    close_old_connections()
    profiled = set(ServerState.objects.filter(wait_profile__isnull=False).values_list("server_id", flat=True))
    out = []
    for server in Server.objects.filter(enabled=True).exclude(pk__in=profiled).order_by("pk"):
        try:
            target = monitoring_target(server)
            conninfo = target.dial_conninfo(application_name=sampler_application_name())
        except Exception as exc:  # noqa: BLE001 - one server's settings never stop the others' sampling
            log.warning("wait sampling: %s left out: %s", server, exc)
            continue
        out.append(Job(server.pk, conninfo, server.interval_s))
    close_old_connections()
    return out


class Sampler:
    """Every job sampled from one event loop: a task per server, each sleeping until its next look; the looks
    written to Redis in batches (`_write`)."""

    def __init__(self, redis_url: str):
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=REDIS_CONNECTIONS,
            timeout=5,
            socket_timeout=5,
            socket_connect_timeout=5,
            client_name=CLIENT_NAME,
        )
        self.redis = redis.asyncio.Redis(connection_pool=pool)
        self.tasks: dict[int, tuple[Job, asyncio.Task]] = {}
        self.samples = 0  # looks written since start, for the log
        self.writes = 0  # Redis transactions that wrote them
        self.dropped = 0  # looks dropped while Redis did not answer
        self.failing: set[int] = set()
        self._pending: list[tuple[Job, list[tuple]]] = []
        self._writing = False
        self._redis_down = False

    async def run(self, stop: asyncio.Event, *, jobs_source=jobs) -> None:
        identity = f"{socket.gethostname()}:{os.getpid()}"
        refreshing: asyncio.Future | None = None
        next_refresh = 0.0
        try:
            while not stop.is_set():
                if refreshing is None and time.monotonic() >= next_refresh:
                    refreshing = _in_thread(jobs_source)
                    refresh_by = time.monotonic() + REFRESH_TIMEOUT_S
                if refreshing is not None and refreshing.done():
                    try:
                        self.apply(refreshing.result())
                    except Exception as exc:  # noqa: BLE001 - the history store may be away: sample what is known
                        log.warning("wait sampling: the servers could not be read (%s); sampling those known", exc)
                    refreshing, next_refresh = None, time.monotonic() + settings.COLLECTOR["SAMPLER_REFRESH_S"]
                elif refreshing is not None and time.monotonic() >= refresh_by:
                    log.warning("wait sampling: the servers' read has not answered in %.0f s", REFRESH_TIMEOUT_S)
                    next_refresh = time.monotonic() + settings.COLLECTOR["SAMPLER_REFRESH_S"]
                    refreshing = None  # its thread is left to itself
                try:
                    await self.redis.set(ALIVE_KEY, f"{identity} {len(self.tasks)} servers", ex=int(HEARTBEAT_TTL_S))
                except redis.RedisError as exc:
                    log.warning("wait sampling: Redis does not answer (%s)", exc)
                waits_for = [asyncio.ensure_future(stop.wait())] + ([refreshing] if refreshing is not None else [])
                # Awake for the next heartbeat, the read's answer, or the next read when it comes first.
                until_refresh = HEARTBEAT_S if refreshing is not None else next_refresh - time.monotonic()
                timeout = max(min(HEARTBEAT_S, until_refresh), 0.0)
                await asyncio.wait(waits_for, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                waits_for[0].cancel()
        finally:
            await self.close(STOP_S)

    async def close(self, within_s: float) -> None:
        """Stop every server's task, write what they looked at, say the sampler is gone, close the servers'
        connections: within `within_s`, Redis first (a thousand connections to close can take the rest)."""
        deadline = time.monotonic() + within_s
        tasks = [task for _, task in self.tasks.values()]
        for task in tasks:
            task.cancel()
        self.tasks = {}
        if tasks:  # a write under way puts its looks back as its task is cancelled
            await asyncio.wait(tasks, timeout=min(1.0, within_s / 4))
        try:
            await asyncio.wait_for(self._write(), max(deadline - time.monotonic(), 0.1))
            await asyncio.wait_for(self.redis.delete(ALIVE_KEY), max(deadline - time.monotonic(), 0.1))
        except (TimeoutError, redis.RedisError) as exc:
            log.warning("wait sampling: Redis kept neither its last looks nor its goodbye (%s)", str(exc) or "late")
        left = [task for task in tasks if not task.done()]
        if left:
            _, late = await asyncio.wait(left, timeout=max(deadline - time.monotonic(), 0.1))
            if late:
                log.warning("wait sampling: %d servers' connections left to close at exit", len(late))
        try:
            await asyncio.wait_for(self.redis.aclose(), 1.0)
        except (TimeoutError, redis.RedisError):
            pass

    def apply(self, wanted: Iterable[Job]) -> None:
        """Start, restart (settings changed) and stop per-server tasks to match `wanted`."""
        wanted = {job.server_id: job for job in wanted}
        for server_id, (job, task) in list(self.tasks.items()):
            if wanted.get(server_id) != job:
                task.cancel()
                del self.tasks[server_id]
        for server_id, job in wanted.items():
            if server_id not in self.tasks:
                self.tasks[server_id] = (job, asyncio.create_task(self._sample(job), name=f"waits-{server_id}"))

    async def _sample(self, job: Job) -> None:
        period = job.period_s
        phase = phase_s(job.server_id, period)  # servers spread over the period, not all at its start
        conn: psycopg.AsyncConnection | None = None
        query: str | None = None
        try:
            while True:
                now = time.time()
                await asyncio.sleep(period - (now - phase) % period)
                try:
                    if conn is None:
                        conn = await asyncio.wait_for(
                            psycopg.AsyncConnection.connect(
                                job.conninfo, autocommit=True, prepare_threshold=None, cursor_factory=MarkedAsyncCursor
                            ),
                            settings.COLLECTOR["CONNECT_TIMEOUT_S"] + 1,
                        )
                        query = waits.activity_query(conn.info.server_version)
                    rows = await asyncio.wait_for(_look(conn, query), period)
                    if job.server_id in self.failing:
                        self.failing.discard(job.server_id)
                        log.warning("wait sampling of server %s works again", job.server_id)
                except (psycopg.Error, OSError, TimeoutError) as exc:
                    if job.server_id not in self.failing:
                        self.failing.add(job.server_id)
                        log.warning("wait sampling of server %s fails (retried every look): %s", job.server_id, exc)
                    if conn is not None:
                        await conn.close()
                    conn = None
                    continue
                await self.record(job, rows)
        finally:
            if conn is not None:
                await conn.close()

    async def record(self, job: Job, rows: list[tuple]) -> None:
        """Queue a look for the next write; the first task to find no write under way writes them all."""
        self._pending.append((job, rows))
        if len(self._pending) > MAX_PENDING_LOOKS:
            over = len(self._pending) - MAX_PENDING_LOOKS
            del self._pending[:over]
            self.dropped += over
        await self._write()  # at once unless a write is under way (it takes this one along)

    async def _write(self) -> None:
        """Every queued look in one MULTI, again while more came meanwhile: a snapshot's take() (read and delete,
        itself one transaction) sees a look whole or not at all, never its sample counted without its events."""
        if self._writing:
            return
        self._writing = True
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await self._transaction(batch)
                except BaseException as exc:
                    self._pending[:0] = batch  # kept for the next write (cancelled, or Redis away)
                    if not isinstance(exc, redis.RedisError):
                        raise
                    if not self._redis_down:
                        self._redis_down = True
                        log.warning("wait sampling: Redis does not answer (%s); looks kept for later", exc)
                    return
                if self._redis_down:
                    self._redis_down = False
                    log.warning("wait sampling: Redis answers again (%s looks dropped meanwhile)", self.dropped)
                self.samples += len(batch)
                self.writes += 1
        finally:
            self._writing = False

    async def _transaction(self, batch: list[tuple[Job, list[tuple]]]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            expiring: dict[str, int] = {}
            for job, rows in batch:
                key = _key(job.server_id)
                pipe.hincrby(key, "n", 1)
                for event_type, event, query_id, n in rows:
                    pipe.hincrby(key, _field(event_type, event, query_id), int(n))
                # Samples never taken by a snapshot (a server disabled, a collection failing) do not pile up.
                expiring[key] = max(3 * job.interval_s, 60)
            for key, seconds in expiring.items():
                pipe.expire(key, seconds)
            await pipe.execute()


def _in_thread(fn) -> asyncio.Future:
    """fn() in a daemon thread of its own, as a future of this loop: a call that hangs (the history store gone
    under an open connection) holds neither the loop nor the process's exit, unlike asyncio.to_thread's pool."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, exc) -> None:
        if not future.done():
            future.set_exception(exc) if exc is not None else future.set_result(result)

    def call() -> None:
        try:
            result, exc = fn(), None
        except BaseException as e:  # noqa: BLE001 - handed to the loop
            result, exc = None, e
        finally:
            connections.close_all()  # this thread's own: nothing else would close them
        try:
            loop.call_soon_threadsafe(settle, result, exc)
        except RuntimeError:
            pass  # the loop is closed: the sampler stopped meanwhile

    threading.Thread(target=call, name="wait-sampling-servers", daemon=True).start()
    return future


async def _look(conn: psycopg.AsyncConnection, query: str) -> list[tuple]:
    cur = await conn.execute(query)
    return await cur.fetchall()


def serve() -> None:
    """Run the sampler until SIGTERM or SIGINT."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await Sampler(settings.REDIS_URL).run(stop)

    asyncio.run(main())
