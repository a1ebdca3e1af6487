"""A synthetic server whose settings and versions change at known times (Configured), written through the real
collection path: the history of the server selectors' tests and of the console's server and top pages."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import numpy as np

from bench import synthetic
from collectors.services import server_collect
from collectors.settings import instance
from history import rollups
from tests.history_world import HardTexts

STEP = timedelta(minutes=10)
HOSTILE = "SELECT '<script>alert(1)</script>' AS x FROM orders WHERE id = $1"
NEW_TEXT = "SELECT /* h2-late */ count(*) FROM late_table"


class Configured(HardTexts):
    """A synthetic server whose settings and versions change at given times (`schedule`: time ->
    what ServerMeta reads from then on), whose hottest statements have a hostile text, no text
    (evicted) and a text the role may not see, and one statement that runs only from `late_from` on."""

    def __init__(self, *, schedule: list[tuple[datetime, dict]], late_from: datetime, **kw):
        super().__init__(**kw)
        self.schedule = sorted(schedule, key=lambda s: s[0])
        self.late_from = late_from
        cost = self.p_run * (1 + self.rate) * self.us_per_call
        hot = self.hard_texts(cost, HOSTILE)
        self.late = int(hot[-1])  # the cheapest: it must not run before late_from
        self.late_key = tuple(self.keys[self.late].tolist())
        self.texts[self.late_key] = NEW_TEXT

    def _pick(self) -> np.ndarray:
        idx = super()._pick()
        idx = idx[idx != self.late]
        if self.taken_at + timedelta(seconds=self.step_us / 1e6) >= self.late_from:
            idx = np.union1d(idx, [self.late])
        return idx

    def meta(self) -> instance.ServerMeta:
        m = super().meta()
        for at, change in self.schedule:
            if self.taken_at >= at:
                settings = {**m.settings, **change.get("settings", {})}
                settings = {k: v for k, v in settings.items() if v is not None}
                version = change.get("version", m.server_version_num)
                extension = change.get("extension", m.extension_version)
                m = dataclasses.replace(m, settings=settings, server_version_num=version, extension_version=extension)
        return m


def build_configured(
    name: str,
    *,
    organization: str,
    start: datetime,
    end: datetime,
    schedule: list[tuple[datetime, dict]],
    late_from: datetime,
    n: int = 60,
):
    """Like tests/history_world.build, with a Configured server: a snapshot every STEP in [start, end),
    rolled up every hour and at the end. Returns (server, the synthetic server)."""
    server = synthetic.register(name)
    from inventory.models import Organization, Server

    org, _ = Organization.objects.get_or_create(name=organization)
    Server.objects.filter(pk=server.pk).update(organization=org)
    synth = Configured(
        n=n,
        change_fraction=0.3,
        start=start,
        step_s=int(STEP.total_seconds()),
        seed=5,
        schedule=schedule,
        late_from=late_from,
    )
    last_rollup = start
    with synthetic.reading_from(synth):
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + STEP < end:
            synth.step()
            assert server_collect(server_id=server.pk).ok
            if synth.taken_at - last_rollup >= timedelta(hours=1):
                rollups.roll_up(now=synth.taken_at)
                last_rollup = synth.taken_at
    rollups.roll_up(now=end + timedelta(days=1))
    server.refresh_from_db()
    return server, synth


def minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def schedule_for(now: datetime) -> list[tuple[datetime, dict]]:
    """Within the last 24 hours: max raised (a restart), track_planning on, a minor upgrade with a new
    extension version, and sample_rate appearing (a fork) then going away again."""
    return [
        (now - timedelta(hours=20), {"settings": {"pg_stat_statements.max": "20000"}}),
        (now - timedelta(hours=10), {"settings": {"pg_stat_statements.track_planning": "on"}}),
        (now - timedelta(hours=5), {"version": 170011, "extension": "1.12"}),
        (now - timedelta(hours=3), {"settings": {"pg_stat_statements.sample_rate": "0.5"}}),
        (now - timedelta(hours=2), {"settings": {"pg_stat_statements.sample_rate": None}}),
    ]
