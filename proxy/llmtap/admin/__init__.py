"""Admin: the HTTP server beside the proxy (metrics, health, read-only SQL, the viewer).

:mod:`.server` (the routes) over :mod:`.httpd` (a bounded HTTP/1.1 server on its own loop),
:mod:`.auth` (token, session cookie, Host/Origin checks), :mod:`.reads` (every query run for
someone else: guarded, bound, limited, cancellable) with :mod:`.sqlguard` (the engine-backed
read-only check) and :mod:`.sqlfunctions` (the engine's functions, classified), :mod:`.viewer`
(+ ``static/``: the built-in viewer rendering the Grafana dashboards), :mod:`.macros` (Grafana
macro expansion, values as bound parameters), :mod:`.queries` (the analysis SQL shared by the
alert rules, ``report`` and ``check-cost``).
"""

from __future__ import annotations

from .auth import AdminAuth, install_token, read_install_token
from .reads import Reads
from .server import AdminServer, AdminState
from .sqlguard import QueryRefused

__all__ = ["AdminAuth", "AdminServer", "AdminState", "QueryRefused", "Reads", "install_token", "read_install_token"]
