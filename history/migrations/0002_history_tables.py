"""History store: the statement state and the time-partitioned fact and rollup tables.

Partitions are created ahead and dropped for retention by history.partitions; none exists
here, the writer creates the one it needs on first use."""

from django.db import migrations

STATEMENT_STATE = """
CREATE TABLE collectors_statement_state (
    server_id int8 NOT NULL,
    statement_id int8 NOT NULL,
    userid int8 NOT NULL,
    dbid int8 NOT NULL,
    queryid int8 NOT NULL,
    toplevel int8 NOT NULL,
    stats_since_us int8 NOT NULL,
    minmax_stats_since_us int8 NOT NULL,
    calls int8 NOT NULL,
    plans int8 NOT NULL,
    total_exec_us int8 NOT NULL,
    total_plan_us int8 NOT NULL,
    rows int8 NOT NULL,
    shared_blks_hit int8 NOT NULL,
    shared_blks_read int8 NOT NULL,
    shared_blks_dirtied int8 NOT NULL,
    shared_blks_written int8 NOT NULL,
    local_blks_hit int8 NOT NULL,
    local_blks_read int8 NOT NULL,
    local_blks_dirtied int8 NOT NULL,
    local_blks_written int8 NOT NULL,
    temp_blks_read int8 NOT NULL,
    temp_blks_written int8 NOT NULL,
    shared_blk_read_us int8 NOT NULL,
    shared_blk_write_us int8 NOT NULL,
    local_blk_read_us int8 NOT NULL,
    local_blk_write_us int8 NOT NULL,
    temp_blk_read_us int8 NOT NULL,
    temp_blk_write_us int8 NOT NULL,
    wal_records int8 NOT NULL,
    wal_fpi int8 NOT NULL,
    wal_bytes int8 NOT NULL,
    wal_buffers_full int8 NOT NULL,
    jit_functions int8 NOT NULL,
    jit_generation_us int8 NOT NULL,
    jit_inlining_count int8 NOT NULL,
    jit_inlining_us int8 NOT NULL,
    jit_optimization_count int8 NOT NULL,
    jit_optimization_us int8 NOT NULL,
    jit_emission_count int8 NOT NULL,
    jit_emission_us int8 NOT NULL,
    jit_deform_count int8 NOT NULL,
    jit_deform_us int8 NOT NULL,
    parallel_workers_to_launch int8 NOT NULL,
    parallel_workers_launched int8 NOT NULL,
    min_plan_ms float8 NOT NULL,
    max_plan_ms float8 NOT NULL,
    stddev_plan_ms float8 NOT NULL,
    min_exec_ms float8 NOT NULL,
    max_exec_ms float8 NOT NULL,
    stddev_exec_ms float8 NOT NULL,
    PRIMARY KEY (server_id, statement_id)
) WITH (fillfactor = 70);
"""

FACTS = """
CREATE TABLE collectors_snapshot (
    id int8 GENERATED ALWAYS AS IDENTITY,
    server_id int8 NOT NULL,
    taken_at timestamptz NOT NULL,
    prev_taken_at timestamptz,
    interval_s float8,
    kind text NOT NULL CHECK (kind IN ('baseline', 'delta')),
    server_version_num int4 NOT NULL,
    extension_version text NOT NULL,
    entries int4 NOT NULL,
    entries_hidden int4 NOT NULL,
    entries_max int4,
    changed int4 NOT NULL,
    new_entries int4 NOT NULL,
    gone_entries int4 NOT NULL,
    dealloc int8,
    dealloc_delta int8,
    stats_reset_at timestamptz,
    full_reset bool NOT NULL,
    track text,
    track_utility bool,
    track_planning bool,
    save bool,
    sample_rate float8,
    waits_source text,
    waits_samples int4,
    statements bytea,
    PRIMARY KEY (server_id, taken_at)
) PARTITION BY RANGE (taken_at);

CREATE TABLE collectors_wait_event (
    server_id int8 NOT NULL,
    taken_at timestamptz NOT NULL,
    event_type text,
    event text,
    query_id int8,
    samples int8 NOT NULL,
    session_s float8 NOT NULL
) PARTITION BY RANGE (taken_at);
CREATE INDEX collectors_wait_event_server_time ON collectors_wait_event (server_id, taken_at);

CREATE TABLE collectors_statement_hourly (
    server_id int8 NOT NULL,
    bucket timestamptz NOT NULL,
    snapshots int4 NOT NULL,
    span_s float8 NOT NULL,
    planning_tracked_s float8 NOT NULL,
    dealloc_delta int8,
    statements bytea NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server_id, bucket)
) PARTITION BY RANGE (bucket);

CREATE TABLE collectors_statement_daily (LIKE collectors_statement_hourly INCLUDING DEFAULTS,
    PRIMARY KEY (server_id, bucket)) PARTITION BY RANGE (bucket);

CREATE TABLE collectors_wait_event_hourly (
    server_id int8 NOT NULL,
    bucket timestamptz NOT NULL,
    event_type text,
    event text,
    query_id int8,
    samples int8 NOT NULL,
    session_s float8 NOT NULL
) PARTITION BY RANGE (bucket);
CREATE INDEX collectors_wait_event_hourly_server_time ON collectors_wait_event_hourly (server_id, bucket);

CREATE TABLE collectors_wait_event_daily (LIKE collectors_wait_event_hourly)
    PARTITION BY RANGE (bucket);
CREATE INDEX collectors_wait_event_daily_server_time ON collectors_wait_event_daily (server_id, bucket);
"""

DROP = """
DROP TABLE IF EXISTS collectors_wait_event_daily, collectors_wait_event_hourly, collectors_statement_daily,
    collectors_statement_hourly, collectors_wait_event, collectors_snapshot, collectors_statement_state;
"""


class Migration(migrations.Migration):
    dependencies = [("collectors", "0001_initial"), ("console", "0001_initial")]

    operations = [migrations.RunSQL(STATEMENT_STATE + FACTS, DROP)]
