"""manage.py history backfill — bring history stored before the read tier into it (run after migrate)."""

from django.core.management.base import BaseCommand, CommandError

from history.backfill import history_backfill


class Command(BaseCommand):
    help = "Maintain the history store. 'backfill': bring history collected before the read tier into it."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["backfill"])
        parser.add_argument("--keep-legacy", action="store_true", help="do not drop the converted blob rollups")

    def handle(self, *args, action: str, keep_legacy: bool, **opts):
        result = history_backfill(drop_legacy=not keep_legacy)
        self.stdout.write(
            f"snapshots given totals: {result.snapshots}; hours converted from blob rollups: {result.legacy_hours}; "
            f"days converted: {result.legacy_days}; hours built: {result.rollups.hours}; "
            f"days built: {result.rollups.days}; dropped: {', '.join(result.dropped) or 'nothing'}"
        )
        if result.rollups.failed:
            raise CommandError("some buckets failed (the legacy tables are kept): " + "; ".join(result.rollups.failed))
