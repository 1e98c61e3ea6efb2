"""Building blocks of the llmtap dashboards on Grafana's own typed builders (``grafana-foundation-sdk``).

From the SDK: the dashboard, its links and variables (query, custom, text box), and the panels of each kind
(``timeseries``, ``stat``, ``table``, ``barchart``, ``heatmap``) with their typed options and field config. Its
models follow Grafana's dashboard schema, so a board built here is one Grafana's schema describes; the schema test
(tests/contract/test_dashboard_schema.py) reads every generated board back through the same models.

Ours, and why:

- :class:`ClickHouseQuery`: the SDK models the data sources Grafana ships (Prometheus, Loki, …); the ClickHouse
  plugin (``grafana-clickhouse-datasource``) is a separate plugin and has no model there. So its query is a small
  typed SDK ``Dataquery`` here, registered with the SDK's runtime so that boards decode back into it.
- The ``traces`` panel: the SDK has no builder for it (the panel has no options schema), so it is the SDK's
  generic ``dashboard.Panel`` with its type set.
- Placement: :meth:`Board._place` starts a new row when a panel does not fit the current one. The SDK's
  automatic layout places a panel first and wraps after, which would put a 24-wide panel that follows a 12-wide
  one half off the grid; so every panel gets its position here.
- ``"id": null`` on every board (Grafana assigns the id; the schema allows null, the SDK model leaves it out) and
  ``schemaVersion`` 39 (the SDK's default is 41: Grafana would skip the 40 and 41 migrations, which change
  nothing these boards use, so the version the boards were written for stays).
- Where the SDK's default for an option differs from the default the Grafana panel uses when the option is absent
  (legend shown, tooltip unsorted, the heatmap's colour steps), the option is set to Grafana's default: an
  explicit value the panel already had, so the boards look as they did.
- Two optional parts the SDK's "next" models write and the schema of Grafana 12 (``@grafana/schema`` 12.2) has
  not are left out: a table's ``options.footer`` and the interval fields (``auto``, ``auto_min``,
  ``auto_count``) on variables that are not interval variables.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from grafana_foundation_sdk.builders import barchart, heatmap, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dashboard_b
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dashboard_m
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import table as table_m

from llmtap.record import LLM_CALL_SQL

DATASOURCE_TYPE = "grafana-clickhouse-datasource"
DS = common.DataSourceRef(type_val=DATASOURCE_TYPE, uid="clickhouse")
PLUGIN_VERSION = "4.20.0"
SCHEMA_VERSION = 39
GRID_WIDTH = 24
F = (
    "$__conditionalAll(service IN (${service:singlequote}), $service) "
    "AND $__conditionalAll(provider IN (${provider:singlequote}), $provider) "
    "AND $__conditionalAll(request_model IN (${model:singlequote}), $model) "
    "AND $__conditionalAll(feature IN (${feature:singlequote}), $feature)"
)
W = f"$__timeFilter(timestamp) AND {LLM_CALL_SQL} AND {F}"  # LLM calls only: other requests have their panel
OTHER = f"$__timeFilter(timestamp) AND NOT ({LLM_CALL_SQL}) AND {F}"  # the requests that are not LLM calls
T = "$__timeInterval(timestamp) AS time"


class Format(enum.IntEnum):
    """The ClickHouse plugin's result formats (its ``Format`` enum; 2, logs, is not used here)."""

    TIME_SERIES = 0
    TABLE = 1
    TRACES = 3


@dataclass
class ClickHouseQuery(cogvariants.Dataquery, cogbuilder.Builder[cogvariants.Dataquery]):
    """A panel's SQL query on the ClickHouse data source, as the plugin (4.x) saves it."""

    raw_sql: str
    format: Format
    ref_id: str = "A"

    def build(self) -> Self:  # already built: the SDK's panel builders take builders
        return self

    def to_json(self) -> dict[str, object]:
        return {
            "refId": self.ref_id,
            "datasource": DS,
            "editorType": "sql",
            "format": self.format,
            "queryType": "timeseries" if self.format == Format.TIME_SERIES else "table",
            "rawSql": self.raw_sql,
            "pluginVersion": PLUGIN_VERSION,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(raw_sql=data.get("rawSql", ""), format=Format(data.get("format", 0)), ref_id=data.get("refId", ""))


cogruntime.register_dataquery_variant(cogruntime.DataqueryConfig(DATASOURCE_TYPE, ClickHouseQuery.from_json))


def all_option() -> dashboard_m.VariableOption:
    return dashboard_m.VariableOption(selected=True, text=["All"], value=["$__all"])


def query_var(name: str, col: str, label: str = "") -> dashboard_b.QueryVariable:
    """A multi-value variable listing the column's values in the time range (with "All")."""
    return (
        dashboard_b.QueryVariable(name)
        .label(label or name)
        .datasource(DS)
        .query(f"SELECT DISTINCT {col} FROM llm_calls WHERE $__timeFilter(timestamp) AND {col} != '' ORDER BY 1")
        .refresh(dashboard_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)
        .include_all(True)
        .current(all_option())
        .sort(dashboard_m.VariableSort.ALPHABETICAL_ASC)
    )


def custom_var(name: str, values: list[str], label: str = "", include_all: bool = True) -> dashboard_b.CustomVariable:
    current = "$__all" if include_all else values[0]
    return (
        dashboard_b.CustomVariable(name)
        .label(label or name)
        .values(",".join(values))
        .multi(include_all)
        .include_all(include_all)
        .options([dashboard_m.VariableOption(text=v, value=v, selected=v == current) for v in values])
        .current(
            all_option() if include_all else dashboard_m.VariableOption(selected=True, text=values[0], value=[current])
        )
    )


def textbox_var(name: str, label: str = "") -> dashboard_b.TextBoxVariable:
    """Free text; an empty box filters nothing (write conditions as ``(${v:singlequote} = '' OR …)``)."""
    return (
        dashboard_b.TextBoxVariable(name)
        .label(label or name)
        .default_value("")
        .current(dashboard_m.VariableOption(text="", value=""))
    )


Variable = dashboard_b.QueryVariable | dashboard_b.CustomVariable | dashboard_b.TextBoxVariable

# The filters every board but the trace view has: the time range and these four, through $__conditionalAll.
FILTERS: tuple[tuple[str, str], ...] = (
    ("service", "service"),
    ("provider", "provider"),
    ("model", "request_model"),
    ("feature", "feature"),
)

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
EXPLORER_VARS: list[Variable] = [
    custom_var("outcome", ["ok", "error", "cancelled"]),
    query_var("error_type", "error_type", "error type"),
    query_var("tenant", "tenant"),
    textbox_var("user"),
    textbox_var("session"),
    textbox_var("request_id", "request id"),
    textbox_var("search"),
]


@dataclass(frozen=True)
class DataLink:
    """A link on a panel's values (``${__data.fields.…}`` interpolates the row's fields)."""

    title: str
    url: str

    def builder(self) -> dashboard_b.DashboardLink:
        return dashboard_b.DashboardLink(self.title).url(self.url)


class PanelBuilder(Protocol):
    """What every SDK panel builder has and :meth:`Board._add` uses."""

    def id(self, id_val: int) -> Self: ...
    def title(self, title: str) -> Self: ...
    def description(self, description: str) -> Self: ...
    def grid_pos(self, grid_pos: dashboard_m.GridPos) -> Self: ...
    def datasource(self, datasource: common.DataSourceRef) -> Self: ...
    def with_target(self, target: cogbuilder.Builder[cogvariants.Dataquery]) -> Self: ...
    def unit(self, unit: str) -> Self: ...
    def data_links(self, links: list[cogbuilder.Builder[dashboard_m.DashboardLink]]) -> Self: ...
    def build(self) -> dashboard_m.Panel: ...


def legend_hidden() -> common_b.VizLegendOptions:
    return common_b.VizLegendOptions().show_legend(False)


def tooltip(mode: common.TooltipDisplayMode) -> common_b.VizTooltipOptions:
    # the SDK's default sort is ascending; Grafana's, when none is saved, is none
    return common_b.VizTooltipOptions().mode(mode).sort(common.SortOrder.NONE)


class Board:
    def __init__(
        self,
        uid: str,
        title: str,
        tags: list[str],
        variables: list[Variable] | None = None,
        *,
        filters: bool = True,
    ) -> None:
        """``filters``: the shared service / provider / model / feature variables first (all boards but the trace
        view, which shows one trace by id)."""
        self.uid, self.title, self.tags = uid, title, tags
        self.variables: list[Variable] = [query_var(n, c) for n, c in FILTERS] if filters else []
        self.variables += copy.deepcopy(variables or [])  # a builder's model is its own: boards share none
        self.panels: list[dashboard_m.Panel] = []
        self.x = self.y = 0
        self.row_h = 0

    def _place(self, w: int, h: int) -> dashboard_m.GridPos:
        if self.x + w > GRID_WIDTH:
            self.x, self.y = 0, self.y + self.row_h
            self.row_h = 0
        pos = dashboard_m.GridPos(x=self.x, y=self.y, w=w, h=h)
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def _add(
        self,
        p: PanelBuilder,
        title: str,
        sql: str,
        fmt: Format,
        *,
        w: int,
        h: int,
        unit: str,
        description: str,
        links: list[DataLink] | None,
    ) -> dashboard_m.Panel:
        p = (
            p.id(len(self.panels) + 1)
            .title(title)
            .description(description)
            .grid_pos(self._place(w, h))
            .datasource(DS)
            .with_target(ClickHouseQuery(sql.strip(), fmt))
            .unit(unit)
        )
        if links:
            p = p.data_links([link.builder() for link in links])
        self.panels.append(panel := p.build())
        return panel

    def ts(
        self,
        title: str,
        sql: str,
        unit: str = "short",
        *,
        stacked: bool = False,
        fill_opacity: int | None = None,
        w: int = 12,
        h: int = 8,
        description: str = "",
        links: list[DataLink] | None = None,
    ) -> None:
        p = (
            timeseries.Panel()
            .legend(
                common_b.VizLegendOptions()
                .display_mode(common.LegendDisplayMode.TABLE)
                .placement(common.LegendPlacement.RIGHT)
                .show_legend(True)  # the SDK's default hides it; Grafana's, when none is saved, shows it
                .calcs(["mean", "max"])
            )
            .tooltip(tooltip(common.TooltipDisplayMode.MULTI))
        )
        if stacked:
            p = p.stacking(common_b.StackingConfig().mode(common.StackingMode.NORMAL))
        if fill_opacity is not None:
            p = p.fill_opacity(fill_opacity)
        self._add(p, title, sql, Format.TIME_SERIES, w=w, h=h, unit=unit, description=description, links=links)

    def stat(
        self,
        title: str,
        sql: str,
        unit: str = "short",
        *,
        description: str = "",
        thresholds: Sequence[tuple[float | None, str]] = (),
    ) -> None:
        """``thresholds``: (from value, colour) steps, the first from ``None`` — a colour that means something
        (an error rate green only when it is low); without them the value is drawn in the text colour."""
        p = (
            stat.Panel()
            .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
            .color_mode(common.BigValueColorMode.VALUE if thresholds else common.BigValueColorMode.NONE)
            .graph_mode(common.BigValueGraphMode.NONE)
        )
        if thresholds:
            p = p.thresholds(
                dashboard_b.ThresholdsConfig()
                .mode(dashboard_m.ThresholdsMode.ABSOLUTE)
                .steps([dashboard_m.Threshold(value=v, color=c) for v, c in thresholds])
            )
        self._add(p, title, sql, Format.TABLE, w=6, h=4, unit=unit, description=description, links=None)

    def table(
        self,
        title: str,
        sql: str,
        *,
        w: int = 12,
        h: int = 8,
        description: str = "",
        links: list[DataLink] | None = None,
    ) -> None:
        p = table.Panel().show_header(True).cell_height(common.TableCellHeight.SM)
        panel = self._add(p, title, sql, Format.TABLE, w=w, h=h, unit="short", description=description, links=links)
        assert isinstance(panel.options, table_m.Options)
        panel.options.footer = None  # Grafana 12's table has no options.footer (a footer is per field there)

    def bar(self, title: str, sql: str, unit: str = "short", *, description: str = "") -> None:
        p = (
            barchart.Panel()
            .orientation(common.VizOrientation.HORIZONTAL)
            .show_value(common.VisibilityMode.AUTO)
            .legend(legend_hidden())
            .tooltip(tooltip(common.TooltipDisplayMode.SINGLE))
        )
        self._add(p, title, sql, Format.TABLE, w=12, h=8, unit=unit, description=description, links=None)

    def heatmap(self, title: str, sql: str, *, description: str = "") -> None:
        p = (
            heatmap.Panel()
            .calculate(False)
            .y_axis(heatmap.YAxisConfig().unit("ms"))
            .cell_gap(1)
            .color(
                # a fresh color builder starts from zeros (0 steps, no fill): Grafana's defaults, set
                heatmap.HeatmapColorOptions()
                .mode(heatmap_m.HeatmapColorMode.SCHEME)
                .scheme("Oranges")
                .fill("dark-orange")
                .exponent(0.5)
                .steps(64)
                .reverse(False)
            )
        )
        self._add(p, title, sql, Format.TIME_SERIES, w=12, h=8, unit="ms", description=description, links=None)

    def traces(self, title: str, sql: str, *, w: int = 24, h: int = 16) -> None:
        """Grafana's trace view of the ``otel_traces`` rows a query returns (the traces format)."""
        p = dashboard_b.Panel().type("traces").options({})
        self._add(p, title, sql, Format.TRACES, w=w, h=h, unit="short", description="", links=None)

    def model(self) -> dashboard_m.Dashboard:
        board = (
            dashboard_b.Dashboard(self.title)
            .uid(self.uid)
            .tags(["llmtap", *self.tags])
            .timezone("utc")
            .editable()
            .tooltip(dashboard_m.DashboardCursorSync.CROSSHAIR)
            .version(1)
            .refresh("30s")
            .time("now-24h", "now")
            .variables(list(self.variables))
            .annotations([])
            .links(
                [
                    dashboard_b.DashboardLink("llmtap")
                    .type(dashboard_m.DashboardLinkType.DASHBOARDS)
                    .tags(["llmtap"])
                    .as_dropdown(False)
                ]
            )
            .build()
        )
        board.schema_version = SCHEMA_VERSION
        for v in board.templating.list_val or []:
            if v.type_val != dashboard_m.VariableType.INTERVAL:  # an interval variable's own fields, not theirs
                v.auto = v.auto_min = v.auto_count = None
        board.panels = list(self.panels)  # placed by _place, not by the builder's automatic layout
        return board

    def json(self) -> dict[str, Any]:
        """The board as Grafana's JSON model (plain JSON values, as written to dashboards/json)."""
        return {"id": None} | encode(self.model())


def encode(model: object) -> dict[str, Any]:
    """An SDK model as plain JSON values."""
    out: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return out
