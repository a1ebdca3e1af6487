"""Rule 7 (planning-dominated statements) against constructed evidence: the plan share above half and material time."""

from __future__ import annotations

from advisor.evidence import Settings, StatementFact
from advisor.rules import r7_planning
from tests.advisor.rules.evidence import TH, ev


def test_rule7_plan_share_and_material_time() -> None:
    heavy = StatementFact(
        queryid=7, query="SELECT ... JOIN ...", calls=100, total_exec_ms=400, total_plan_ms=600, statement_id=42
    )
    edge = StatementFact(queryid=8, query="x", total_exec_ms=500, total_plan_ms=500)  # exactly 50%: not above
    small = StatementFact(queryid=9, query="y", total_exec_ms=1, total_plan_ms=9)  # 10 ms of 100,000: not material
    e = ev(settings=Settings(track_planning=True), server_db_time_ms=100_000, statements=(heavy, edge, small))
    (r,) = r7_planning.check(e, TH)
    assert r.subject == "statement:42" and "60%" in r.title
    assert r7_planning.check(ev(server_db_time_ms=100_000, statements=(heavy,)), TH) == []  # track_planning off
