"""The per-process state cache is bounded by the bytes of the states it holds, least recently used out first."""

from datetime import UTC, datetime

import numpy as np

from collectors.state_cache import StateCache
from history.entries import N_COUNTERS, N_GAUGES, Entries

AT = datetime(2026, 11, 26, tzinfo=UTC)


def _entries(n: int) -> Entries:
    return Entries(
        keys=np.zeros((n, 4), np.int64),
        counters=np.zeros((n, N_COUNTERS), np.int64),
        gauges=np.zeros((n, N_GAUGES)),
        stats_since_us=np.zeros(n, np.int64),
        minmax_stats_since_us=np.zeros(n, np.int64),
        statement_id=np.zeros(n, np.int64),
    )


def test_the_cache_holds_what_its_bytes_allow_least_recently_used_out_first():
    one = _entries(1000)
    size = sum(
        a.nbytes
        for a in (one.keys, one.counters, one.gauges, one.stats_since_us, one.minmax_stats_since_us, one.statement_id)
    )
    cache = StateCache(max_bytes=2 * size + size // 2)
    for server_id in (1, 2):
        cache.put(server_id, AT, _entries(1000))
    assert cache.get(1, AT) is not None  # 1 is now the most recently used
    cache.put(3, AT, _entries(1000))
    assert cache.get(2, AT) is None and cache.get(1, AT) is not None and cache.get(3, AT) is not None
    # A state larger than the whole cache is not kept, and takes nothing else out.
    cache.put(4, AT, _entries(3000))
    assert cache.get(4, AT) is None and cache.get(1, AT) is not None
    # Replacing a server's state counts its bytes once; another snapshot's time is a miss.
    cache.put(1, AT, _entries(1000))
    cache.put(1, AT, _entries(1000))
    assert cache.get(3, AT) is not None and cache.get(1, datetime(2027, 1, 1, tzinfo=UTC)) is None
