"""collectors/waits/reading.py: what the waits reading makes of a reading, and of none."""

from collectors.unit import Collection, Previous
from collectors.waits import waits
from collectors.waits.reading import compute
from history.entries import Entries
from history.models import ServerState
from inventory.models import Server

PROFILE = waits.WaitReading(source="pg_wait_sampling", profile={(7, "IO", "DataFileRead", 42): 300}, period_ms=10)


def _snapshot(previous_profile, *, baseline=False) -> Collection:
    state = ServerState(wait_profile=previous_profile)
    return Collection(server=Server(pk=1), previous=Previous(state, Entries.empty()), baseline=baseline, interval_s=60)


def test_a_profile_with_an_earlier_one_gives_the_intervals_session_seconds():
    snap = _snapshot(waits.encode_profile({(7, "IO", "DataFileRead", 42): 100}))
    rows = compute(snap, PROFILE)
    assert [(r.event, r.query_id, r.samples, r.session_s) for r in rows] == [("DataFileRead", 42, 200, 2.0)]
    assert snap.facts == {"waits_source": "pg_wait_sampling", "waits_samples": 0}
    assert snap.state["wait_profile"] == waits.encode_profile(PROFILE.profile)


def test_a_profile_with_none_before_it_is_the_profiles_baseline():
    """pg_wait_sampling installed since the last snapshot, or the waits reading failed then: the counts hold time
    from before the interval, so none is booked; the profile is kept for the next interval."""
    snap = _snapshot(None)
    assert compute(snap, PROFILE) == []
    assert snap.state["wait_profile"] == waits.encode_profile(PROFILE.profile)


def test_no_reading_stores_no_wait_events_and_no_profile():
    snap = _snapshot(waits.encode_profile({(7, "IO", "DataFileRead", 42): 100}))
    assert compute(snap, None) == []
    assert snap.facts == {"waits_source": None, "waits_samples": None} and snap.state["wait_profile"] is None
    baseline = _snapshot(None, baseline=True)
    assert compute(baseline, PROFILE) == [] and baseline.facts["waits_source"] is None
