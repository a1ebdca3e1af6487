"""The history's models: a snapshot's fields are derived from the one declaration of its facts
(history.snapshot_facts), each with the type and the null-ness the declaration gives it."""

from __future__ import annotations

from django.db import models

from history.models import Snapshot
from history.snapshot_facts import BIGINT, snapshot_columns


def test_a_snapshot_has_a_field_per_declared_fact_of_its_type():
    columns = snapshot_columns()
    assert len(columns) >= 10
    for column in columns:
        field = Snapshot._meta.get_field(column.name)
        assert field.null == column.null, column.name
        if column.metadata.get(BIGINT):
            assert isinstance(field, models.BigIntegerField), column.name
        expected = {float: models.FloatField, bool: models.BooleanField, str: models.TextField}.get(column.type)
        if expected is not None:
            assert isinstance(field, expected), column.name


def test_a_count_that_fits_stays_a_four_byte_integer_and_a_large_one_is_eight():
    kinds = {c.name: type(Snapshot._meta.get_field(c.name)) for c in snapshot_columns() if c.type is int}
    assert kinds["dealloc"] is models.BigIntegerField
    assert models.IntegerField in set(kinds.values())
