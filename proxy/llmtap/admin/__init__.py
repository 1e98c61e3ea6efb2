"""Admin: the HTTP server beside the proxy (metrics, health, read-only SQL, the viewer).

:mod:`.server` (HTTP), :mod:`.viewer` (+ ``static/``: the built-in viewer rendering the
Grafana dashboards), :mod:`.sqlguard` (read-only SQL), :mod:`.macros` (Grafana macro
expansion), :mod:`.queries` (the analysis SQL shared by the alert rules, ``report`` and
``check-cost``).
"""

from __future__ import annotations

from .server import AdminServer, AdminState, run_sql
from .sqlguard import ReadOnlyViolation, check_read_only

__all__ = ["AdminServer", "AdminState", "ReadOnlyViolation", "check_read_only", "run_sql"]
