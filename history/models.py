"""The history store's dimension and state tables. The partitioned fact tables are created by
SQL migrations (Django does not model declarative partitioning); read-only models map them for the admin."""

from datetime import datetime

from django.db import models

from history.snapshot_facts import BIGINT, Column, snapshot_columns
from history.tables import TABLES
from inventory.models import Server


class TextStatus(models.TextChoices):
    """Why a statement has, or has not, its query text: each surface says which."""

    STORED = "stored", "stored"  # query holds the text (query_truncated says whether it was cut)
    EVICTED = "evicted", "evicted before its text could be read"  # read again when the entry is back
    NOT_VISIBLE = "not_visible", "not visible to the monitoring role"  # grant pg_read_all_stats
    # pg_stat_statements had no text for it (its query text file was discarded, e.g. after a failed
    # garbage collection): read again only when the entry is re-created
    UNAVAILABLE = "unavailable", "not kept by pg_stat_statements"
    # More new statements (or text) than one snapshot reads (COLLECTOR_TEXTS_PER_SNAPSHOT,
    # COLLECTOR_TEXT_BYTES_PER_SNAPSHOT): read by the next snapshots, first of all
    PENDING = "pending", "not read yet (more new statements than a snapshot reads)"


class Statement(models.Model):
    """One pg_stat_statements key of one server, seen at least once: the facts' dimension."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="statements")
    userid = models.BigIntegerField()
    dbid = models.BigIntegerField()
    queryid = models.BigIntegerField()
    toplevel = models.BooleanField(default=True)
    database_name = models.TextField(blank=True, default="")
    user_name = models.TextField(blank=True, default="")
    query = models.TextField(null=True, blank=True)  # None: see text_status
    query_truncated = models.BooleanField(default=False)
    text_status = models.TextField(choices=TextStatus.choices, default=TextStatus.STORED)
    first_seen_at = models.DateTimeField()
    # When its entry last left pg_stat_statements (evicted, reset); NULL while it is there. A statement gone
    # longer than raw retention that no tier references any more is pruned (history/prune.py).
    gone_at = models.DateTimeField(null=True, blank=True)
    # The redaction's version its text went through (collectors.redact.VERSION): an older one is redacted again.
    redacted_with = models.PositiveSmallIntegerField(db_default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["server", "queryid", "userid", "dbid", "toplevel"], name="statement_key_unique"
            )
        ]
        # Each snapshot looks up the statements still without a text: few rows, found by this index. The primary
        # key is (server_id, id) in the database (migration 0009: every key holds the distribution column of a
        # sharded history store, docs/operations.md "Scaling out"); this index keeps a look-up by id alone quick.
        indexes = [
            models.Index(fields=["server"], condition=~models.Q(text_status="stored"), name="statement_text_missing"),
            models.Index(fields=["id"], name="statement_id"),
            # Texts of an older redaction: few once redacted again, found without reading the dimension.
            models.Index(fields=["redacted_with"], name="statement_redacted_with"),
            # The prune's candidates (history.prune): statements whose entry left, a small part of the dimension.
            models.Index(
                fields=["server", "gone_at"], condition=models.Q(gone_at__isnull=False), name="statement_gone"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queryid} on {self.server_id}"


class ServerState(models.Model):
    """Server-level cumulative state from the last stored snapshot (the statements' state is in
    collectors_statement_state)."""

    server = models.OneToOneField(Server, on_delete=models.CASCADE, primary_key=True, related_name="collector_state")
    taken_at = models.DateTimeField()
    postmaster_start_at = models.DateTimeField(null=True)
    stats_reset_at = models.DateTimeField(null=True)
    dealloc = models.BigIntegerField(null=True)
    wait_profile = models.JSONField(null=True)
    # The lineage of the statistics (a state read from another server, a restored copy or a
    # promoted replica is not the one the counters continue from); None where not readable.
    system_identifier = models.BigIntegerField(null=True)
    timeline_id = models.IntegerField(null=True)
    in_recovery = models.BooleanField(null=True)
    # What the monitoring role could see: every role's entries (pg_read_all_stats), or only those
    # of its own role (role_oid).
    reads_all_stats = models.BooleanField(null=True)
    role_oid = models.BigIntegerField(null=True)
    # Entries new at the last snapshot: a server churning (new keys at every snapshot) has its new keys'
    # texts read in the counters' own scan (collectors/statements/reading.py).
    new_entries = models.IntegerField(null=True)
    # Each reading's status at its last read (collectors/unit.py): {name: {"at_us", "ok", and "code" and "error"
    # when it failed}}; a reading with a cadence is read again once its cadence has passed since "at_us".
    readings = models.JSONField(default=dict)
    # Running totals of the server's snapshots since counted_since (its first snapshot in this history, or the
    # first after an upgrade): the sums of every delta's booked calls, execution and planning microseconds and
    # deallocations, continued across baselines (a baseline adds nothing), so that /metrics can serve them as
    # counters that only grow. Planning stays None until a delta with track_planning on, deallocations until one
    # knowing them (PostgreSQL 14+): a figure never read is absent, never 0.
    counted_since = models.DateTimeField(null=True)
    calls_total = models.BigIntegerField(null=True)
    exec_us_total = models.BigIntegerField(null=True)
    plan_us_total = models.BigIntegerField(null=True)
    dealloc_total = models.BigIntegerField(null=True)


def _snapshot_field(column: Column) -> models.Field:
    """The model's field of a column of the snapshot's declaration (history.snapshot_facts)."""
    kind = {
        datetime: models.DateTimeField,
        float: models.FloatField,
        int: models.BigIntegerField if column.metadata.get(BIGINT) else models.IntegerField,
        bool: models.BooleanField,
        str: models.TextField,
    }[column.type]
    return kind(null=True) if column.null else kind()


# The snapshot's facts, one field per column of its declaration.
SnapshotFactsFields = type(
    "SnapshotFactsFields",
    (models.Model,),
    {
        "__module__": __name__,
        "Meta": type("Meta", (), {"abstract": True}),
        **{c.name: _snapshot_field(c) for c in snapshot_columns()},
    },
)


class Snapshot(SnapshotFactsFields):
    """One stored snapshot (partitioned table collectors_snapshot, read-only here)."""

    id = models.BigIntegerField(primary_key=True)
    server = models.ForeignKey(Server, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    statements = models.BinaryField(null=True)

    class Meta:
        managed = False
        db_table = TABLES.SNAPSHOT.name
        ordering = ["-taken_at"]


class PlanShape(models.Model):
    """One plan shape of one server's statements (collectors/plans/shape.py), stored once: the first plan seen of it,
    redacted like texts. Its primary key is (server_id, id) in the database, as every history table's."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=32)
    plan = models.JSONField()  # EXPLAIN (FORMAT JSON)'s object, its strings redacted
    access_paths = models.JSONField(default=list)  # "Seq Scan on orders", ... in plan order
    node_count = models.IntegerField()
    first_seen_at = models.DateTimeField()

    class Meta:
        db_table = TABLES.PLAN_SHAPE.name
        constraints = [models.UniqueConstraint(fields=["server", "fingerprint"], name="plan_shape_unique")]
        indexes = [models.Index(fields=["id"], name="plan_shape_id")]


class StatementPlan(models.Model):
    """A statement planned with one shape: when first and last, and the estimates of the last plan. The shape is
    found by (server_id, shape_id): no foreign key joins two history rows (a sharded store could not hold it)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    statement_id = models.BigIntegerField()
    shape_id = models.BigIntegerField()
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    total_cost = models.FloatField()
    plan_rows = models.FloatField()
    method = models.CharField(max_length=16)  # generic_plan (16+) or prepare (13-15)

    class Meta:
        db_table = TABLES.STATEMENT_PLAN.name
        constraints = [
            models.UniqueConstraint(fields=["server", "statement_id", "shape_id"], name="statement_plan_unique")
        ]


class PlanAttempt(models.Model):
    """A statement's last EXPLAIN: when, and why there is no plan when there is none (collectors/plans/explain.py's
    reasons), so that a statement is never shown without its plan or its reason."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    statement_id = models.BigIntegerField()
    at = models.DateTimeField()
    code = models.CharField(max_length=16)  # "planned", or the reason's code
    reason = models.TextField(blank=True, default="")

    class Meta:
        db_table = TABLES.PLAN_ATTEMPT.name
        constraints = [models.UniqueConstraint(fields=["server", "statement_id"], name="plan_attempt_unique")]


class PlanChange(models.Model):
    """A statement planned with another shape than its last plan's: when it was seen, and the shapes before and
    after (by (server_id, shape_id), as StatementPlan). Kept apart from the plans' first and last seen, which
    cannot tell a plan that came back (A, B, then A again) from one that stayed."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    statement_id = models.BigIntegerField()
    at = models.DateTimeField()
    from_shape_id = models.BigIntegerField()
    to_shape_id = models.BigIntegerField()

    class Meta:
        db_table = TABLES.PLAN_CHANGE.name
        indexes = [models.Index(fields=["server", "statement_id", "at"], name="plan_change_statement")]


class PlanSpend(models.Model):
    """What a server's plans cost in one UTC hour: the EXPLAINs sent, the time they took on the server (measured
    from the console, connection round trips included) and the bytes of the new shapes stored. The per-server
    budget (settings.PLANS) is read from here before each EXPLAIN, and the benchmark reads its figures here too."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()  # the hour's start, UTC
    explains = models.IntegerField(default=0)
    planning_ms = models.FloatField(default=0.0)
    bytes = models.BigIntegerField(default=0)

    class Meta:
        db_table = TABLES.PLAN_SPEND.name
        constraints = [models.UniqueConstraint(fields=["server", "hour"], name="plan_spend_unique")]


class SchemaTable(models.Model):
    """One table of one database of a server (collectors/schema/), as last read: its statistics' cumulative counters
    (what the next reading's deltas subtract), its sizes and upkeep, and since when its counters have been watched
    without a reset (the evidence the index advice weighs). A table dropped keeps its row, with when it went."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    database = models.CharField(max_length=63)
    relid = models.BigIntegerField()  # pg_class.oid in its database
    schema_name = models.CharField(max_length=63)
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=1)  # pg_class.relkind: r table, p partitioned, m materialized view, t TOAST
    partition = models.BooleanField(default=False)  # a partition of a partitioned table
    first_seen_at = models.DateTimeField()
    gone_at = models.DateTimeField(null=True)  # not found by a whole reading of its database
    stats_since = models.DateTimeField()  # its counters watched without a reset since (first sight, or a reset)
    seq_scan = models.BigIntegerField(default=0)
    seq_tup_read = models.BigIntegerField(default=0)
    idx_scan = models.BigIntegerField(default=0)
    idx_tup_fetch = models.BigIntegerField(default=0)
    n_tup_ins = models.BigIntegerField(default=0)
    n_tup_upd = models.BigIntegerField(default=0)
    n_tup_hot_upd = models.BigIntegerField(default=0)
    n_tup_del = models.BigIntegerField(default=0)
    n_live_tup = models.BigIntegerField(default=0)
    n_dead_tup = models.BigIntegerField(default=0)
    size_bytes = models.BigIntegerField(default=0)
    last_vacuum_at = models.DateTimeField(null=True)
    last_analyze_at = models.DateTimeField(null=True)

    class Meta:
        db_table = TABLES.SCHEMA_TABLE.name
        constraints = [
            models.UniqueConstraint(fields=["server", "database", "relid"], name="schema_table_unique"),
        ]


class SchemaIndex(models.Model):
    """One index of one database of a server, as last read: what it is (its definition, keys, operator classes,
    predicate, what constraint it backs, whether valid), its size, and its scans: cumulative, since when they have
    been watched without a reset and how many there were then, and when one was last seen. Its predicate's and
    expressions' texts are compared by their digests (a duplicate is found even where redaction hides them)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    database = models.CharField(max_length=63)
    relid = models.BigIntegerField()  # the index's pg_class.oid
    table_relid = models.BigIntegerField()
    schema_name = models.CharField(max_length=63)
    name = models.CharField(max_length=63)
    table_name = models.CharField(max_length=63)
    definition = models.TextField()  # pg_get_indexdef, redacted as query texts are
    method = models.CharField(max_length=63)  # pg_am.amname
    key_attnums = models.JSONField(default=list)  # pg_index.indkey's key columns (0 for an expression)
    key_columns = models.JSONField(default=list)  # their names (None for an expression)
    include_count = models.IntegerField(default=0)  # INCLUDE columns, after the keys
    opclasses = models.JSONField(default=list)  # pg_index.indclass, as oids of its database
    predicate_md5 = models.CharField(max_length=32, blank=True, default="")
    expressions_md5 = models.CharField(max_length=32, blank=True, default="")
    is_unique = models.BooleanField(default=False)
    is_primary = models.BooleanField(default=False)
    constraint = models.CharField(max_length=63, blank=True, default="")  # the constraint it backs, if any
    is_valid = models.BooleanField(default=True)
    size_bytes = models.BigIntegerField(default=0)
    first_seen_at = models.DateTimeField()
    gone_at = models.DateTimeField(null=True)  # not found by a whole reading of its database
    stats_since = models.DateTimeField()
    scans_at_since = models.BigIntegerField(default=0)  # idx_scan when stats_since began
    last_scan_at = models.DateTimeField(null=True)  # a reading saw its scans grow (or pg_stat_user_indexes said, 16+)
    idx_scan = models.BigIntegerField(default=0)
    idx_tup_read = models.BigIntegerField(default=0)
    idx_tup_fetch = models.BigIntegerField(default=0)

    class Meta:
        db_table = TABLES.SCHEMA_INDEX.name
        constraints = [
            models.UniqueConstraint(fields=["server", "database", "relid"], name="schema_index_unique"),
        ]


class IndexCandidate(models.Model):
    """An index one of a statement's filtered scans asks for, as its last plan was judged (collectors/plans/
    hypothetical.py): the columns, how it was costed and what it would cost the statement, or why none. Replaced
    at each plan of the statement; the missing-index advice sums them over the statements of one index."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    statement_id = models.BigIntegerField()
    at = models.DateTimeField()
    database = models.CharField(max_length=63)
    schema_name = models.CharField(max_length=63)
    table_name = models.CharField(max_length=63)
    columns = models.JSONField(default=list)  # the index's columns in order ([]: none advised)
    method = models.CharField(max_length=16)  # cost-verified | estimated
    reltuples = models.FloatField()
    selectivity = models.FloatField(null=True)
    cost_before = models.FloatField()
    cost_after = models.FloatField(null=True)
    size_bytes = models.BigIntegerField(null=True)
    reason = models.TextField(blank=True, default="")
    partition_of = models.JSONField(null=True)  # the table's partition tree, when it is a partition

    class Meta:
        db_table = TABLES.INDEX_CANDIDATE.name
        indexes = [models.Index(fields=["server", "statement_id"], name="index_candidate_statement")]


class FailedCollection(models.Model):
    """One failed collection of a server (the last KEEP_ERRORS per server; the Server row keeps only the
    last one, which says nothing of a server that fails one collection in ten)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="collection_errors")
    at = models.DateTimeField()
    error_class = models.CharField(max_length=40)  # collectors.errors.CollectionError.code
    message = models.TextField()

    class Meta:
        # The table's name from before the model was renamed (migration 0013); its primary key is (server_id,
        # id) in the database, as every history table's keys (migration 0009).
        db_table = "collectors_collectionerror"
        indexes = [models.Index(fields=["server", "-at"], name="collection_error_recent")]

    def __str__(self) -> str:
        return f"{self.error_class} on {self.server_id} at {self.at:%Y-%m-%d %H:%M}"
