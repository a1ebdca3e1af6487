from django.db import migrations

# One row per database per reading of the vacuum reading (collectors/vacuum/): its freeze ages as read, and the
# limits in force then. Partitioned by day and kept as long as the raw snapshots (RAW_RETENTION_DAYS).
_TABLE = """
CREATE TABLE collectors_vacuum_database (
    server_id int8 NOT NULL,
    taken_at timestamptz NOT NULL,
    database text NOT NULL,
    xid_age int8 NOT NULL,
    mxid_age int8 NOT NULL,
    allows_connections bool NOT NULL,
    freeze_max_age int8 NOT NULL,
    multixact_freeze_max_age int8 NOT NULL,
    PRIMARY KEY (server_id, taken_at, database)
) PARTITION BY RANGE (taken_at);
"""


class Migration(migrations.Migration):
    dependencies = [("collectors", "0022_server_running_totals")]

    operations = [migrations.RunSQL(_TABLE, "DROP TABLE collectors_vacuum_database")]
