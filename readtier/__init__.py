"""The one read path of the history: the console, the advisor, the API, reports and exports read it
only through these selectors (keyword-only, typed, dataclass results). A figure shown in two
places comes from the same selector, so every surface agrees."""

from readtier.fleet import FleetRow, fleet_summary
from readtier.series import (
    ServerPoint,
    ServerSeries,
    StatementPoint,
    StatementSeries,
    server_series,
    statement_series,
)
from readtier.statements import (
    ORDERS,
    Page,
    Planning,
    StatementChange,
    StatementFilters,
    StatementTotals,
    TopStatements,
    WindowComparison,
    compare_windows,
    top_statements,
)
from readtier.waits import WaitEventRow, WaitEvents, wait_events
from readtier.windows import Window, WindowError

__all__ = [
    "ORDERS",
    "FleetRow",
    "Page",
    "Planning",
    "ServerPoint",
    "ServerSeries",
    "StatementChange",
    "StatementFilters",
    "StatementPoint",
    "StatementSeries",
    "StatementTotals",
    "TopStatements",
    "WaitEventRow",
    "WaitEvents",
    "Window",
    "WindowComparison",
    "WindowError",
    "compare_windows",
    "fleet_summary",
    "server_series",
    "statement_series",
    "top_statements",
    "wait_events",
]
