"""Building blocks of the llmtap dashboards: the datasource, the shared filters, and :class:`Board`."""

from __future__ import annotations

from typing import Any

DS = {"type": "grafana-clickhouse-datasource", "uid": "clickhouse"}
PLUGIN_VERSION = "4.20.0"
F = (
    "$__conditionalAll(service IN (${service:singlequote}), $service) "
    "AND $__conditionalAll(provider IN (${provider:singlequote}), $provider) "
    "AND $__conditionalAll(request_model IN (${model:singlequote}), $model) "
    "AND $__conditionalAll(feature IN (${feature:singlequote}), $feature)"
)
W = f"$__timeFilter(timestamp) AND {F}"
T = "$__timeInterval(timestamp) AS time"


def query_var(name: str, col: str, label: str = "") -> dict[str, Any]:
    """A multi-value variable listing the column's values in the time range (with "All")."""
    return {
        "name": name,
        "label": label or name,
        "type": "query",
        "datasource": DS,
        "query": f"SELECT DISTINCT {col} FROM llm_calls WHERE $__timeFilter(timestamp) AND {col} != '' ORDER BY 1",
        "definition": f"SELECT DISTINCT {col} FROM llm_calls",
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def custom_var(name: str, values: list[str], label: str = "", include_all: bool = True) -> dict[str, Any]:
    current = "$__all" if include_all else values[0]
    return {
        "name": name,
        "label": label or name,
        "type": "custom",
        "query": ",".join(values),
        "multi": include_all,
        "includeAll": include_all,
        "options": [{"text": v, "value": v, "selected": v == current} for v in values],
        "current": {"selected": True, "text": ["All"] if include_all else values[0], "value": [current]},
    }


def textbox_var(name: str, label: str = "") -> dict[str, Any]:
    """Free text; an empty box filters nothing (write conditions as ``(${v:singlequote} = '' OR …)``)."""
    return {"name": name, "label": label or name, "type": "textbox", "query": "", "current": {"text": "", "value": ""}}


# The calls explorer's own filters: choices (outcome, error type, tenant) and free text (user, session, a request,
# response or trace id, a search in the error and the ids). An empty text box filters nothing.
EXPLORER = (
    "$__conditionalAll(outcome IN (${outcome:singlequote}), $outcome) "
    "AND $__conditionalAll(error_type IN (${error_type:singlequote}), $error_type) "
    "AND $__conditionalAll(tenant IN (${tenant:singlequote}), $tenant) "
    "AND (${user:singlequote} = '' OR user_id = ${user:singlequote}) "
    "AND (${session:singlequote} = '' OR session_id = ${session:singlequote}) "
    "AND (${request_id:singlequote} = '' OR ${request_id:singlequote} IN (request_id, response_id, trace_id)) "
    "AND (${search:singlequote} = '' OR positionCaseInsensitive(concat(error_message, ' ', error_code, ' ', "
    "request_id, ' ', response_id, ' ', user_id, ' ', session_id, ' ', trace_id), ${search:singlequote}) > 0)"
)
EXPLORER_VARS = [
    custom_var("outcome", ["ok", "error", "cancelled"]),
    query_var("error_type", "error_type", "error type"),
    query_var("tenant", "tenant"),
    textbox_var("user"),
    textbox_var("session"),
    textbox_var("request_id", "request id"),
    textbox_var("search"),
]


class Board:
    def __init__(self, uid: str, title: str, tags: list[str], variables: list[dict[str, Any]] | None = None) -> None:
        self.uid, self.title, self.tags = uid, title, tags
        self.extra_variables = variables or []
        self.panels: list[dict[str, Any]] = []
        self.x = self.y = 0
        self.row_h = 0

    def _place(self, w: int, h: int) -> dict[str, int]:
        if self.x + w > 24:
            self.x, self.y = 0, self.y + self.row_h
            self.row_h = 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def panel(
        self,
        kind: str,
        title: str,
        sql: str,
        *,
        fmt: int,
        w: int = 12,
        h: int = 8,
        unit: str = "short",
        options: dict[str, Any] | None = None,
        field: dict[str, Any] | None = None,
        description: str = "",
        links: list[dict[str, Any]] | None = None,
    ) -> None:
        defaults: dict[str, Any] = {"unit": unit, **(field or {})}
        if links:
            defaults["links"] = links
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": kind,
                "title": title,
                "description": description,
                "gridPos": self._place(w, h),
                "datasource": DS,
                "targets": [
                    {
                        "refId": "A",
                        "datasource": DS,
                        "editorType": "sql",
                        "format": fmt,
                        "queryType": "timeseries" if fmt == 0 else "table",
                        "rawSql": sql.strip(),
                        "pluginVersion": PLUGIN_VERSION,
                    }
                ],
                "fieldConfig": {"defaults": defaults, "overrides": []},
                "options": options or {},
            }
        )

    def ts(self, title: str, sql: str, unit: str = "short", **kw: Any) -> None:
        self.panel(
            "timeseries",
            title,
            sql,
            fmt=0,
            unit=unit,
            options={
                "legend": {"displayMode": "table", "placement": "right", "calcs": ["mean", "max"]},
                "tooltip": {"mode": "multi"},
            },
            **kw,
        )

    def stat(self, title: str, sql: str, unit: str = "short", **kw: Any) -> None:
        self.panel(
            "stat",
            title,
            sql,
            fmt=1,
            w=6,
            h=4,
            unit=unit,
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "value",
                "graphMode": "none",
            },
            **kw,
        )

    def table(self, title: str, sql: str, **kw: Any) -> None:
        self.panel("table", title, sql, fmt=1, options={"showHeader": True, "cellHeight": "sm"}, **kw)

    def bar(self, title: str, sql: str, unit: str = "short", **kw: Any) -> None:
        self.panel(
            "barchart",
            title,
            sql,
            fmt=1,
            unit=unit,
            options={"orientation": "horizontal", "showValue": "auto", "legend": {"showLegend": False}},
            **kw,
        )

    def heatmap(self, title: str, sql: str, **kw: Any) -> None:
        self.panel(
            "heatmap",
            title,
            sql,
            fmt=0,
            unit="ms",
            options={
                "calculate": False,
                "yAxis": {"unit": "ms"},
                "cellGap": 1,
                "color": {"mode": "scheme", "scheme": "Oranges"},
            },
            **kw,
        )

    def json(self) -> dict[str, Any]:
        variables = [
            query_var(name, col)
            for name, col in (
                ("service", "service"),
                ("provider", "provider"),
                ("model", "request_model"),
                ("feature", "feature"),
            )
        ]
        variables += self.extra_variables
        return {
            "id": None,
            "uid": self.uid,
            "title": self.title,
            "tags": ["llmtap", *self.tags],
            "timezone": "utc",
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 39,
            "version": 1,
            "refresh": "30s",
            "time": {"from": "now-24h", "to": "now"},
            "templating": {"list": variables},
            "annotations": {"list": []},
            "links": [{"type": "dashboards", "tags": ["llmtap"], "asDropdown": False, "title": "llmtap"}],
            "panels": self.panels,
        }
