"""The history store's dimension and state tables. The partitioned fact tables are created by
SQL migrations (Django does not model declarative partitioning); read-only models map them for the admin."""
from django.db import models

from console.models import Server


class Statement(models.Model):
    """One pg_stat_statements key of one server, seen at least once: the facts' dimension."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="statements")
    userid = models.BigIntegerField()
    dbid = models.BigIntegerField()
    queryid = models.BigIntegerField()
    toplevel = models.BooleanField(default=True)
    database_name = models.TextField(blank=True, default="")
    user_name = models.TextField(blank=True, default="")
    query = models.TextField(null=True, blank=True)  # None: not visible to the monitoring role
    query_truncated = models.BooleanField(default=False)
    first_seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["server", "queryid", "userid", "dbid", "toplevel"], name="statement_key_unique"
            )
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


class Snapshot(models.Model):
    """One stored snapshot (partitioned table collectors_snapshot, read-only here)."""

    id = models.BigIntegerField(primary_key=True)
    server = models.ForeignKey(Server, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    taken_at = models.DateTimeField()
    prev_taken_at = models.DateTimeField(null=True)
    interval_s = models.FloatField(null=True)
    kind = models.TextField()
    server_version_num = models.IntegerField()
    extension_version = models.TextField()
    entries = models.IntegerField()
    entries_hidden = models.IntegerField()
    entries_max = models.IntegerField(null=True)
    changed = models.IntegerField()
    new_entries = models.IntegerField()
    gone_entries = models.IntegerField()
    dealloc = models.BigIntegerField(null=True)
    dealloc_delta = models.BigIntegerField(null=True)
    stats_reset_at = models.DateTimeField(null=True)
    full_reset = models.BooleanField()
    track = models.TextField(null=True)
    track_utility = models.BooleanField(null=True)
    track_planning = models.BooleanField(null=True)
    save = models.BooleanField(null=True)
    sample_rate = models.FloatField(null=True)
    waits_source = models.TextField(null=True)
    waits_samples = models.IntegerField(null=True)
    statements = models.BinaryField(null=True)

    class Meta:
        managed = False
        db_table = "collectors_snapshot"
        ordering = ["-taken_at"]
