"""manage.py sample_waits: the wait-event sampler (collectors/waits/sampler.py), until stopped."""

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from collectors.waits import sampler
from history.public import limit_statements


class Command(BaseCommand):
    help = (
        "Sample pg_stat_activity on every enabled server without pg_wait_sampling, COLLECTOR_ACTIVITY_SAMPLES times "
        "per interval, from one event loop; the snapshots take the counts from Redis. Run one "
        "(docs/operations.md, Scaling out)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="exit 1 unless a sampler said it was alive lately (a healthcheck)"
        )

    def handle(self, *args, check: bool = False, **options) -> None:
        if check:
            if not sampler.running():
                raise CommandError("no wait-event sampler has said it is alive within the last 30 s")
            self.stdout.write("the wait-event sampler is alive")
            return
        logging.getLogger("collectors.waits.sampler").setLevel(logging.INFO)
        limit_statements(settings.WORKER_STATEMENT_TIMEOUT_MS)  # a service, as the workers are (history.sessions)
        self.stdout.write("wait-event sampler started", ending="\n")
        self.stdout.flush()
        sampler.serve()
        self.stdout.write("wait-event sampler stopped")
