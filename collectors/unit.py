"""A reading: one thing the console reads from monitored servers, declared in one place.

Each reading is a folder of collectors/ whose `reading.py` holds one `Reading`: what it reads, its SQL per server
version, its cadence, its budget on the monitored server, the history tables it writes and their delta rules,
what its failure does, and its steps. The collection (collectors/services.py) runs every registered reading in
each snapshot, in the order their `after` gives:

- `read` asks the monitored server, on the snapshot's connection and within its deadline (and, with a time
  budget, in a read-only transaction under that statement_timeout);
- `settle`, once the monitored connection is given back, asks the history store what it knows of what was read
  (the statements reading: the keys the previous state did not hold);
- `compute` turns what was read into rows, facts of the snapshot and fields of the server's state, without I/O;
- `persist` writes its rows inside the snapshot's one transaction of the history store (the partitions of its
  tables are created before it, outside), so that everything of a snapshot is stored or nothing is.

The history store is never asked while the monitored connection is open: what a reading compares with is read
before it opens (Previous: the server's state, the statements', and each reading's own, `previous`, when the
reading may be due), and what depends on what was read is asked in `settle`, after.

A reading that fails with `Failure.SNAPSHOT` fails the snapshot (the server's status says why); one with
`Failure.OWN` leaves a note and its own status on the server's state, and the others are stored. docs/
architecture.md ("Adding a reading") walks through a new one.
"""

from __future__ import annotations

import graphlib
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import Any, Generic, TypeVar

import numpy as np
import psycopg
from django.conf import settings

from collectors.connection import MonitoredConnection, read_only
from collectors.errors import CollectionError, from_query_error
from collectors.scheduling import next_due
from collectors.settings.instance import ServerMeta, timestamp
from history.public import Block, Entries, HistoryTable, ServerState, SnapshotWriter
from inventory.models import Server

EVERY_SNAPSHOT = None
# A reading's own previous state is loaded when it is due this far ahead of the server's time as the console
# reckons it (may_be_due): a reading due by the server's clock but not loaded waits for the next snapshot.
LOAD_AHEAD = timedelta(minutes=2)


class Failure(StrEnum):
    SNAPSHOT = "fails the snapshot"  # nothing of the snapshot is stored; the server's status says why
    OWN = "its own status"  # a note and the reading's status say why; the snapshot and the others are stored


@dataclass(frozen=True)
class Sql:
    """A reading's SQL per server version: (the first server_version_num it applies to, its SQL), in order.

    The SQL is a text, or a function that composes it from what the server has (the extension's schema and
    columns, which no version number tells)."""

    versions: tuple[tuple[int, Any], ...]

    def at(self, server_version_num: int) -> Any:
        found = [sql for since, sql in self.versions if since <= server_version_num]
        if not found:
            raise LookupError(f"no SQL for server_version_num {server_version_num}")
        return found[-1]


@dataclass(frozen=True)
class Budget:
    """What one reading may cost a monitored server per snapshot, each a COLLECTOR setting (None: no bound of its
    own). `seconds` is enforced by the collection (statement_timeout, in the reading's own read-only transaction);
    `rows` and `bytes` by the reading, which stops asking once they are spent and says what it put off."""

    seconds: str | None = None
    rows: str | None = None
    bytes: str | None = None

    def value(self, which: str) -> float | None:
        name = getattr(self, which)
        return None if name is None else settings.COLLECTOR[name]


R = TypeVar("R")  # what a reading's read returns
C = TypeVar("C")  # what its compute returns, which its persist and committed take


@dataclass(frozen=True)
class Reading(Generic[R, C]):
    name: str  # the folder's name
    what: str  # what it reads, in a DBA's words
    sql: Sql
    tables: tuple[HistoryTable, ...]  # what it writes in the history store (its partitions are made before)
    delta_rules: str  # how what is read becomes history (DESIGN.md's rules, for this reading)
    failure: Failure
    read: Callable[[Collection], R]
    compute: Callable[[Collection, R], C]
    persist: Callable[[Collection, C, SnapshotWriter], None] | None = None  # hands its rows to the writer
    committed: Callable[[Collection, C], None] | None = None  # after the snapshot's transaction commits
    after: tuple[str, ...] = ()  # readings whose read and compute come first (this one uses what they found)
    cadence: str | None = EVERY_SNAPSHOT  # the COLLECTOR setting of the seconds between two of its reads
    budget: Budget = Budget()
    # its own previous state (server id -> what it compares with), read before the monitored connection opens
    previous: Callable[[int], Any] | None = None
    settle: Callable[[Collection, R], None] | None = None  # after the read, with the monitored connection given back

    def due(self, previous: ServerState | None, taken_at_us: int) -> bool:
        """Whether this snapshot reads it: at every one; or, with a cadence, at the server's first snapshot and then
        once per cadence on the server's own phase of it (scheduling.next_due, as its collections are due): from the
        phase's first time at least half a cadence after the last read. Servers registered together, or all of
        them after an outage, read it once together and then spread over the cadence: no wave every cadence."""
        if self.cadence is None or previous is None:
            return True
        last_us = (previous.readings or {}).get(self.name, {}).get("at_us")
        every_s = settings.COLLECTOR[self.cadence]
        if last_us is None or every_s <= 0:
            return True
        last, every = timestamp(last_us), timedelta(seconds=every_s)
        following = next_due(previous.server_id, every_s, last)
        if following - last < every / 2:
            following += every
        return timestamp(taken_at_us) >= following

    def may_be_due(self, previous: ServerState | None, last_success_at: datetime | None, now: datetime) -> bool:
        """Whether the snapshot about to open may read it, asked before the monitored connection opens: due at the
        server's time reckoned as the last snapshot's plus what the console's clock counted since (the two
        clocks' skew cancels), LOAD_AHEAD to spare."""
        if previous is None or self.cadence is None:
            return True
        since = max(now - last_success_at, timedelta(0)) if last_success_at is not None else timedelta(0)
        reckoned = previous.taken_at + since + LOAD_AHEAD
        return self.due(previous, round(reckoned.timestamp() * 1_000_000))


@dataclass
class Previous:
    """What the previous snapshot left, read before the monitored connection opens: the server's state (None before
    the first), the statements' (and the text status of those without a stored text), and the own previous state of
    each reading that declares one and may be due (`readings`, by name: one not loaded is not read)."""

    state: ServerState | None
    entries: Entries
    texts_missing: dict[int, str] = field(default_factory=dict)  # history.store.texts_missing
    readings: dict[str, Any] = field(default_factory=dict)

    def of(self, reading: Reading) -> Any:
        """What `reading` compares with (its `previous`, loaded for this snapshot)."""
        return self.readings[reading.name]


@dataclass
class Collection:
    """One collection of one server, as its readings see it.

    The settings and statements readings, which every other one comes after, set the snapshot's frame: the
    server's meta (settings.instance.ServerMeta), whether it is a baseline, its time and interval. Each reading
    adds facts of the snapshot's row (history.snapshot_facts.SnapshotFacts) and fields of the server's state. A
    fact or a field of a reading not read in this snapshot (failed, or not due) is None: a reading with a cadence
    keeps what it compares with in a table of its own, not in the server's state."""

    server: Server
    previous: Previous
    conn: MonitoredConnection | None = None
    meta: ServerMeta | None = None
    baseline: bool = True
    taken_at: datetime | None = None
    interval_s: float | None = None
    notes: list[str] = field(default_factory=list)
    # reading -> what its read returned, and what its compute did: another reading asks found() and made()
    got: dict[str, Any] = field(default_factory=dict)
    computed: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    status: dict[str, dict] = field(default_factory=dict)  # reading -> its status, kept on the server's state
    block: Block | None = None  # the interval's statement deltas, set by the statements reading
    totals: np.ndarray | None = None  # their sums (history.columns.TOTAL_NAMES; None for a baseline), set with them

    def found(self, reading: Reading[R, Any]) -> R:
        """What `reading` read in this snapshot: one that the asking reading comes after (its `after`)."""
        return self.got[reading.name]

    def made(self, reading: Reading[Any, C]) -> C | None:
        """What `reading` computed in this snapshot (None: it was not read in it, failed or not due)."""
        return self.computed.get(reading.name)

    def read(self, reading: Reading) -> None:
        """Run one reading's read within its budget; its own failure is noted, a snapshot's failure raised."""
        taken_at_us = self.meta.taken_at_us if self.meta is not None else None
        # due by the server's clock; one whose own previous state was not loaded (not thought due when the
        # connection opened) waits for the next snapshot rather than ask the history store meanwhile
        unloaded = reading.previous is not None and reading.name not in self.previous.readings
        if unloaded or taken_at_us is not None and not reading.due(self.previous.state, taken_at_us):
            if self.previous.state is not None and reading.name in (self.previous.state.readings or {}):
                self.status[reading.name] = self.previous.state.readings[reading.name]
            return
        try:
            self.got[reading.name] = _within_budget(self, reading)
        except CollectionError as exc:
            if reading.failure is Failure.SNAPSHOT:
                raise
            self.notes.append(f"{reading.what} not read in this snapshot: {exc.message}")
            self.status[reading.name] = {"at_us": taken_at_us, "ok": False, "code": exc.code, "error": exc.message}
            return
        # what the read itself said of its limits (for the pages) kept with it
        self.status[reading.name] = self.status.get(reading.name, {}) | {"at_us": self.meta.taken_at_us, "ok": True}


def _within_budget(snap: Collection, reading: Reading) -> Any:
    seconds = reading.budget.value("seconds")
    if seconds is None:
        return reading.read(snap)
    try:
        with read_only(snap.conn, seconds):
            return reading.read(snap)
    except psycopg.Error as exc:
        raise from_query_error(exc, f"reading {reading.what}") from exc


@cache
def registered() -> tuple[Reading, ...]:
    """Every reading of collectors/ (a folder with a reading.py declaring READING), those it comes after first."""
    import collectors

    found: dict[str, Reading] = {}
    for module in sorted(pkgutil.iter_modules(collectors.__path__), key=lambda m: m.name):
        if module.ispkg and importlib.util.find_spec(f"collectors.{module.name}.reading") is not None:
            reading = importlib.import_module(f"collectors.{module.name}.reading").READING
            if reading.name != module.name:
                raise ValueError(f"collectors/{module.name}/reading.py declares a reading named {reading.name!r}")
            found[reading.name] = reading
    return ordered(found)


def ordered(found: dict[str, Reading]) -> tuple[Reading, ...]:
    """The readings, each after those it names in `after` (graphlib.CycleError for a circle)."""
    missing = {a for r in found.values() for a in r.after} - found.keys()
    if missing:
        raise ValueError(f"readings come after readings that do not exist: {sorted(missing)}")
    order = graphlib.TopologicalSorter({name: found[name].after for name in sorted(found)})
    return tuple(found[name] for name in order.static_order())
