"""The history store's tables, named once: every other module (writers, rollups, selectors,
partition maintenance, deletes) derives names, partitioning and retention from here."""

from dataclasses import dataclass


@dataclass(frozen=True)
class HistoryTable:
    name: str
    span: str | None = None  # partition span (day, month, year); None: not partitioned
    retention: str | None = None  # the settings.HISTORY key that bounds its age


class TABLES:
    """Every table of the history store by name: `TABLES.SNAPSHOT.name` (history.public hands it on)."""

    # Raw: one row per snapshot (statement deltas encoded in one block, server totals as columns).
    SNAPSHOT = HistoryTable("collectors_snapshot", "day", "RAW_RETENTION_DAYS")
    WAIT_EVENT = HistoryTable("collectors_wait_event", "day", "RAW_RETENTION_DAYS")
    # Server totals per UTC hour and day (bucket = its start). The hourly tables share one partition span,
    # so that retention drops the same hours from each: a read plans on what the server buckets hold.
    SERVER_HOURLY = HistoryTable("collectors_server_hourly", "day", "HOURLY_RETENTION_DAYS")
    SERVER_DAILY = HistoryTable("collectors_server_daily", "year", "DAILY_RETENTION_DAYS")
    # Statement-major tier: cumulative sums per statement at hour boundaries since the start of the UTC
    # day, and at day boundaries since the start of the UTC month (see history/tiers.py).
    STATEMENT_HOURLY = HistoryTable("collectors_statement_hourly", "day", "HOURLY_RETENTION_DAYS")
    STATEMENT_DAILY = HistoryTable("collectors_statement_daily", "year", "DAILY_RETENTION_DAYS")
    WAIT_EVENT_HOURLY = HistoryTable("collectors_wait_event_hourly", "day", "HOURLY_RETENTION_DAYS")
    WAIT_EVENT_DAILY = HistoryTable("collectors_wait_event_daily", "year", "DAILY_RETENTION_DAYS")
    # Not partitioned, kept while the server exists.
    STATEMENT = HistoryTable("collectors_statement")
    STATEMENT_STATE = HistoryTable("collectors_statement_state")
    SERVER_STATE = HistoryTable("collectors_serverstate")
    # Plans (collectors/plans/): each shape once per server, the statements' plans by shape, each statement's last try.
    PLAN_SHAPE = HistoryTable("collectors_plan_shape")
    STATEMENT_PLAN = HistoryTable("collectors_statement_plan")
    PLAN_ATTEMPT = HistoryTable("collectors_plan_attempt")
    PLAN_CHANGE = HistoryTable("collectors_plan_change")  # a statement's plan changing shape, when
    PLAN_SPEND = HistoryTable("collectors_plan_spend")  # each hour's EXPLAINs, planning time, bytes: the budget
    # The schema reading (collectors/schema/): each table and index as last read, and the deltas of each reading of a
    # database (one row: the changed relations' ids and counters as arrays).
    SCHEMA_TABLE = HistoryTable("collectors_schema_table")
    SCHEMA_INDEX = HistoryTable("collectors_schema_index")
    SCHEMA_DELTA = HistoryTable("collectors_schema_delta", "day", "RAW_RETENTION_DAYS")
    INDEX_CANDIDATE = HistoryTable("collectors_index_candidate")  # what each statement's last plan asks of an index
    # The vacuum reading (collectors/vacuum/): each database's freeze ages as read, a row per database per reading.
    VACUUM_DATABASE = HistoryTable("collectors_vacuum_database", "day", "RAW_RETENTION_DAYS")


PARTITIONED: tuple[HistoryTable, ...] = (
    TABLES.SNAPSHOT,
    TABLES.WAIT_EVENT,
    TABLES.SERVER_HOURLY,
    TABLES.SERVER_DAILY,
    TABLES.STATEMENT_HOURLY,
    TABLES.STATEMENT_DAILY,
    TABLES.WAIT_EVENT_HOURLY,
    TABLES.WAIT_EVENT_DAILY,
    TABLES.SCHEMA_DELTA,
    TABLES.VACUUM_DATABASE,
)
# Everything a server owns in the history store (a server's delete empties each of them).
PER_SERVER: tuple[HistoryTable, ...] = (
    *PARTITIONED,
    TABLES.STATEMENT_STATE,
    TABLES.STATEMENT,
    TABLES.SERVER_STATE,
    TABLES.PLAN_SHAPE,
    TABLES.STATEMENT_PLAN,
    TABLES.PLAN_ATTEMPT,
    TABLES.PLAN_CHANGE,
    TABLES.PLAN_SPEND,
    TABLES.SCHEMA_TABLE,
    TABLES.SCHEMA_INDEX,
    TABLES.INDEX_CANDIDATE,
)
