"""The waits reading's settings (collectors/config.py)."""

from collectors.config import Setting

ACTIVITY_SAMPLES_DEFAULT = 10  # looks at pg_stat_activity per interval (the fleet benchmark judges by it)

SETTINGS = (
    # Sampled pg_stat_activity when pg_wait_sampling is absent: N samples over about SPAN seconds.
    Setting("ACTIVITY_SAMPLES", int, ACTIVITY_SAMPLES_DEFAULT, "looks at pg_stat_activity per interval"),
    Setting("ACTIVITY_SPAN_S", float, 1.0, "seconds a snapshot spreads its own looks over, while no sampler runs"),
    # pg_wait_sampling's profile keeps a row per backend, event and query id since the server's start: one larger
    # than this is not read (a part would make wrong deltas), and pg_stat_activity is sampled instead, said on the
    # server's page.
    Setting("WAIT_PROFILE_MAX_ROWS", int, 100_000, "rows of pg_wait_sampling's profile read at most"),
    # How often the wait sampler (manage.py sample_waits) reads the servers to sample again (added, changed).
    Setting("SAMPLER_REFRESH_S", float, 15.0, "seconds between two looks of the sampler at the servers to sample"),
)
