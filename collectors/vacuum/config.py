"""The vacuum reading's settings (collectors/config.py)."""

from collectors.config import Setting

# Each database's distance from transaction ID and multixact wraparound, every VACUUM_INTERVAL_S: the ages move
# by the transactions the server runs, so a few minutes apart is enough to follow their rate over days.
SETTINGS = (
    Setting("VACUUM_INTERVAL_S", int, 300, "seconds between two readings of each database's freeze ages"),
    Setting("VACUUM_SECONDS", float, 1.0, "the reading's time on the server"),
)
