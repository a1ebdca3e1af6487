"""advisor.rules._common: the spinlock-cliff model (a per-vCPU rate, halved with track_planning), the headroom of
the hottest queryid under it, and the note a partial view adds — each None when an input is unknown; and the DDL
that drops an index, whatever its database is named."""

from dataclasses import replace

import pytest

from advisor.evidence import IndexFact
from advisor.rules._common import cliff_calls_per_s, drop_index, headroom, partial_note
from advisor.thresholds import CLIFF_CALLS_PER_S, CLIFF_CPUS
from tests.advisor.rules.evidence import TH, ev


def test_the_cliff_is_the_public_point_on_its_own_machine():
    """The calibration point: ≈400k calls/s on 192 vCPUs, ≈200k with track_planning."""
    e = ev(cpu_count=CLIFF_CPUS)
    assert cliff_calls_per_s(e, TH, track_planning=False) == pytest.approx(CLIFF_CALLS_PER_S)
    assert cliff_calls_per_s(e, TH, track_planning=True) == pytest.approx(CLIFF_CALLS_PER_S / 2)


@pytest.mark.parametrize("cpus", [1, 2, 8, 64])
def test_the_cliff_scales_with_the_vcpus(cpus):
    cliff = cliff_calls_per_s(ev(cpu_count=cpus), TH, track_planning=False)
    assert cliff == pytest.approx(TH.cliff_calls_per_s_per_cpu * cpus)
    assert cliff_calls_per_s(ev(cpu_count=cpus), TH, track_planning=True) == pytest.approx(cliff / 2)


@pytest.mark.parametrize("cpus", [None, 0])
def test_no_cliff_without_a_cpu_count(cpus):
    assert cliff_calls_per_s(ev(cpu_count=cpus), TH, track_planning=False) is None
    assert headroom(ev(cpu_count=cpus, hottest_calls_per_s=100.0), TH, track_planning=False) is None


def test_an_organizations_thresholds_move_the_cliff():
    th = replace(TH, cliff_calls_per_s_per_cpu=1000.0)
    assert cliff_calls_per_s(ev(cpu_count=4), th, track_planning=True) == pytest.approx(2000.0)


def test_headroom_is_the_cliff_over_the_hottest_rate():
    e = ev(cpu_count=8, hottest_calls_per_s=1000.0)
    per_cpu = TH.cliff_calls_per_s_per_cpu
    assert headroom(e, TH, track_planning=False) == pytest.approx(8 * per_cpu / 1000)
    assert headroom(e, TH, track_planning=True) == pytest.approx(4 * per_cpu / 1000)


def test_headroom_against_the_safe_and_near_thresholds():
    """At a quarter of the cliff the headroom is exactly the safe multiple; turning track_planning on halves it."""
    cliff = cliff_calls_per_s(ev(cpu_count=16), TH, track_planning=False)
    e = ev(cpu_count=16, hottest_calls_per_s=cliff / TH.cliff_safe_headroom)
    assert headroom(e, TH, track_planning=False) == pytest.approx(TH.cliff_safe_headroom)
    assert headroom(e, TH, track_planning=True) == pytest.approx(TH.cliff_safe_headroom / 2)
    assert headroom(e, TH, track_planning=True) >= TH.cliff_near_headroom


@pytest.mark.parametrize("rate", [None, 0.0])
def test_no_headroom_without_a_hottest_rate(rate):
    assert headroom(ev(cpu_count=8, hottest_calls_per_s=rate), TH, track_planning=False) is None


def test_the_partial_note_only_where_the_role_cannot_see_everything():
    assert partial_note(ev()) == ""
    note = partial_note(ev(sees_all_statements=False))
    assert note.startswith(" ") and "pg_read_all_stats" in note and "partial" in note


def test_the_database_a_drop_runs_in_is_escaped_in_its_comment_and_the_index_quoted():
    index = IndexFact(
        database="shop\nCREATE ROLE injected SUPERUSER;--",
        schema_name="s\r",
        name='ix"*/',
        table_name="t",
        table_relid=1,
        definition="",
    )
    assert drop_index(index) == (
        r'-- in database "shop\nCREATE ROLE injected SUPERUSER;--" (DROP INDEX CONCURRENTLY runs outside a '
        "transaction block)\n"
        'DROP INDEX CONCURRENTLY "s\r"."ix""*/";'
    )
