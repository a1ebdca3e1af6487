"""Whether a snapshot's statistics continue those of the previous snapshot of the same server.

Deltas are exact only between two readings of the same statistics. Behind one DSN the statistics can
change hands: a new cluster initdb'ed at the same address, a restored backup, a failover to a
replica, or entries of other roles becoming visible to the monitoring role. Then the counters read
now include activity from before the interval, and booking them as its delta would be wrong.
"""

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg

from collectors.errors import from_query_error
from collectors.settings import instance
from collectors.settings.instance import CONTROL_CHECKPOINT, CONTROL_SYSTEM, FUNCTIONS, IS_IN_RECOVERY
from history.public import ServerState

_READS = {
    CONTROL_SYSTEM: "(SELECT system_identifier FROM pg_catalog.pg_control_system())",
    CONTROL_CHECKPOINT: "(SELECT timeline_id FROM pg_catalog.pg_control_checkpoint())",
    IS_IN_RECOVERY: "pg_catalog.pg_is_in_recovery()",
}
BASELINE = "this snapshot is a new baseline: no deltas are stored for the interval since the previous one"


@dataclass(frozen=True)
class Identity:
    """What identifies the statistics' lineage, as read now (None: not executable by the role)."""

    system_identifier: int | None
    timeline_id: int | None
    in_recovery: bool | None


def read_identity(conn: psycopg.Connection, meta: instance.ServerMeta) -> Identity:
    granted = [f for f in FUNCTIONS if f in meta.executable]
    values: dict[str, object] = {}
    if granted:
        try:
            row = conn.execute("SELECT " + ", ".join(_READS[f] for f in granted)).fetchone()
        except psycopg.Error as exc:
            raise from_query_error(exc, "reading the server's system identifier and timeline") from exc
        values = dict(zip(granted, row, strict=True))
    return Identity(values.get(CONTROL_SYSTEM), values.get(CONTROL_CHECKPOINT), values.get(IS_IN_RECOVERY))


@dataclass(frozen=True)
class Continuity:
    """How the statistics read now relate to the previous snapshot's."""

    # Not the same statistics (in the DBA's words): the whole snapshot is a baseline.
    baseline_reason: str | None = None
    # Same statistics, all reset inside the interval: every entry counts from zero.
    full_reset: bool = False
    # The role saw only its own entries (this role oid) before, and now sees more.
    visible_before_userid: int | None = None

    def newly_visible(self, keys: np.ndarray, new: np.ndarray) -> np.ndarray:
        """Which of the keys new to the state were there before but hidden from the monitoring role."""
        if self.visible_before_userid is None:
            return np.zeros(len(keys), bool)
        return new & (keys[:, 0] != self.visible_before_userid)


def _role(in_recovery: bool) -> str:
    return "a standby" if in_recovery else "a primary"


def _other_server(prev: ServerState, meta: instance.ServerMeta, identity: Identity) -> str | None:
    if (
        prev.system_identifier is not None
        and identity.system_identifier is not None
        and prev.system_identifier != identity.system_identifier
    ):
        return (
            f"a different PostgreSQL cluster answers at this address (system identifier "
            f"{identity.system_identifier}, was {prev.system_identifier})"
        )
    # A restore or a failover brings another postmaster: a promotion in place keeps the same
    # shared memory, so the same counters, and needs no baseline.
    restarted = (
        prev.postmaster_start_at is not None
        and instance.timestamp(meta.postmaster_start_us) != prev.postmaster_start_at
    )
    if not restarted:
        return None
    if prev.in_recovery is not None and identity.in_recovery is not None and prev.in_recovery != identity.in_recovery:
        return (
            f"the server at this address is now {_role(identity.in_recovery)} (it was {_role(prev.in_recovery)}), "
            "after a restart: a failover or a restore, whose statistics are not the previous server's"
        )
    if prev.timeline_id is not None and identity.timeline_id is not None and prev.timeline_id != identity.timeline_id:
        return (
            f"the server at this address is on timeline {identity.timeline_id} (was {prev.timeline_id}) after "
            "a restart: a restore or a failover to a replica, whose statistics are not the previous server's"
        )
    return None


def _reset_moved(prev: ServerState, stats_reset_at: datetime) -> str | None:
    """Why a stats_reset change is not a reset inside the interval, or None when it is one."""
    if stats_reset_at < prev.stats_reset_at:
        return (
            f"the statistics' reset time went back to {stats_reset_at.isoformat()} (was "
            f"{prev.stats_reset_at.isoformat()}): these are another server's statistics, or a restored copy"
        )
    if stats_reset_at <= prev.taken_at:
        # A reset inside the interval happens after the previous snapshot: these counters hold
        # activity from before the interval.
        return (
            f"the statistics were reset at {stats_reset_at.isoformat()}, before the previous snapshot "
            f"({prev.taken_at.isoformat()}) yet after its reset time: another server's statistics"
        )
    return None


def assess(
    prev: ServerState | None, meta: instance.ServerMeta, identity: Identity, stats_reset_us: int | None
) -> Continuity:
    if prev is None:
        return Continuity()
    reason = _other_server(prev, meta, identity)
    stats_reset_at = instance.timestamp(stats_reset_us)
    full_reset = False
    if stats_reset_at is not None and prev.stats_reset_at is not None:
        if reason is None and stats_reset_at != prev.stats_reset_at:
            reason = _reset_moved(prev, stats_reset_at)
            full_reset = reason is None
    elif meta.flag("save") is False and prev.postmaster_start_at is not None:
        # PostgreSQL 13 has no stats_reset: a restart with save=off empties the statistics.
        full_reset = instance.timestamp(meta.postmaster_start_us) != prev.postmaster_start_at
    if reason is not None:
        return Continuity(baseline_reason=f"{reason}; {BASELINE}")
    # Entries of other roles that become visible (pg_read_all_stats granted, or another role behind
    # the DSN) bring their lifetime counters: only they are a baseline in this interval. The keys
    # visible before keep exact deltas, and so do the server-wide dealloc and waits, which a
    # whole-snapshot baseline would lose for nothing.
    visible_before = None
    if (
        prev.reads_all_stats is False
        and prev.role_oid is not None
        and (meta.reads_all_stats or meta.role_oid != prev.role_oid)
    ):
        visible_before = prev.role_oid
    return Continuity(full_reset=full_reset, visible_before_userid=visible_before)


def notes(meta: instance.ServerMeta) -> list[str]:
    """Status notes on what the lineage checks cannot see on this server."""
    if CONTROL_SYSTEM in meta.executable:
        return []
    return [
        "pg_control_system() is not executable by the monitoring role: a different cluster behind this "
        "address is recognised only by its statistics' reset time (GRANT EXECUTE ON FUNCTION "
        "pg_control_system() TO the monitoring role)"
    ]
