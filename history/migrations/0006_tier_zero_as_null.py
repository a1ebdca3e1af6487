"""The statement tiers store a figure that is 0 as NULL: most of a statement's ten figures are 0 at
every boundary (no planning time with track_planning off, the default; no I/O time without
track_io_timing; no temp blocks, no WAL for a SELECT), and a NULL takes no bytes in the row. Rows
already written keep their zeros; readers take NULL as 0."""

from django.db import migrations

from history.columns import TOTAL_NAMES

_TABLES = ("collectors_statement_hourly", "collectors_statement_daily")


def _alter(clause: str) -> str:
    return "\n".join(
        f"ALTER TABLE {t} " + ", ".join(f"ALTER COLUMN {c} {clause}" for c in TOTAL_NAMES) + ";" for t in _TABLES
    )


class Migration(migrations.Migration):
    dependencies = [("collectors", "0005_server_in_inventory")]

    operations = [
        migrations.RunSQL(
            _alter("DROP NOT NULL"),
            reverse_sql="\n".join(
                f"UPDATE {t} SET " + ", ".join(f"{c} = coalesce({c}, 0)" for c in TOTAL_NAMES) + ";" for t in _TABLES
            )
            + "\n"
            + _alter("SET NOT NULL"),
        ),
    ]
