"""The plans' settings (collectors/config.py): settings.PLANS, each from PLANS_<key>."""

from collectors.config import Setting

SETTINGS = tuple(
    Setting(key, kind, default, meaning, group="PLANS")
    for key, kind, default, meaning in (
        # Plans of each server's top statements, read by beat and the `plans` queue's worker (off: on demand only).
        ("ENABLED", bool, True, "automatic plan rounds of each server's top statements"),
        # The top statements by total time over the last interval, each planned at most once per interval.
        ("TOP_N", int, 20, "top statements by total time planned per server and round"),
        ("INTERVAL_S", int, 6 * 3600, "seconds between two plans of one statement"),
        ("TICK_S", int, 900, "how often beat looks for top statements without a recent plan"),
        # Each EXPLAIN on a monitored server runs in its own read-only transaction, given up past these (planning DML
        # takes a row-exclusive lock on its target: a table held under an exclusive lock is left at once).
        ("STATEMENT_TIMEOUT_MS", int, 2_000, "an EXPLAIN's statement_timeout on the monitored server"),
        ("LOCK_TIMEOUT_MS", int, 100, "an EXPLAIN's lock_timeout on the monitored server"),
        # Each server's budget, whoever asks (beat, the regression alert, a DBA): EXPLAINs and seconds of planning on
        # the server per UTC hour (an EXPLAIN's timeout is cut to what is left of the hour), bytes of new plan shapes
        # stored per UTC day.
        ("EXPLAINS_PER_HOUR", int, 60, "EXPLAINs per server and UTC hour"),
        ("PLANNING_S_PER_HOUR", float, 1.0, "seconds of planning on a server per UTC hour"),
        ("BYTES_PER_DAY", int, 1_000_000, "bytes of new plan shapes stored per server and UTC day"),
        # What one plan may bring from a monitored server, read before anything is parsed or sent: a statement's
        # text longer than this is not sent to EXPLAIN, a plan (EXPLAIN's JSON) larger than this is not stored;
        # each gets the reason "too_large". A generic plan over a table of 1,000 partitions is about 0.45 MB.
        ("MAX_TEXT_BYTES", int, 2**20, "the longest statement text sent to EXPLAIN"),
        ("MAX_PLAN_BYTES", int, 2 * 2**20, "the largest plan stored"),
        # The automatic rounds' pace in each plans worker, all its threads together (0: unpaced): EXPLAINs a second.
        # Enough for 2,000 servers' top 20 every 6 hours, and the CPU they take stays the collections' (a round burst
        # of 1,000 servers took the 2-core fleet benchmark's idle time from 30% to 1% and tripled its lag).
        ("WORKER_EXPLAINS_PER_S", float, 2.0, "EXPLAINs a second of the automatic rounds, per plans worker"),
    )
)
