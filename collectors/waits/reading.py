"""The waits reading: wait events by query, from pg_wait_sampling's profile where it is installed, else from looks
at pg_stat_activity (waits.py; the sampler takes them between snapshots while it runs, sampler.py).

A failure leaves the interval without wait events (a gap on the charts), and the next profile is a baseline.
"""

import redis
from django.conf import settings

from collectors.errors import CollectionError
from collectors.unit import Budget, Collection, Failure, Reading
from collectors.waits import sampler, waits
from history.public import TABLES, SnapshotWriter


def read(snap: Collection) -> waits.WaitReading | None:
    conn, meta = snap.conn, snap.meta
    if meta.wait_sampling_schema:
        try:
            return waits.read_wait_sampling(conn, meta)
        except waits.ProfileOverCap as exc:  # the server page says so (readtier.server.wait_profile_cap)
            snap.status["waits"] = {"profile_over_cap": exc.max_rows}
            snap.notes.append(f"pg_wait_sampling unusable ({exc.message}); sampling pg_stat_activity instead")
        except CollectionError as exc:
            snap.notes.append(f"pg_wait_sampling unusable ({exc.message}); sampling pg_stat_activity instead")
    if READING.budget.value("rows") <= 0:  # no looks at all: no wait events
        return None
    return _sampled_activity(snap)


def _sampled_activity(snap: Collection) -> waits.WaitReading | None:
    """pg_stat_activity's samples for this interval: those the sampler took since the previous snapshot while
    one runs (none at a baseline: they belong to no interval, and are dropped), else a few looks now, inline.
    Redis not answering: no sampler can be reached either, so the looks are taken inline."""
    try:
        alive, reading = sampler.take(snap.server.pk)
    except redis.RedisError:
        alive, reading = False, None
    if alive:
        return None if snap.baseline else reading
    if snap.baseline:
        return None
    samples, span_s = int(READING.budget.value("rows")), settings.COLLECTOR["ACTIVITY_SPAN_S"]
    return waits.sample_activity(snap.conn, snap.meta, samples=samples, span_s=span_s)


def compute(snap: Collection, got: waits.WaitReading | None) -> list[waits.IntervalWait]:
    counted = not snap.baseline and got is not None
    previous = waits.decode_profile(snap.previous.state.wait_profile) if counted else None
    rows = waits.rows_for_interval(got, previous, snap.interval_s) if counted else []
    snap.facts |= {"waits_source": got.source if counted else None, "waits_samples": got.n_samples if counted else None}
    snap.state["wait_profile"] = None if got is None or got.profile is None else waits.encode_profile(got.profile)
    return rows


def persist(snap: Collection, rows: list[waits.IntervalWait], writer: SnapshotWriter) -> None:
    writer.append(TABLES.WAIT_EVENT, rows)


READING = Reading(
    name="waits",
    what="wait events",
    sql=waits.SQL,
    tables=(TABLES.WAIT_EVENT,),
    delta_rules=(
        "pg_wait_sampling's profile: now − before per (pid, event, query id), now for a key new or gone back; "
        "pg_stat_activity: counts over the interval's looks, as session-seconds"
    ),
    failure=Failure.OWN,
    read=read,
    compute=compute,
    persist=persist,
    after=("statements",),
    budget=Budget(rows="ACTIVITY_SAMPLES"),  # looks per snapshot taken inline, spread over ACTIVITY_SPAN_S
)
