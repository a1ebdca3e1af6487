"""The history store's one door (tests/test_layering.py holds every app to it, the collectors and the read tier too).

- For every app: the models that pages and the admin show, the snapshot row's columns (the API documents them from
  here), the history store's connection handling (its sessions' statement_timeout among it), a server's delete, and
  each organization's share of a kind of worker thread (worker_shares), which alerts take too.
- For the collectors: what a reading compares with, read before the monitored connection opens (the server's
  state, the statements', their texts missing, the schema's), the writer a snapshot's rows are handed to in one
  transaction (store_snapshot, SnapshotWriter) and the typed rows it takes; the plans' writes and budget.
- For the read tier: the tables by name (TABLES), their rows' codecs and the tiers' sums.
- For both: the statements' canonical columns, and the binary arrays that move thousands of values in one message.

Not imported by the app's own __init__: it imports models, which Django loads after the apps."""

from history import shares as worker_shares
from history.binary_array import PG_EPOCH_US, ArrayFormatError
from history.binary_array import param as array_param
from history.binary_array import parse as parse_array
from history.binary_array import register as register_arrays
from history.codec import Block, decode_sums
from history.codec import decode as decode_block
from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES, GAUGE_NAMES, KEY_NAMES, TOTAL_NAMES, totals_of
from history.entries import Entries
from history.models import (
    FailedCollection,
    IndexCandidate,
    PlanAttempt,
    PlanShape,
    SchemaIndex,
    SchemaTable,
    ServerState,
    Statement,
    StatementPlan,
    TextStatus,
)
from history.own import marked_text, own_sql
from history.partitions import partition_name
from history.plans import BUDGET as ATTEMPT_OVER_BUDGET
from history.plans import (
    NOT_ATTEMPTS,
    PLANNED,
    Grant,
    NewPlan,
    PlanBudget,
    PlanRefused,
    budget_reserve,
    budget_settle,
    record_candidates,
    record_plan,
    record_unexplained,
)
from history.plans import SERVER as ATTEMPT_SERVER_DOWN
from history.schema import DatabaseRows, DatabaseState, rows_for_database
from history.schema import load_state as load_schema_state
from history.sessions import limit_statements
from history.snapshot_facts import HELP, SNAPSHOT_FACTS, Column, SnapshotFacts, snapshot_columns
from history.store import (
    LOCK_NAMESPACE,
    NewSnapshot,
    NewStatement,
    StatementLookup,
    StatementText,
    delete_server_history,
    drop_history_connection,
    load_statement_state,
    lookup_returning,
    statement_timed_out,
    statements_redact_again,
    texts_missing,
)
from history.tables import TABLES, HistoryTable
from history.tiers import DAY, HOUR, Sums, day_of, month_of, next_month
from history.tiers import add as add_sums
from history.tiers import from_payloads as sums_from_payloads
from history.wait_rows import IntervalWait, event_label
from history.writer import SnapshotWriter, store_snapshot

__all__ = [
    "ATTEMPT_OVER_BUDGET",
    "ATTEMPT_SERVER_DOWN",
    "COUNTER_NAMES",
    "DAY",
    "FACT_GAUGE_NAMES",
    "GAUGE_NAMES",
    "HELP",
    "HOUR",
    "KEY_NAMES",
    "LOCK_NAMESPACE",
    "NOT_ATTEMPTS",
    "PG_EPOCH_US",
    "PLANNED",
    "SNAPSHOT_FACTS",
    "TABLES",
    "TOTAL_NAMES",
    "ArrayFormatError",
    "Block",
    "Column",
    "DatabaseRows",
    "DatabaseState",
    "Entries",
    "FailedCollection",
    "Grant",
    "HistoryTable",
    "IndexCandidate",
    "IntervalWait",
    "NewPlan",
    "NewSnapshot",
    "NewStatement",
    "PlanAttempt",
    "PlanBudget",
    "PlanRefused",
    "PlanShape",
    "SchemaIndex",
    "SchemaTable",
    "ServerState",
    "SnapshotFacts",
    "SnapshotWriter",
    "Statement",
    "StatementLookup",
    "StatementPlan",
    "StatementText",
    "Sums",
    "TextStatus",
    "add_sums",
    "array_param",
    "budget_reserve",
    "budget_settle",
    "day_of",
    "decode_block",
    "decode_sums",
    "delete_server_history",
    "drop_history_connection",
    "event_label",
    "limit_statements",
    "load_schema_state",
    "load_statement_state",
    "lookup_returning",
    "marked_text",
    "month_of",
    "next_month",
    "own_sql",
    "parse_array",
    "partition_name",
    "record_candidates",
    "record_plan",
    "record_unexplained",
    "register_arrays",
    "rows_for_database",
    "snapshot_columns",
    "statement_timed_out",
    "statements_redact_again",
    "store_snapshot",
    "sums_from_payloads",
    "texts_missing",
    "totals_of",
    "worker_shares",
]
