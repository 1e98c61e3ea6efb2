"""The built-in viewer's API: the panels of dashboards/*.json, run against the sidecar's store.

Panel SQL comes from the dashboard files on the server (clients send a dashboard uid, a panel
id, the time range and variable values, never SQL); macros are expanded the way the Grafana
ClickHouse plugin expands them, variable values are bound as query parameters (never spliced
into the SQL), and the result runs through the same guarded read path as ``/api/sql``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import LlmtapError
from .macros import ALL, Expanded, MacroError, QueryContext, expand_query

log = logging.getLogger(__name__)

# (sql, format, params) → the result in that format, through the guarded read path.
QueryFn = Callable[[str, str, dict[str, str]], bytes]
STATIC = Path(__file__).parent / "static"
MAX_ROWS = 5000


def dashboards_dir() -> Path:
    try:
        packaged = resources.files("llmtap").joinpath("dashboards_json")
        if packaged.is_dir():
            return Path(str(packaged))
    except (FileNotFoundError, ModuleNotFoundError):
        pass
    return Path(__file__).resolve().parents[3] / "dashboards" / "json"


ORDER = (
    "llmtap-overview",
    "llmtap-latency",
    "llmtap-cost",
    "llmtap-errors",
    "llmtap-agents",
    "llmtap-calls",
    "llmtap-trace",
)


def load_dashboards() -> dict[str, dict[str, Any]]:
    boards = [json.loads(p.read_text()) for p in dashboards_dir().glob("*.json")]
    boards.sort(key=lambda d: (ORDER.index(d["uid"]) if d["uid"] in ORDER else len(ORDER), d["title"]))
    return {d["uid"]: d for d in boards}


class ViewerError(LlmtapError, ValueError):
    pass


def _declared(board: dict[str, Any]) -> list[dict[str, Any]]:
    return list(board.get("templating", {}).get("list", []))


def _context(req: dict[str, Any], board: dict[str, Any]) -> QueryContext:
    now = time.time()
    try:
        to_s = float(req.get("to") or now)
        from_s = float(req.get("from") or to_s - 86400)
        max_points = int(req.get("maxDataPoints") or 200)
    except (TypeError, ValueError):
        raise ViewerError("from/to must be unix seconds") from None
    if from_s >= to_s:
        raise ViewerError("the time range is empty")
    if not all(math.isfinite(x) for x in (from_s, to_s)):
        raise ViewerError("from/to must be unix seconds")
    try:
        interval = int(req.get("interval") or max(math.ceil((to_s - from_s) / max(max_points, 1)), 1))
    except (TypeError, ValueError):
        raise ViewerError("interval must be seconds") from None
    nice = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
    interval = next((n for n in nice if n >= interval), 86400)
    raw_vars = req.get("vars") or {}
    if not isinstance(raw_vars, dict):
        raise ViewerError("vars must be an object")
    variables: dict[str, list[str]] = {}
    for v in _declared(board):  # only the board's own variables; anything else is ignored
        name = v["name"]
        given = raw_vars.get(name)
        if given is None:
            variables[name] = [ALL] if v.get("includeAll") else []
            continue
        values = given if isinstance(given, list) else [given]
        if not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in values):
            raise ViewerError(f"values of {name} must be strings")
        variables[name] = [str(x) for x in values]
    return QueryContext(from_s, to_s, interval, variables)


def _expand(sql: str, ctx: QueryContext) -> Expanded:
    try:
        return expand_query(sql, ctx)
    except MacroError as e:
        raise ViewerError(str(e)) from None


def _frame(query: QueryFn, x: Expanded) -> dict[str, Any]:
    sql = f"SELECT * FROM ({x.sql}) LIMIT {MAX_ROWS}"
    try:
        raw = json.loads(query(sql, "JSONCompact", x.params))
    except json.JSONDecodeError as e:  # not one JSON document (output another query left?): asked once more
        log.warning("viewer: a panel's answer was not one JSON document (%s); asked again", e)
        raw = json.loads(query(sql, "JSONCompact", x.params))
    return {"columns": raw.get("meta", []), "rows": raw.get("data", [])}


def panel_data(query: QueryFn, dashboards: dict[str, dict[str, Any]], req: dict[str, Any]) -> dict[str, Any]:
    board = dashboards.get(str(req.get("uid")))
    if board is None:
        raise ViewerError(f"no dashboard {req.get('uid')!r}")
    panel = next((p for p in board["panels"] if p.get("id") == req.get("panel")), None)
    if panel is None:
        raise ViewerError(f"no panel {req.get('panel')!r} in {board['uid']}")
    ctx = _context(req, board)
    frame = _frame(query, _expand(panel["targets"][0]["rawSql"], ctx))
    frame["interval_s"] = ctx.interval_s
    return frame


def variable_values(query: QueryFn, dashboards: dict[str, dict[str, Any]], req: dict[str, Any]) -> list[str]:
    board = dashboards.get(str(req.get("uid")))
    if board is None:
        raise ViewerError(f"no dashboard {req.get('uid')!r}")
    var = next((v for v in _declared(board) if v["name"] == req.get("name")), None)
    if var is None or var.get("type") != "query":
        raise ViewerError(f"no query variable {req.get('name')!r}")
    frame = _frame(query, _expand(var["query"], _context(req, board)))
    return [str(r[0]) for r in frame["rows"]]
