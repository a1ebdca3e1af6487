"""server_facts: what the advisor reads of a window's raw snapshots (delta snapshots, keys gone between two
snapshots, the entry peak, statistics resets first read in the window, full resets) and of the server (mean
query text length, whether the role sees every statement). Shown on a history built here whose events are known:
three keys disappear at 09:45 and the statistics are reset in the interval ending at 10:45."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bench import synthetic
from collectors.services import server_collect
from collectors.statements import pgss
from console.services import server_delete
from readtier import Window
from readtier.advisor import server_facts

pytestmark = pytest.mark.django_db

N, GONE, STEP = 8, 3, timedelta(minutes=10)
START, END = datetime(2026, 6, 14, 8, 5, tzinfo=UTC), datetime(2026, 6, 14, 12, 0, tzinfo=UTC)
DROP_AT, RESET_AT = datetime(2026, 6, 14, 9, 45, tzinfo=UTC), datetime(2026, 6, 14, 10, 45, tzinfo=UTC)
RESET = RESET_AT - timedelta(minutes=4)  # pg_stat_statements_info.stats_reset, inside the interval
TAKEN = [START + k * STEP for k in range(24) if START + k * STEP < END]


class Churning(synthetic.SyntheticServer):
    def step(self) -> None:
        if self.current is not None and self.taken_at + STEP == RESET_AT:
            self.counters[:] = 0  # pg_stat_statements_reset(): every counter starts again
        super().step()
        if self.taken_at >= DROP_AT:
            self.current = self.current.take(np.arange(N - GONE))  # evicted, never back


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        server, synth = synthetic.register("facts-churn"), Churning(n=N, change_fraction=0.3, start=START, step_s=600)
        with synthetic.reading_from(synth):
            since = int(synth.stats_since[0])
            pgss.read_info = lambda conn, m: (0, int(RESET.timestamp() * 1e6) if synth.taken_at >= RESET_AT else since)
            synth.step()
            assert server_collect(server_id=server.pk).ok
            while synth.taken_at + STEP < END:
                synth.step()
                assert server_collect(server_id=server.pk).ok
        yield server, synth
        server_delete(server=server)


def test_the_whole_history_holds_the_gone_keys_the_reset_and_the_peak(history):
    server, synth = history
    f = server_facts(server_id=server.pk, window=Window(START, END))
    assert (f.snapshots, f.read_from) == (len(TAKEN) - 1, START)  # every snapshot but the baseline is a delta
    assert (f.gone_entries, f.entries_peak, f.full_resets, f.stats_resets) == (GONE, N, 1, [RESET])
    lengths = [len(t.encode()) for t in synth.texts.values()]
    assert f.mean_text_bytes == pytest.approx(sum(lengths) / len(lengths)) and f.reads_all_stats is True


def test_a_window_counts_only_what_its_snapshots_read(history):
    server, _ = history
    after = server_facts(server_id=server.pk, window=Window(DROP_AT + STEP, END))
    assert (after.gone_entries, after.entries_peak, after.full_resets) == (0, N - GONE, 1)
    assert after.snapshots == len([t for t in TAKEN if t >= DROP_AT + STEP]) and after.read_from == DROP_AT + STEP
    at = server_facts(server_id=server.pk, window=Window(DROP_AT, DROP_AT + timedelta(minutes=1)))
    assert (at.snapshots, at.gone_entries, at.entries_peak, at.full_resets) == (1, GONE, N - GONE, 0)


def test_a_reset_is_listed_only_in_a_window_that_first_reads_it(history):
    server, _ = history
    first = server_facts(server_id=server.pk, window=Window(RESET, RESET_AT + timedelta(seconds=1)))
    assert (first.stats_resets, first.full_resets) == ([RESET], 1)
    later = server_facts(server_id=server.pk, window=Window(RESET_AT + timedelta(seconds=1), END))
    assert (later.stats_resets, later.full_resets) == ([], 0)
    before = server_facts(server_id=server.pk, window=Window(START, RESET_AT))
    assert (before.stats_resets, before.full_resets) == ([], 0)  # the baseline's reset is from before the window


def test_a_window_between_snapshots_reads_none_but_the_server_facts(history):
    server, _ = history
    f = server_facts(server_id=server.pk, window=Window(START + timedelta(minutes=1), START + timedelta(minutes=9)))
    assert (f.snapshots, f.read_from, f.gone_entries, f.entries_peak, f.stats_resets) == (0, None, 0, None, [])
    assert f.mean_text_bytes is not None and f.reads_all_stats is True


def test_a_server_never_collected_has_no_facts():
    never = synthetic.register("facts-never")
    f = server_facts(server_id=never.pk, window=Window(START, END))
    assert (f.snapshots, f.read_from, f.gone_entries, f.entries_peak) == (0, None, 0, None)
    assert (f.stats_resets, f.full_resets, f.mean_text_bytes, f.reads_all_stats) == ([], 0, None, None)
