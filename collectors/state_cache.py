"""Per process, the statement state of each server after its last snapshot, so the next one need not
read it back from the history store."""

import threading
from collections import OrderedDict
from datetime import datetime

from django.conf import settings

from history.public import Entries


def _nbytes(entries: Entries) -> int:
    arrays = (
        entries.keys,
        entries.counters,
        entries.gauges,
        entries.stats_since_us,
        entries.minmax_stats_since_us,
        entries.statement_id,
    )
    return sum(a.nbytes for a in arrays if a is not None)


class StateCache:
    """The statement state each server had after its last snapshot in this process, up to `max_bytes` of
    arrays (the least recently used servers leave first).

    Reading 5,000 state rows back from the history store costs more than computing the deltas;
    the cached copy is used only while the stored ServerState still carries the same taken_at
    (state and ServerState are written in one transaction), so a snapshot taken meanwhile by
    another worker simply means a reload. Bounded by bytes, not servers: a worker serving 500 servers
    of 1,000 entries (about 140 MB of state) reloaded every one of them at every snapshot from a cache of
    256 servers, which cost more CPU than the rest of the snapshot."""

    def __init__(self, max_bytes: int | None = None):
        self._max_bytes = max_bytes
        self._bytes = 0
        self._items: OrderedDict[int, tuple[datetime, Entries, int]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes if self._max_bytes is not None else settings.COLLECTOR["STATE_CACHE_MB"] * 2**20

    def get(self, server_id: int, taken_at: datetime) -> Entries | None:
        with self._lock:
            item = self._items.get(server_id)
            if item is None or item[0] != taken_at:
                return None
            self._items.move_to_end(server_id)
            return item[1]

    def put(self, server_id: int, taken_at: datetime, entries: Entries) -> None:
        size = _nbytes(entries)
        with self._lock:
            self._pop(server_id)
            if size > self.max_bytes:
                return
            self._items[server_id] = (taken_at, entries, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._pop(next(iter(self._items)))

    def drop(self, server_id: int) -> None:
        with self._lock:
            self._pop(server_id)

    def _pop(self, server_id: int) -> None:
        item = self._items.pop(server_id, None)
        if item is not None:
            self._bytes -= item[2]


state_cache = StateCache()
