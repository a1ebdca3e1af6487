"""The schema reading's settings (collectors/config.py)."""

from collectors.config import Setting

# Every database's tables and indexes, every SCHEMA_INTERVAL_S, within SCHEMA_SECONDS of the server's time all told
# (and the snapshot's deadline); at most SCHEMA_MAX_DATABASES databases, SCHEMA_MAX_TABLES tables (the largest)
# and SCHEMA_MAX_INDEXES of their indexes per server.
SETTINGS = (
    Setting("SCHEMA_INTERVAL_S", int, 600, "seconds between two readings of a server's tables and indexes"),
    Setting("SCHEMA_SECONDS", float, 5.0, "the reading's time on the server, all databases together"),
    Setting("SCHEMA_MAX_DATABASES", int, 20, "databases one reading takes (the monitored one first, then by name)"),
    Setting("SCHEMA_MAX_TABLES", int, 10_000, "tables one reading keeps of a server, the largest first"),
    Setting("SCHEMA_MAX_INDEXES", int, 30_000, "indexes of those tables one reading keeps"),
)
