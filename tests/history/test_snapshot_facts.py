"""snapshot_facts: one declaration of what a snapshot reads of its server. SnapshotFacts.dealloc_per_s is the
interval's deallocations per second (None where they are unknown or the snapshot closes no interval), and
snapshot_columns reads the declaration as columns: name, type, null-ness and metadata, in declaration order.
The expected columns here are read from the annotations' text, not through typing as the module does."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from history.snapshot_facts import BIGINT, HELP, SNAPSHOT_FACTS, SnapshotFacts, snapshot_columns

T = datetime(2026, 6, 10, 8, 0, tzinfo=UTC)
TYPES = {"datetime": datetime, "float": float, "int": int, "str": str, "bool": bool}


def facts(**changes) -> SnapshotFacts:
    base = dict(
        taken_at=T,
        prev_taken_at=T - timedelta(minutes=10),
        interval_s=600.0,
        kind="delta",
        server_version_num=170004,
        extension_version="1.11",
        entries=120,
        entries_hidden=0,
        entries_max=5000,
        changed=30,
        new_entries=2,
        gone_entries=1,
        dealloc=40,
        dealloc_delta=30,
        stats_reset_at=None,
        full_reset=False,
        track="top",
        track_utility=True,
        track_planning=False,
        save=True,
        sample_rate=None,
        waits_source="pg_stat_activity",
        waits_samples=10,
    )
    return SnapshotFacts(**{**base, **changes})


def test_deallocations_per_second_are_the_intervals_delta_over_its_length():
    assert facts(dealloc_delta=30, interval_s=600.0).dealloc_per_s == 0.05
    assert facts(dealloc_delta=0, interval_s=2400.0).dealloc_per_s == 0.0  # known: none, not unknown


@pytest.mark.parametrize(
    "changes",
    [
        {"dealloc": None, "dealloc_delta": None},  # before PostgreSQL 14: no pg_stat_statements_info
        {"kind": "baseline", "prev_taken_at": None, "interval_s": None, "dealloc_delta": None},
        {"interval_s": None},  # a delta without a length cannot be a rate
        {"interval_s": 0.0},
    ],
)
def test_deallocations_per_second_are_unknown_without_a_delta_or_an_interval(changes):
    assert facts(**changes).dealloc_per_s is None


def test_facts_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts().entries = 1


def test_columns_follow_the_declaration_in_order():
    declared = [f.name for f in dataclasses.fields(SnapshotFacts)]
    assert [c.name for c in snapshot_columns()] == declared == list(SNAPSHOT_FACTS)
    assert len(declared) == len(set(declared)) == 23


def test_each_column_has_the_declared_type_and_is_nullable_exactly_where_none_is_allowed():
    annotations = {f.name: f.type for f in dataclasses.fields(SnapshotFacts)}  # text: postponed annotations
    for column in snapshot_columns():
        parts = [p.strip() for p in annotations[column.name].split("|")]
        assert column.null == ("None" in parts), column.name
        (kind,) = [p for p in parts if p != "None"]
        assert column.type is TYPES[kind], column.name


def test_some_columns_by_name():
    by = {c.name: c for c in snapshot_columns()}
    assert (by["taken_at"].type, by["taken_at"].null) == (datetime, False)
    assert (by["prev_taken_at"].type, by["prev_taken_at"].null) == (datetime, True)
    assert (by["full_reset"].type, by["full_reset"].null) == (bool, False)
    assert (by["sample_rate"].type, by["sample_rate"].null) == (float, True)
    assert (by["kind"].type, by["kind"].null) == (str, False)
    assert (by["entries_max"].type, by["entries_max"].null) == (int, True)


def test_metadata_is_carried_over_as_declared_and_empty_elsewhere():
    by = {c.name: c for c in snapshot_columns()}
    assert dict(by["dealloc"].metadata) == {BIGINT: True, HELP: "null before PostgreSQL 14"}
    assert dict(by["dealloc_delta"].metadata) == {BIGINT: True}
    assert dict(by["track_planning"].metadata) == {HELP: "null: the GUC does not exist"}
    assert dict(by["sample_rate"].metadata) == {HELP: "null: the GUC does not exist"}
    described = {"dealloc", "dealloc_delta", "track_planning", "sample_rate"}
    assert all(not c.metadata for c in snapshot_columns() if c.name not in described)
