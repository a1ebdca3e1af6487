"""What other apps take from the readings of monitored servers (tests/test_layering.py holds them to it): the
connection check (its report, its queue and state, the monitoring role's SQL), the collection's tasks the API
and pages start (and when beat last had the collections dispatched), a collection error as a DBA reads it (a
database's too), and the redaction of query texts that exports apply again (collectors.redact.redact, as
redact_text). The advisor's rules, which import no Django, take quote_ident from collectors.sql_names.

Not imported by the app's own __init__: it imports models, which Django loads after the apps."""

from collectors.connection_check import MONITORING_ROLE_SQL, CheckFinding, CheckReport
from collectors.errors import shown
from collectors.queued_checks import CheckState, check_queue, check_state
from collectors.redact import redact as redact_text
from collectors.schema.reading import database_error
from collectors.tasks import check_enqueue, collect_tracked, last_dispatched_at, plan_soon, plan_tracked, tracked

__all__ = [
    "MONITORING_ROLE_SQL",
    "CheckFinding",
    "CheckReport",
    "CheckState",
    "check_enqueue",
    "check_queue",
    "check_state",
    "collect_tracked",
    "database_error",
    "last_dispatched_at",
    "plan_soon",
    "plan_tracked",
    "redact_text",
    "shown",
    "tracked",
]
