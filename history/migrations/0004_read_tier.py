"""The read tier: server totals as columns per snapshot and per UTC hour and day, and the
statement-major tier (cumulative sums per statement at hour and day boundaries).

The blob rollups of 0002 (one encoded block per server and hour or day) are kept under the names
*_legacy until `manage.py history backfill` has converted them into the new tables, which then
drops them."""

from django.db import migrations

TOTALS = (
    "calls",
    "plans",
    "exec_us",
    "plan_us",
    "rows",
    "shared_blks_hit",
    "shared_blks_read",
    "temp_blks",
    "io_us",
    "wal_bytes",
)  # fmt: skip  (history.columns.TOTAL_NAMES when this was written)

RENAME_LEGACY = """
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             JOIN pg_class p ON p.oid = i.inhparent
             WHERE p.relname IN ('collectors_statement_hourly', 'collectors_statement_daily') LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', r.relname,
                       regexp_replace(r.relname, '_p([0-9]+)$', '_legacy_p\\1'));
    END LOOP;
END $$;
ALTER TABLE collectors_statement_hourly RENAME TO collectors_statement_hourly_legacy;
ALTER TABLE collectors_statement_daily RENAME TO collectors_statement_daily_legacy;
-- Nothing to convert (a new install): no legacy tables.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM collectors_statement_hourly_legacy)
       AND NOT EXISTS (SELECT 1 FROM collectors_statement_daily_legacy) THEN
        DROP TABLE collectors_statement_hourly_legacy, collectors_statement_daily_legacy;
    END IF;
END $$;
"""

SNAPSHOT_TOTALS = "ALTER TABLE collectors_snapshot " + ", ".join(f"ADD COLUMN {c} int8" for c in TOTALS) + ";"

_TOTAL_COLUMNS = ",\n    ".join(f"{c} int8 NOT NULL" for c in TOTALS)

SERVER_ROLLUPS = f"""
CREATE TABLE collectors_server_hourly (
    server_id int8 NOT NULL,
    bucket timestamptz NOT NULL,
    snapshots int4 NOT NULL,
    span_s float8 NOT NULL,
    planning_tracked_s float8 NOT NULL,
    {_TOTAL_COLUMNS},
    dealloc_delta int8,
    dealloc_span_s float8 NOT NULL,
    entries_peak int4 NOT NULL,
    entries_max int4,
    changed int8 NOT NULL,
    new_entries int8 NOT NULL,
    wait_session_s float8 NOT NULL,
    waits jsonb NOT NULL,  -- wait event ("Type:Event") -> session-seconds, for the server's charts
    -- Snapshots taken before this are in the bucket: its end, or for the current hour, just after
    -- the last snapshot rolled up so far (the hour is rolled up as it goes).
    built_until timestamptz NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server_id, bucket)
) PARTITION BY RANGE (bucket);
CREATE TABLE collectors_server_daily (LIKE collectors_server_hourly INCLUDING DEFAULTS,
    PRIMARY KEY (server_id, bucket)) PARTITION BY RANGE (bucket);
"""

STATEMENT_TIER = f"""
CREATE TABLE collectors_statement_hourly (
    server_id int8 NOT NULL,
    until timestamptz NOT NULL,
    statement_id int8 NOT NULL,
    {_TOTAL_COLUMNS},
    PRIMARY KEY (server_id, until, statement_id)
) PARTITION BY RANGE (until);
CREATE TABLE collectors_statement_daily (LIKE collectors_statement_hourly,
    PRIMARY KEY (server_id, until, statement_id)) PARTITION BY RANGE (until);
"""

DROP = (
    """
DROP TABLE IF EXISTS collectors_statement_hourly, collectors_statement_daily, collectors_server_hourly,
    collectors_server_daily;
ALTER TABLE collectors_snapshot """
    + ", ".join(f"DROP COLUMN {c}" for c in TOTALS)
    + """;
CREATE TABLE IF NOT EXISTS collectors_statement_hourly_legacy (server_id int8 NOT NULL, bucket timestamptz NOT NULL,
    snapshots int4 NOT NULL, span_s float8 NOT NULL, planning_tracked_s float8 NOT NULL, dealloc_delta int8,
    statements bytea NOT NULL, built_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (server_id, bucket))
    PARTITION BY RANGE (bucket);
CREATE TABLE IF NOT EXISTS collectors_statement_daily_legacy (LIKE collectors_statement_hourly_legacy
    INCLUDING DEFAULTS, PRIMARY KEY (server_id, bucket)) PARTITION BY RANGE (bucket);
ALTER TABLE collectors_statement_hourly_legacy RENAME TO collectors_statement_hourly;
ALTER TABLE collectors_statement_daily_legacy RENAME TO collectors_statement_daily;
"""
)


def fill_snapshot_totals(apps, schema_editor):
    """Raw snapshots (at most the raw retention, 3 days by default) get their totals now; the blob
    rollups are converted by `manage.py history backfill` (also run by the periodic rollup task)."""
    from history.backfill import fill_snapshot_totals as fill

    fill()


class Migration(migrations.Migration):
    dependencies = [("collectors", "0003_collector_state")]

    operations = [
        migrations.RunSQL(RENAME_LEGACY + SNAPSHOT_TOTALS + SERVER_ROLLUPS + STATEMENT_TIER, DROP),
        migrations.RunPython(fill_snapshot_totals, migrations.RunPython.noop),
    ]
