"""A wait event as the history store keeps it: one event's samples over one snapshot's interval, and the name
every surface gives it. collectors.waits makes the rows; history.store writes them, the tiers and the read tier
read them."""

from dataclasses import dataclass


@dataclass
class IntervalWait:
    """One wait event's samples over one snapshot's interval, as the history store keeps them (TABLES.WAIT_EVENT);
    the read tier's rows over a window are readtier.waits.WaitEventRow."""

    event_type: str | None
    event: str | None
    query_id: int | None
    samples: int
    session_s: float


def event_label(event_type: str | None, event: str | None) -> str:
    """How a wait event is named on every surface ("CPU (no wait event)" for an active backend with none)."""
    if event_type is None and event is None:
        return "CPU (no wait event)"
    return f"{event_type}:{event}"
