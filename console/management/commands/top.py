"""manage.py top --server NAME [--since 1h] — the costliest statements over a window, from the history."""

import json
import re
from dataclasses import asdict
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from history.public import TextStatus
from inventory.lookups import find_server
from presentation.formatting import NOT_TRACKED
from readtier import MAX_PAGE_SIZE, ORDERS, Page, StatementTotals, Window, top_statements

_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_window(text: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*", text)
    if not m:
        raise CommandError(f"invalid --since {text!r}: use a number and a unit, e.g. 30m, 1h, 7d")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def statement_json(r: StatementTotals) -> dict:
    return {
        **asdict(r),
        "total_ms": r.total_ms,
        "mean_exec_ms": r.mean_exec_ms,
        "mean_plan_ms": r.mean_plan_ms,
        "plan_share": r.plan_share,
        "rows_per_call": r.rows_per_call,
        "hit_ratio": r.hit_ratio,
    }


class Command(BaseCommand):
    help = "Print the top statements of a server over a time window."

    def add_arguments(self, parser):
        parser.add_argument("--server", required=True)
        parser.add_argument("--since", default="1h", help="window length up to now (e.g. 15m, 1h, 7d)")
        parser.add_argument("--order", default="total", choices=list(ORDERS))
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, server, since, order, limit, as_json: bool, **opts):
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise CommandError(f"--limit must be between 1 and {MAX_PAGE_SIZE}")
        length = parse_window(since)
        s = find_server(server)
        window = Window.last(length)
        top = top_statements(server_id=s.pk, window=window, order=order, page=Page(1, limit))
        if as_json:
            payload = {
                "server": s.name,
                "organization": s.organization.name,
                "start": window.start.isoformat(),
                "end": window.end.isoformat(),
                "read_start": top.read_start.isoformat(),
                "read_end": top.read_end.isoformat(),
                "order": order,
                "planning": top.planning.state,
                "intervals": top.intervals,
                "covered_s": top.planning.span_s,
                "resolutions": list(top.resolutions),
                "total_count": top.total_count,
                "statements": [statement_json(r) for r in top.rows],
            }
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(
            f"{s.name}: {len(top.rows)} of {top.total_count} statements, {top.intervals} intervals "
            f"({top.planning.span_s:.0f}s covered) since {window.start:%Y-%m-%d %H:%M:%S} UTC, ordered by {order}; "
            f"planning {top.planning.state}"
        )
        header = (
            f"{'queryid':>20} {'database':<12} {'user':<12} {'calls':>9} {'plans':>9} {'exec ms':>12} "
            f"{'plan ms':>12} {'mean ms':>9} {'rows':>9} {'shr hit':>10} {'shr read':>9} {'temp blks':>9}  query"
        )
        self.stdout.write(header)
        for r in top.rows:
            plan = NOT_TRACKED if r.plan_ms is None else f"{r.plan_ms:.2f}"
            plans = "-" if r.plans is None else str(r.plans)
            text = " ".join((r.query or f"<text {TextStatus(r.text_status).label}>").split())[:80]
            self.stdout.write(
                f"{r.queryid:>20} {r.database[:12]:<12} {r.user[:12]:<12} {r.calls:>9} {plans:>9} "
                f"{r.exec_ms:>12.2f} {plan:>12} {_num(r.mean_exec_ms, '{:.3f}'):>9} {r.rows:>9} "
                f"{r.shared_blks_hit:>10} {r.shared_blks_read:>9} {r.temp_blks:>9}  {text}"
            )
