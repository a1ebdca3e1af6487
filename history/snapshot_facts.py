"""What one snapshot read of its server, beside its statements' block: one column each of the history's
snapshot table (history.TABLES.SNAPSHOT). Declared here once; the writer (history.store.NewSnapshot),
the reader (readtier.snapshots), the model (history.models.Snapshot) and the API's snapshot
serializer derive theirs from it, so a new column is one line here and a migration."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime

BIGINT = "bigint"  # metadata: an int stored as int8
HELP = "help"  # metadata: what a reader of the API should know of the value


@dataclass(frozen=True)
class SnapshotFacts:
    taken_at: datetime
    prev_taken_at: datetime | None
    interval_s: float | None
    kind: str  # baseline | delta
    server_version_num: int
    extension_version: str
    entries: int
    entries_hidden: int
    entries_max: int | None
    changed: int
    new_entries: int
    gone_entries: int
    dealloc: int | None = field(metadata={BIGINT: True, HELP: "null before PostgreSQL 14"})
    dealloc_delta: int | None = field(metadata={BIGINT: True})
    stats_reset_at: datetime | None
    full_reset: bool
    track: str | None  # the settings it read; None: the GUC does not exist on that server
    track_utility: bool | None
    track_planning: bool | None = field(metadata={HELP: "null: the GUC does not exist"})
    save: bool | None
    sample_rate: float | None = field(metadata={HELP: "null: the GUC does not exist"})
    waits_source: str | None
    waits_samples: int | None

    @property
    def dealloc_per_s(self) -> float | None:
        if self.dealloc_delta is None or not self.interval_s:
            return None
        return self.dealloc_delta / self.interval_s


SNAPSHOT_FACTS = tuple(f.name for f in fields(SnapshotFacts))


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # datetime, float, int, str or bool
    null: bool
    metadata: Mapping[str, object]


def snapshot_columns() -> list[Column]:
    """The declaration read as columns, for those who derive a field of their own from each."""
    hints = typing.get_type_hints(SnapshotFacts)
    out = []
    for f in fields(SnapshotFacts):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        (kind,) = [a for a in args if a is not type(None)]
        out.append(Column(f.name, kind, type(None) in args, f.metadata))
    return out
