"""The built-in viewer's API: the panels of dashboards/*.json, run against the sidecar's store.

Panel SQL comes from the dashboard files on the server (clients send a dashboard uid, a panel
id, the time range and variable values, never SQL); macros and variables are expanded the
way the Grafana ClickHouse plugin expands them, and the result passes the read-only guard.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from .macros import ALL, QueryContext, expand
from .sqlguard import check_read_only

QueryFn = Callable[[str, str], bytes]
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


class ViewerError(ValueError):
    pass


def _context(req: dict[str, Any]) -> QueryContext:
    now = time.time()
    try:
        to_s = float(req.get("to") or now)
        from_s = float(req.get("from") or to_s - 86400)
        max_points = int(req.get("maxDataPoints") or 200)
    except (TypeError, ValueError):
        raise ViewerError("from/to must be unix seconds") from None
    if from_s >= to_s:
        raise ViewerError("the time range is empty")
    interval = req.get("interval") or max(math.ceil((to_s - from_s) / max(max_points, 1)), 1)
    nice = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
    interval = next((n for n in nice if n >= int(interval)), 86400)
    raw_vars = req.get("vars") or {}
    variables = {str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in raw_vars.items()}
    return QueryContext(from_s, to_s, interval, variables)


def _frame(query: QueryFn, sql: str) -> dict[str, Any]:
    stmt = check_read_only(sql)
    raw = json.loads(query(f"SELECT * FROM ({stmt}) LIMIT {MAX_ROWS}", "JSONCompact"))
    return {"columns": raw.get("meta", []), "rows": raw.get("data", [])}


def panel_data(query: QueryFn, dashboards: dict[str, dict[str, Any]], req: dict[str, Any]) -> dict[str, Any]:
    board = dashboards.get(str(req.get("uid")))
    if board is None:
        raise ViewerError(f"no dashboard {req.get('uid')!r}")
    panel = next((p for p in board["panels"] if p.get("id") == req.get("panel")), None)
    if panel is None:
        raise ViewerError(f"no panel {req.get('panel')!r} in {board['uid']}")
    ctx = _context(req)
    for v in board.get("templating", {}).get("list", []):
        ctx.variables.setdefault(v["name"], [ALL] if v.get("includeAll") else [])
    sql = expand(panel["targets"][0]["rawSql"], ctx)
    frame = _frame(query, sql)
    frame["interval_s"] = ctx.interval_s
    return frame


def variable_values(query: QueryFn, dashboards: dict[str, dict[str, Any]], req: dict[str, Any]) -> list[str]:
    board = dashboards.get(str(req.get("uid")))
    if board is None:
        raise ViewerError(f"no dashboard {req.get('uid')!r}")
    var = next((v for v in board.get("templating", {}).get("list", []) if v["name"] == req.get("name")), None)
    if var is None or var.get("type") != "query":
        raise ViewerError(f"no query variable {req.get('name')!r}")
    frame = _frame(query, expand(var["query"], _context(req)))
    return [str(r[0]) for r in frame["rows"]]
