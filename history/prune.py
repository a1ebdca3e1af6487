"""The statement dimension pruned of statements nothing refers to any more.

A statement (one pg_stat_statements key of one server) is referenced by the current statement state while
its entry is there, by the raw snapshots' blocks for RAW_RETENTION_DAYS, and by the hourly and daily tiers
while they keep the hours and days it was active in. A server whose statements come and go (generated
statements, a deallocation storm) would otherwise keep every key it ever saw. Pruned: statements gone for
longer than raw retention (a day of margin: the raw blocks of their last hours are gone), out of the
state, and in no tier. Each server under its collection lock, so that a snapshot never books a statement
being deleted; a server being collected is left for the next run. The plans of pruned statements go with them
(history/plans.py).
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from history import plans
from history.store import LOCK_NAMESPACE
from history.tables import TABLES

SPEND_KEPT_DAYS = 8
_S, _STATE = TABLES.STATEMENT.name, TABLES.STATEMENT_STATE.name
_HOURLY, _DAILY = TABLES.STATEMENT_HOURLY.name, TABLES.STATEMENT_DAILY.name
PRUNE_SQL = f"""
DELETE FROM {_S} s
WHERE s.server_id = %(server)s AND s.gone_at < %(cutoff)s
  AND NOT EXISTS (SELECT FROM {_STATE} t WHERE t.server_id = s.server_id AND t.statement_id = s.id)
  AND NOT EXISTS (SELECT FROM {_HOURLY} h WHERE h.server_id = s.server_id AND h.statement_id = s.id)
  AND NOT EXISTS (SELECT FROM {_DAILY} d WHERE d.server_id = s.server_id AND d.statement_id = s.id)
"""


def statements_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Delete the statements nothing refers to any more: {"pruned": n, "busy": servers skipped}."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.HISTORY["RAW_RETENTION_DAYS"] + 1)
    with connection.cursor() as cur:
        cur.execute(f"SELECT DISTINCT server_id FROM {_S} WHERE gone_at < %s", [cutoff])
        servers = [server_id for (server_id,) in cur.fetchall()]
    pruned = busy = 0
    for server_id in servers:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, server_id])
            if not cur.fetchone()[0]:
                busy += 1
                continue
            cur.execute(PRUNE_SQL, {"server": server_id, "cutoff": cutoff})
            pruned += cur.rowcount
            plans.prune_orphans(server_id)  # a pruned statement's plans go with it
    # The plans' budget reads the current hour and day; a week of hours is kept for whoever reads their cost.
    spend = plans.spend_prune((now or timezone.now()) - timedelta(days=SPEND_KEPT_DAYS))
    return {"pruned": pruned, "busy": busy, "plan_spend_pruned": spend}
