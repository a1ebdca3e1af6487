"""manage.py top --server NAME [--since 1h] — the costliest statements over a window, from the history."""
import json
import re
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from collectors.management.commands.collect import find_server
from collectors.selectors import ORDERS, top_statements

_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_window(text: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*", text)
    if not m:
        raise CommandError(f"invalid --since {text!r}: use a number and a unit, e.g. 30m, 1h, 7d")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


class Command(BaseCommand):
    help = "Print the top statements of a server over a time window."

    def add_arguments(self, parser):
        parser.add_argument("--server", required=True)
        parser.add_argument("--since", default="1h", help="window length up to now (e.g. 15m, 1h, 7d)")
        parser.add_argument("--order", default="total", choices=list(ORDERS))
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, server, since, order, limit, as_json: bool, **opts):
        if limit < 1:
            raise CommandError("--limit must be at least 1")
        window = parse_window(since)
        s = find_server(server)
        end = timezone.now()
        start = end - window
        totals, rows = top_statements(s.pk, start, end, order=order, limit=limit)
        if as_json:
            payload = {
                "server": s.name,
                "organization": s.organization.name,
                "start": start.isoformat(),
                "end": end.isoformat(),
                "order": order,
                "planning": totals.planning,
                "intervals": totals.intervals,
                "covered_s": totals.span_s,
                "dealloc": totals.dealloc_delta,
                "resolutions": totals.resolutions,
                "statements": [r.__dict__ for r in rows],
            }
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(
            f"{s.name}: {len(rows)} statements, {totals.intervals} intervals ({totals.span_s:.0f}s covered) "
            f"since {start:%Y-%m-%d %H:%M:%S} UTC, ordered by {order}; planning {totals.planning}"
        )
        header = (
            f"{'queryid':>20} {'database':<12} {'user':<12} {'calls':>9} {'plans':>9} {'exec ms':>12} "
            f"{'plan ms':>12} {'mean ms':>9} {'rows':>9} {'shr hit':>10} {'shr read':>9} {'temp blks':>9}  query"
        )
        self.stdout.write(header)
        for r in rows:
            plan = "not tracked" if r.total_plan_ms is None else f"{r.total_plan_ms:.2f}"
            plans = "-" if r.plans is None else str(r.plans)
            text = " ".join((r.query or "<text not visible>").split())[:80]
            self.stdout.write(
                f"{r.queryid:>20} {r.database[:12]:<12} {r.user[:12]:<12} {r.calls:>9} {plans:>9} "
                f"{r.total_exec_ms:>12.2f} {plan:>12} {_num(r.mean_exec_ms, '{:.3f}'):>9} {r.rows:>9} "
                f"{r.shared_blks_hit:>10} {r.shared_blks_read:>9} {r.temp_blks_read + r.temp_blks_written:>9}  {text}"
            )
