"""Histories the alert rules read, written through the real collection path (server_collect reading a synthetic
server, bench/synthetic.py) and rolled up every hour as the periodic task does: a server deallocating at a rate
chosen minute by minute, and one whose statements get slower in their last hour after a configuration change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from bench import synthetic
from collectors.services import server_collect
from collectors.settings import instance
from collectors.statements import pgss
from history import rollups
from inventory.models import Organization, Server


class Synthetic(synthetic.SyntheticServer):
    """A synthetic server whose pg_stat_statements_info.dealloc is `dealloc` (cumulative, as PostgreSQL counts
    it) and whose pg_stat_statements.max is `entries_max` from `max_changed_at` on."""

    dealloc = 0
    entries_max: str | None = None
    max_changed_at: datetime | None = None

    def meta(self) -> instance.ServerMeta:
        meta = super().meta()
        if self.max_changed_at is not None and self.taken_at >= self.max_changed_at:
            meta.settings["pg_stat_statements.max"] = self.entries_max
        return meta


def collected(
    synth: Synthetic,
    *,
    organization: Organization,
    name: str,
    until: datetime,
    step: timedelta,
    every_step: Callable[[Synthetic], None] = lambda synth: None,
) -> Server:
    """A server of `organization` collected from `synth` every `step` up to `until` (every_step(synth) runs
    before each minute of workload: change the workload or the deallocations there), rolled up hourly."""
    server = synthetic.register(name)
    Server.objects.filter(pk=server.pk).update(organization=organization)
    last_rollup = synth.taken_at
    with synthetic.reading_from(synth):
        # The monitored server's side of pg_stat_statements_info (reading_from puts the original back).
        pgss.read_info = lambda conn, meta: (synth.dealloc, int(synth.stats_since[0]))
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + step < until:
            every_step(synth)
            synth.step()
            assert server_collect(server_id=server.pk).ok
            if synth.taken_at - last_rollup >= timedelta(hours=1):
                rollups.roll_up(now=synth.taken_at)
                last_rollup = synth.taken_at
    rollups.roll_up(now=synth.taken_at)
    server.refresh_from_db()
    return server
