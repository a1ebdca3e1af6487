"""The texts reading's settings (collectors/config.py)."""

from collectors.config import Setting

SETTINGS = (
    Setting(
        "QUERY_TEXT_MAX_BYTES",
        int,
        64 * 1024,
        "a query text is cut on the monitored server past this many bytes, before it is sent",
    ),
    # Query texts one snapshot reads at most (new statements first), and about how much text: the rest is read by
    # the next snapshots (status "pending" meanwhile), so a server inventing statements never fills memory.
    Setting("TEXTS_PER_SNAPSHOT", int, 2000, "query texts one snapshot reads at most"),
    Setting("TEXT_BYTES_PER_SNAPSHOT", int, 16 * 2**20, "about how much text one snapshot reads"),
)
