"""What other apps take from the history store (tests/test_layering.py holds them to it): its models that pages
and the admin show, the snapshot row's columns (the API documents them from here), and the history store's
connection handling (its sessions' statement_timeout among it). The collectors and the read tier, the store's
writer and reader, use its modules directly. And each organization's share of a kind of worker thread
(history.shares), which alerts take too.

Not imported by the app's own __init__: it imports models, which Django loads after the apps."""

from history import shares as worker_shares
from history.models import Statement, TextStatus
from history.sessions import limit_statements
from history.snapshot_facts import HELP, Column, SnapshotFacts, snapshot_columns
from history.store import delete_server_history, drop_history_connection, statement_timed_out

__all__ = [
    "HELP",
    "Column",
    "SnapshotFacts",
    "Statement",
    "TextStatus",
    "delete_server_history",
    "drop_history_connection",
    "limit_statements",
    "snapshot_columns",
    "statement_timed_out",
    "worker_shares",
]
