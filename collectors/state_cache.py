"""Per process, the statement state of each server after its last snapshot, so the next one need not
read it back from the history store."""

import threading
from collections import OrderedDict
from datetime import datetime

from collectors.deltas import Entries


class StateCache:
    """The statement state each server had after its last snapshot in this process.

    Reading 5,000 state rows back from the history store costs more than computing the deltas;
    the cached copy is used only while the stored ServerState still carries the same taken_at
    (state and ServerState are written in one transaction), so a snapshot taken meanwhile by
    another worker simply means a reload."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[int, tuple[datetime, Entries]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, server_id: int, taken_at: datetime) -> Entries | None:
        with self._lock:
            item = self._items.get(server_id)
            if item is None or item[0] != taken_at:
                return None
            self._items.move_to_end(server_id)
            return item[1]

    def put(self, server_id: int, taken_at: datetime, entries: Entries) -> None:
        with self._lock:
            self._items[server_id] = (taken_at, entries)
            self._items.move_to_end(server_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def drop(self, server_id: int) -> None:
        with self._lock:
            self._items.pop(server_id, None)


state_cache = StateCache(256)
