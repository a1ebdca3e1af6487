"""The settings reading: the server and its pg_stat_statements settings, first in every snapshot (instance.py).

Its values are the snapshot's frame (its time, the server's version) and facts kept as observed with each
snapshot, so that the advisor and the pages know the settings in force at every interval.
"""

from collectors.settings import instance
from collectors.unit import Collection, Failure, Reading, Sql
from history.public import TABLES


def read(snap: Collection) -> instance.ServerMeta:
    snap.meta = instance.read_meta(snap.conn, instance.FUNCTIONS)
    return snap.meta


def compute(snap: Collection, meta: instance.ServerMeta) -> None:
    sample_rate, max_setting = meta.setting("sample_rate"), meta.setting("max")
    snap.facts |= {
        "server_version_num": meta.server_version_num,
        "extension_version": meta.extension_version,
        "entries_max": int(max_setting) if max_setting else None,
        "track": meta.setting("track"),
        "track_utility": meta.flag("track_utility"),
        "track_planning": meta.flag("track_planning"),
        "save": meta.flag("save"),
        "sample_rate": float(sample_rate) if sample_rate is not None else None,
    }
    snap.state |= {
        "postmaster_start_at": instance.timestamp(meta.postmaster_start_us),
        "reads_all_stats": meta.reads_all_stats,
        "role_oid": meta.role_oid,
    }


READING = Reading(
    name="settings",
    what="the server's version and pg_stat_statements' settings",
    sql=Sql(((instance.MIN_SERVER_VERSION, instance.META_SQL),)),
    tables=(TABLES.SNAPSHOT, TABLES.SERVER_STATE),
    delta_rules="none: kept as observed with each snapshot (a setting changed shows from the snapshot that saw it)",
    failure=Failure.SNAPSHOT,
    read=read,
    compute=compute,
)
