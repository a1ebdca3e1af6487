"""The one read path of the history: the console, the advisor, the API, reports and exports read it
only through these selectors (keyword-only, typed, dataclass results). A figure shown in two
places comes from the same selector, so every surface agrees. Other apps import these names from here, never a
module of the package (tests/test_layering.py); three are renamed on the way out, so that no name here hides one
of the package's modules: windows.coverage is history_coverage, snapshots.snapshots is snapshot_page,
statement_detail.statement_detail is statement_detail_of."""

from readtier.across import MAX_PAGES, SORT_KEYS, statement_names_across, statements_across
from readtier.advisor import server_facts
from readtier.baselines import hourly_sums
from readtier.coverage import CollectionCoverage, WindowSummary, collection_coverage, window_summary
from readtier.fleet import (
    FleetRow,
    collections_behind,
    fleet_summary,
    fleet_waits,
    history_store_bytes,
    server_status,
)
from readtier.parts import NO_DATA, NOT_TRACKED
from readtier.plans import (
    LastAttempt,
    PlanChangeRow,
    PlanDetail,
    StatementPlanRow,
    StatementPlans,
    plan_changes,
    plan_changes_by_statement,
    plan_detail,
    statement_plans,
    statements_using,
)
from readtier.schema import (
    CandidateRow,
    DatabaseStatus,
    IndexRow,
    SchemaOverview,
    TableRow,
    index_candidates,
    schema_overview,
)
from readtier.series import (
    RESOLUTIONS,
    STATEMENT_RESOLUTIONS,
    ServerPoint,
    ServerSeries,
    StatementPoint,
    StatementSeries,
    server_series,
    statement_series,
)
from readtier.server import (
    CONFIG_COLUMNS,
    ConfigChange,
    ServerSettings,
    config_changes,
    recent_errors,
    server_settings,
    statement_names,
    statements_in,
    version_text,
)
from readtier.snapshots import latest_snapshot
from readtier.snapshots import snapshots as snapshot_page
from readtier.statement_detail import same_queryid_elsewhere, statement_owner
from readtier.statement_detail import statement_detail as statement_detail_of
from readtier.statements import (
    MAX_PAGE_SIZE,
    ORDERS,
    Page,
    Planning,
    StatementChange,
    StatementFilters,
    StatementTotals,
    TopStatements,
    WindowComparison,
    all_statements,
    compare_windows,
    top_statements,
)
from readtier.waits import WaitEventRow, WaitEvents, wait_events
from readtier.windows import DAY, HOUR, Window, WindowError, ceil_hour, floor_hour, history_older_than
from readtier.windows import coverage as history_coverage

__all__ = [
    "CONFIG_COLUMNS",
    "CollectionCoverage",
    "ConfigChange",
    "DAY",
    "FleetRow",
    "HOUR",
    "LastAttempt",
    "MAX_PAGES",
    "MAX_PAGE_SIZE",
    "NOT_TRACKED",
    "NO_DATA",
    "ORDERS",
    "CandidateRow",
    "DatabaseStatus",
    "IndexRow",
    "Page",
    "PlanChangeRow",
    "PlanDetail",
    "Planning",
    "RESOLUTIONS",
    "SORT_KEYS",
    "STATEMENT_RESOLUTIONS",
    "SchemaOverview",
    "ServerPoint",
    "ServerSeries",
    "ServerSettings",
    "StatementChange",
    "StatementFilters",
    "StatementPlanRow",
    "StatementPlans",
    "StatementPoint",
    "StatementSeries",
    "TableRow",
    "StatementTotals",
    "TopStatements",
    "WaitEventRow",
    "WaitEvents",
    "Window",
    "WindowComparison",
    "WindowError",
    "WindowSummary",
    "all_statements",
    "ceil_hour",
    "collection_coverage",
    "compare_windows",
    "config_changes",
    "collections_behind",
    "fleet_summary",
    "fleet_waits",
    "history_store_bytes",
    "floor_hour",
    "history_coverage",
    "history_older_than",
    "index_candidates",
    "hourly_sums",
    "latest_snapshot",
    "plan_changes",
    "plan_changes_by_statement",
    "plan_detail",
    "recent_errors",
    "same_queryid_elsewhere",
    "schema_overview",
    "server_facts",
    "server_series",
    "server_settings",
    "server_status",
    "snapshot_page",
    "statement_detail_of",
    "statement_names",
    "statement_names_across",
    "statement_owner",
    "statement_plans",
    "statements_using",
    "statement_series",
    "statements_across",
    "statements_in",
    "top_statements",
    "version_text",
    "wait_events",
    "window_summary",
]
