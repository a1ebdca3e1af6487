"""What watches a soak run (bench/soak.py): a client reading the console's pages and the API for the whole run,
and a sampler measuring every 30 s the resident memory of every process, the history's size, the age of the
newest snapshots and the errors seen (collection errors, failed advisor evaluations, log lines)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime
from http.cookiejar import CookieJar
from pathlib import Path

from bench.soak_report import Error, Sample

# --------------------------------------------------------------------------
# The reading client
# --------------------------------------------------------------------------


class _AsIs(urllib.request.HTTPErrorProcessor):
    """Every response as it came: a redirect is not followed and an error status is not raised."""

    def http_response(self, request, response):
        return response

    https_response = http_response


class Client:
    """A user logged in once (session, CSRF) who reads the pages every few seconds, and a script reading the
    API with the user's token; every status outside 2xx/3xx and every exception is a failure, with its URL."""

    PAUSE_S = 5.0
    TIMEOUT_S = 60.0

    def __init__(
        self,
        *,
        base: str,
        username: str,
        password: str,
        token: str,
        servers: dict[str, int],
        t0: float,
        stop: threading.Event,
    ) -> None:
        self.base, self.username, self.password, self.token = base, username, password, token
        self.server_ids = list(servers.values())
        self.t0 = t0
        self.stop = stop
        self.lock = threading.Lock()
        self.requests = 0
        self.failures: list[Error] = []
        self.ms: list[float] = []
        self.rounds = 0
        self.browser = urllib.request.build_opener(_AsIs, urllib.request.HTTPCookieProcessor(CookieJar()))
        self.script = urllib.request.build_opener(_AsIs)
        self.logged_in = False
        self.thread = threading.Thread(target=self._loop, name="soak-client", daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001 - a failure to record, not to stop on
                self._fail("client round", f"{type(exc).__name__}: {exc}")
            self.stop.wait(self.PAUSE_S)

    def _fail(self, url: str, what: str) -> None:
        with self.lock:
            self.failures.append(Error("client", time.time() - self.t0, f"{url}: {what}"[:500]))

    def _request(self, path: str, *, api: bool = False, form: dict | None = None) -> tuple[int, bytes, str] | None:
        """(status, body, Location) of one request, timed and counted; None (a failure recorded) when it
        failed or its status is outside 2xx/3xx."""
        headers = {"Authorization": f"Bearer {self.token}"} if api else {"Referer": f"{self.base}/"}
        data = urllib.parse.urlencode(form).encode() if form else None
        started = time.perf_counter()
        try:
            request = urllib.request.Request(self.base + path, data=data, headers=headers)
            with (self.script if api else self.browser).open(request, timeout=self.TIMEOUT_S) as response:
                status, body, location = response.status, response.read(), response.headers.get("Location", "")
        except Exception as exc:  # noqa: BLE001 - refused, reset, timed out: all failures of the request
            status, body, location = 0, f"{type(exc).__name__}: {exc}".encode(), ""
        with self.lock:
            self.requests += 1
            if status:
                self.ms.append((time.perf_counter() - started) * 1000)
        if not 200 <= status < 400:
            self._fail(path, (f"HTTP {status}: " if status else "") + body[:200].decode(errors="replace"))
            return None
        return status, body, location

    def _get(self, path: str) -> bytes | None:
        got = self._request(path)
        if got is not None and urllib.parse.urlsplit(got[2]).path == "/":
            self.logged_in = False
            self._fail(path, f"redirected to the login page ({got[2]}): the session was lost")
            return None
        return got and got[1]

    def _login(self) -> None:
        page = self._request("/")
        found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page[1] if page else b"")
        if found is None:
            self._fail("/", "no login form")
            return
        form = {"username": self.username, "password": self.password, "csrfmiddlewaretoken": found[1].decode()}
        done = self._request("/", form=form)
        self.logged_in = done is not None and done[0] == 302 and "fleet" in done[2]
        if done is not None and not self.logged_in:
            self._fail("/", f"login refused (HTTP {done[0]})")

    def _json(self, path: str) -> dict:
        got = self._request(path, api=True)
        return json.loads(got[1]) if got else {}

    def _round(self) -> None:
        if not self.logged_in:
            self._login()
            if not self.logged_in:
                return
        ids = self.server_ids
        for path in (
            "/fleet/",
            *(f"/servers/{i}/" for i in ids),
            *(f"/servers/{i}/planning/" for i in ids),
            "/advisor/",
        ):
            self._get(path)
        self._json("/api/v1/servers/")
        statement = None
        for n, server_id in enumerate(ids):
            top = self._json(f"/api/v1/servers/{server_id}/statements/?since=15m&order_by=total&page_size=20")
            rows = top.get("results") or []
            if rows and n == self.rounds % len(ids):  # another server's, and another statement, each round
                statement = rows[self.rounds // len(ids) % len(rows)]["statement_id"]
        self._json("/api/v1/fleet/?since=1h")
        self._json("/api/v1/recommendations/")
        if statement is not None:
            self._get(f"/statements/{statement}/")
            self._json(f"/api/v1/statements/{statement}/series/?since=1h")
        self.rounds += 1


# --------------------------------------------------------------------------
# Processes, as /proc shows them
# --------------------------------------------------------------------------


def rss_kb(pid: int) -> int | None:
    """Resident memory of a process (VmRSS, kB); None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def child_pids(pid: int) -> list[int]:
    found: set[int] = set()
    for f in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found.update(int(x) for x in f.read_text().split())
    return sorted(found)


_ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b")


def error_lines(lines: list[str]) -> list[str]:
    """The lines of a log that report an error: ERROR and CRITICAL records, and tracebacks that no such
    record announced just before (Django logs "Internal Server Error: ..." without its level)."""
    out: list[str] = []
    previous = ""
    for line in lines:
        if _ERROR_LINE.search(line):
            out.append(line)
        elif line.startswith("Traceback") and not _ERROR_LINE.search(previous):
            out.append(f"{previous.strip()} | {line.strip()}" if previous.strip() else line)
        previous = line
    return out


class LogWatch:
    """Reads what each log gained since the last call (whole lines only) and keeps its error lines."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths
        self.offsets = dict.fromkeys(paths, 0)

    def errors(self) -> list[tuple[str, str]]:
        out = []
        for name, path in self.paths.items():
            with contextlib.suppress(OSError), open(path, "rb") as f:
                f.seek(self.offsets[name])
                data = f.read()
                complete = data[: data.rfind(b"\n") + 1]
                self.offsets[name] += len(complete)
                out += [(f"log:{name}", line) for line in error_lines(complete.decode(errors="replace").splitlines())]
        return out


# --------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------


class Sampler:
    """Every SAMPLE_EVERY_S: RSS of every process, the history's size, the newest snapshot's age per server,
    and the errors recorded since the last sample (collection errors, failed advisor evaluations, log lines)."""

    def __init__(
        self,
        *,
        t0: float,
        processes: dict[str, int],
        web_master: int,
        servers: dict[str, int],
        logs: LogWatch,
    ) -> None:
        self.t0 = t0
        self.processes = processes
        self.web_master = web_master
        self.web_workers: dict[int, str] = {}
        self.servers = servers
        self.logs = logs
        self.samples: list[Sample] = []
        self.errors: list[Error] = []
        self.newest_ages: dict[str, list[float]] = {name: [] for name in servers}
        self._collection_error_id = 0
        self._evaluations_seen: set[tuple[int, datetime]] = set()

    def sample(self) -> Sample:
        now = time.time()
        at = now - self.t0
        rss = {label: kb for label, pid in self.processes.items() if (kb := rss_kb(pid)) is not None}
        for pid, label in sorted(self._web_workers(at).items(), key=lambda item: item[1]):
            if (kb := rss_kb(pid)) is not None:
                rss[label] = kb
        database_bytes, history_bytes = history_sizes()
        self._snapshot_ages(now)
        self._new_errors(at)
        sample = Sample(at, rss, database_bytes, history_bytes)
        self.samples.append(sample)
        return sample

    def _web_workers(self, at: float) -> dict[int, str]:
        """gunicorn's workers by label; a worker replaced (it crashed or timed out) is an error."""
        pids = child_pids(self.web_master)
        gone = [pid for pid in self.web_workers if pid not in pids]
        for pid in pids:
            if pid in self.web_workers:
                continue
            if gone:
                old = gone.pop(0)
                label = self.web_workers.pop(old)
                self.errors.append(Error("process", at, f"{label} replaced by gunicorn (pid {old} -> {pid})"))
            else:
                label = f"gunicorn worker {len(self.web_workers) + 1}"
            self.web_workers[pid] = label
        for pid in gone:
            self.errors.append(Error("process", at, f"{self.web_workers.pop(pid)} (pid {pid}) is gone"))
        return self.web_workers

    def _snapshot_ages(self, now: float) -> None:
        from django.db.models import Max

        from history.models import Snapshot

        newest = dict(
            Snapshot.objects.values("server_id").annotate(newest=Max("taken_at")).values_list("server_id", "newest")
        )
        for name, server_id in self.servers.items():
            if newest.get(server_id) is not None:
                self.newest_ages[name].append(now - newest[server_id].timestamp())

    def _new_errors(self, at: float) -> None:
        from advisor.models import Evaluation
        from history.models import FailedCollection

        rows = FailedCollection.objects.filter(pk__gt=self._collection_error_id).select_related("server").order_by("pk")
        for row in rows:
            self._collection_error_id = row.pk
            self.errors.append(
                Error(
                    "collection", row.at.timestamp() - self.t0, f"{row.server.name}: {row.error_class}: {row.message}"
                )
            )
        for e in Evaluation.objects.exclude(error="").select_related("server"):
            if (e.server_id, e.at) not in self._evaluations_seen:
                self._evaluations_seen.add((e.server_id, e.at))
                self.errors.append(Error("advisor", e.at.timestamp() - self.t0, f"{e.server.name}: {e.error}"))
        self.errors += [Error(source, at, line.strip()) for source, line in self.logs.errors()]


# A partitioned table has no storage of its own: its leaves do. pg_partition_tree lists nothing for a plain
# table, which then counts itself.
_SIZES_SQL = """
SELECT pg_database_size(current_database()),
       (SELECT coalesce(sum(pg_total_relation_size(coalesce(p.relid, t.rel))), 0)
          FROM unnest(%s::regclass[]) AS t(rel)
          LEFT JOIN LATERAL pg_partition_tree(t.rel) AS p ON true
         WHERE p.relid IS NULL OR p.isleaf)
"""


def history_sizes() -> tuple[int, int]:
    """(the bench database's size, the history tables' total with their partitions, indexes and TOAST)."""
    from django.db import connection

    from history.tables import PER_SERVER

    with connection.cursor() as cur:
        cur.execute(_SIZES_SQL, [[t.name for t in PER_SERVER]])
        database_bytes, history_bytes = cur.fetchone()
    return int(database_bytes), int(history_bytes)


def snapshot_times(server_id: int) -> list[float]:
    from history.models import Snapshot

    rows = Snapshot.objects.filter(server_id=server_id).order_by("taken_at").values_list("taken_at", flat=True)
    return [t.timestamp() for t in rows]
