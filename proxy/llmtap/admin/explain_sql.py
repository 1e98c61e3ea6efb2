"""The explain analyses as ClickHouse SQL, once: ``llmtap explain-cost`` / ``explain-latency``, the viewer's
explain page and the Grafana panels run exactly these statements.

Periods. ``t1`` is the end of the window, ``w`` its length (seconds), and the baseline is ``n`` windows of
the same length, the k-th ending ``k * step`` seconds before ``t1`` (``previous``: n = 1, step = w;
``7d``: n = 7, step = 86400). A call belongs to the window when ``t1 - w <= timestamp < t1`` and to
baseline period k when ``t1 - k*step - w <= timestamp < t1 - k*step``; baseline sums are divided by n.
The four are SQL expressions, so Grafana can pass its macros and variables and the CLI literals.

Cost (``explain_cost_sql``). Cells are the ``--by`` key plus the provider and the request model; per cell
and period, first attempts only (``attempt = 1``)::

    input cost  = N_key · m · I · u · μ · φ      output cost = N_key · m · O · ρ · η
    tool fees   = N_key · m · τ                  other       = N_key · m · ζ

with N_key the key's calls, m the cell's share of them, I / O input / output tokens per call, u the
input price per token at the text rate (no cache), μ = uncached input cost / the same input at the text
rate (the modality factor: a larger audio or image share raises it), φ = input cost / uncached input cost
(the cache factor: cache reads lower it, cache writes raise it), ρ the output price per token at the text
rate, η its modality factor, τ the server tool fees per call (``tool_cost_usd``) and ζ the cost the split
does not explain (a provider-reported total) per call. μ and η are the ``modality_mix`` driver, τ
``tool_calls``. Each product is split with LMDI-I
(ΔV = Σ L(V1, V0) · ln(x1 / x0), L the logarithmic mean), which is exact: the drivers sum to the change.
A term that is zero (or not positive) in one period goes whole to the first factor that is zero
(I, u, φ; O, ρ; ζ → unit price). Cells in one period only are ``new`` / ``gone`` (their whole cost);
calls with ``attempt > 1`` are ``retries`` (their change in cost). One row per (key, driver), plus one
``total`` row (before = baseline cost, after = window cost); ``before``/``after`` are the driver's own
measure for the key (calls, tokens per call, cache hit ratio, list $ per million tokens, shares, cost).

Every quantity is a sum over calls, so whole hours come from the hourly rollup (``llm_calls_hourly``'s
``first_*`` sums) when every ``--by`` dimension is one it is keyed by; only the hours a period boundary cuts
are read call by call (``_raw_hours``). ``where`` may then name only those dimensions' columns. The rows are
those of the same analysis over the calls alone (tests/unit/admin/test_explain_rollup.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..record import LLM_CALL_SQL as LLM_CALL
from ..store.schema import sorting_key
from .queries import GROUP_COLUMNS

COST_DRIVERS = (
    "volume",
    "mix",
    "input_tokens_per_call",
    "output_tokens_per_call",
    "cache_hit_ratio",
    "unit_price",
    "modality_mix",
    "tool_calls",
    "new",
    "gone",
    "retries",
)
# The --by dimensions the hourly rollup is keyed by: explain-cost reads whole hours from it for these.
ROLLUP_DIMENSIONS = tuple(d for d, col in GROUP_COLUMNS.items() if col in sorting_key("llm_calls_hourly"))
_SMALL_LOG = 1e-6  # below this |ln(V1/V0)| the logarithmic mean uses its series (no 0/0)


def _periods(t1: str, w: str, n: str, step: str) -> str:
    """Scalar WITH items: the period of each call (1 window, 0 baseline, -1 neither)."""
    return f"""toDateTime64({t1}, 6, 'UTC') AS x_t1, toInt64({w}) AS x_w, toInt64({n}) AS x_n,
    toInt64({step}) AS x_step"""


def _ago(age: str) -> str:
    """Which baseline window (k) an age in µs falls in, if it falls in one."""
    return f"intDiv({age} - 1, x_step * 1000000)"


def _period_of(age: str, ago: str) -> str:
    """The period (1 window, 0 baseline, -1 neither) of a call ``age`` µs before ``t1``."""
    return f"""multiIf({age} > 0 AND {age} <= x_w * 1000000, 1,
                {ago} BETWEEN 1 AND x_n AND {age} - {ago} * x_step * 1000000 <= x_w * 1000000, 0, -1)"""


def _period_cols() -> str:
    return f"""toUnixTimestamp64Micro(x_t1) - toUnixTimestamp64Micro(timestamp) AS x_age,
        {_ago("x_age")} AS x_ago,
        {_period_of("x_age", "x_ago")} AS period"""


def _range_filter() -> str:
    return "timestamp < x_t1 AND timestamp >= x_t1 - toIntervalSecond(x_n * x_step + x_w)"


def _raw_hours() -> str:
    """Scalar WITH items: ``x_raw_hours``, the hours of the range that are read from ``llm_calls``, and
    ``x_first_hour``; every other hour of the range comes whole from the hourly rollup.

    A call's period is a function of its age (``t1 - timestamp``) that can change only at the ages 0, w,
    k·step and k·step + w (k = 1 … n + 1); ``x_cuts`` are those where it does. An hour with no cut strictly
    inside it lies in one period, so its rollup rows stand for its calls. Read from the calls instead: the hours
    that contain a cut, the hours whose rollup rows are not ``explain_ready`` (rolled up before the explain
    columns existed), and the hour of the oldest call (retention drops the oldest calls first, so the rollup is
    never used for an hour whose calls are gone; hours before it have no calls and are not read at all).
    """
    changes = f"{_period_of('a', _ago('a'))} != {_period_of('(a + 1)', _ago('(a + 1)'))}"
    return f"""(SELECT toStartOfHour(min(timestamp)) FROM llm_calls WHERE {LLM_CALL}) AS x_first_hour,
    arrayFilter(a -> {changes},
        arrayMap(s -> s * 1000000, arrayConcat([0, x_w], arrayFlatten(arrayMap(k -> [k * x_step, k * x_step + x_w],
            range(1, x_n + 2)))))) AS x_cuts,
    arrayMap(b -> toStartOfHour(b), arrayFilter(b -> b > toStartOfHour(b),
        arrayMap(a -> fromUnixTimestamp64Micro(toUnixTimestamp64Micro(x_t1) - a, 'UTC'), x_cuts))) AS x_cut_hours,
    (SELECT groupArray(hour) FROM (SELECT hour FROM llm_calls_hourly
        WHERE hour >= toStartOfHour(x_t1 - toIntervalSecond(x_n * x_step + x_w)) AND hour < x_t1
        GROUP BY hour HAVING min(explain_ready) = 0 OR min(explain_modal_ready) = 0)) AS x_unready_hours,
    arrayConcat(x_cut_hours, x_unready_hours, [x_first_hour]) AS x_raw_hours"""


def _sums(metrics: Sequence[tuple[str, str]]) -> str:
    """``name1`` (window) and ``name0`` (baseline, averaged) sums of each expression."""
    out = []
    for name, expr in metrics:
        out.append(f"toFloat64(sumIf({expr}, period = 1)) AS {name}1")
        out.append(f"toFloat64(sumIf({expr}, period = 0)) / x_n AS {name}0")
    return ",\n        ".join(out)


def _ln(a: str, b: str) -> str:
    return f"log(({a}) / ({b}))"


def _logmean(v: str, lnv: str) -> str:
    """L(v1, v0) = (v1 - v0) / ln(v1 / v0), with ln(v1 / v0) = ``lnv`` (the sum of the factors' logs)."""
    return f"if(abs({lnv}) < {_SMALL_LOG}, (2 * sqrt({v}1 * {v}0) + ({v}1 + {v}0) / 2) / 3, ({v}1 - {v}0) / ({lnv}))"


# Each product term: its value column, its factors (driver, log-ratio column), the condition for LMDI
# (every factor positive in both periods) and, otherwise, the driver that takes the whole change.
_TERMS = (
    (
        "inc",
        (
            ("volume", "l_vol"),
            ("mix", "l_mix"),
            ("input_tokens_per_call", "l_it"),
            ("unit_price", "l_u"),
            ("modality_mix", "l_mu"),
            ("cache_hit_ratio", "l_phi"),
        ),
        "both AND it1 > 0 AND it0 > 0 AND tin1 > 0 AND tin0 > 0 AND unc1 > 0 AND unc0 > 0 AND inc1 > 0 AND inc0 > 0",
        "multiIf(NOT (it1 > 0 AND it0 > 0), 'input_tokens_per_call', NOT (tin1 > 0 AND tin0 > 0), 'unit_price', "
        "NOT (unc1 > 0 AND unc0 > 0), 'modality_mix', 'cache_hit_ratio')",
    ),
    (
        "outc",
        (
            ("volume", "l_vol"),
            ("mix", "l_mix"),
            ("output_tokens_per_call", "l_o"),
            ("unit_price", "l_rho"),
            ("modality_mix", "l_eta"),
        ),
        "both AND ot1 > 0 AND ot0 > 0 AND tout1 > 0 AND tout0 > 0 AND outc1 > 0 AND outc0 > 0",
        "multiIf(NOT (ot1 > 0 AND ot0 > 0), 'output_tokens_per_call', NOT (tout1 > 0 AND tout0 > 0), 'unit_price', "
        "'modality_mix')",
    ),
    (
        "tool",
        (("volume", "l_vol"), ("mix", "l_mix"), ("tool_calls", "l_tau")),
        "both AND tool1 > 0 AND tool0 > 0",
        "'tool_calls'",
    ),
    (
        "oth",
        (("volume", "l_vol"), ("mix", "l_mix"), ("unit_price", "l_z")),
        "both AND oth1 > 0 AND oth0 > 0",
        "'unit_price'",
    ),
)
_LOGS = {
    "l_vol": _ln("nk1", "nk0"),
    "l_mix": _ln("n1 / nk1", "n0 / nk0"),
    "l_it": _ln("it1 / n1", "it0 / n0"),
    "l_u": _ln("tin1 / it1", "tin0 / it0"),
    "l_mu": _ln("unc1 / tin1", "unc0 / tin0"),
    "l_phi": _ln("inc1 / unc1", "inc0 / unc0"),
    "l_o": _ln("ot1 / n1", "ot0 / n0"),
    "l_rho": _ln("tout1 / ot1", "tout0 / ot0"),
    "l_eta": _ln("outc1 / tout1", "outc0 / tout0"),
    "l_tau": _ln("tool1 / n1", "tool0 / n0"),
    "l_z": _ln("oth1 / n1", "oth0 / n0"),
}


def _term_columns() -> str:
    """Per cell: the factor logs, then per term whether LMDI applies, its log mean and its fallback driver."""
    cols = [f"{e} AS {name}" for name, e in _LOGS.items()]
    for v, factors, ok, first_zero in _TERMS:
        lnv = " + ".join(col for _, col in factors)
        cols += [f"{ok} AS ok_{v}", f"{_logmean(v, lnv)} AS lm_{v}", f"{first_zero} AS z_{v}"]
    return ",\n        ".join(cols)


def _cell_contributions() -> dict[str, list[str]]:
    """Per-cell contribution expressions of each driver (summed per key later)."""
    out: dict[str, list[str]] = {d: [] for d in COST_DRIVERS}
    for v, factors, _, _ in _TERMS:
        for driver, col in factors:
            out[driver].append(f"if(ok_{v}, lm_{v} * {col}, 0)")
        for driver in dict.fromkeys(d for d, _ in factors if d not in ("volume", "mix")):
            out[driver].append(f"if(both AND NOT ok_{v} AND z_{v} = '{driver}', {v}1 - {v}0, 0)")
    out["new"].append("if(n0 = 0 AND n1 > 0, cost1, 0)")
    out["gone"].append("if(n1 = 0 AND n0 > 0, -cost0, 0)")
    out["retries"].append("rcost1 - rcost0")
    return out


# What a priced call adds to its cell (first attempts; retries apart), and the same sums in the hourly rollup.
_CALL_SUMS = (
    ("v_n", "toUInt64(attempt <= 1)", "first_priced_calls"),
    ("v_in", "if(attempt <= 1, ifNull(input_cost_usd, 0), 0)", "first_input_cost_usd_sum"),
    (
        "v_unc",
        "if(attempt <= 1, coalesce(uncached_input_cost_usd, input_cost_usd, 0), 0)",
        "first_uncached_input_cost_usd_sum",
    ),
    ("v_out", "if(attempt <= 1, ifNull(output_cost_usd, 0), 0)", "first_output_cost_usd_sum"),
    ("v_tool", "if(attempt <= 1, ifNull(tool_cost_usd, 0), 0)", "first_tool_cost_usd_sum"),
    (
        "v_tin",
        "if(attempt <= 1, coalesce(text_rate_input_cost_usd, uncached_input_cost_usd, input_cost_usd, 0), 0)",
        "first_text_rate_input_cost_usd_sum",
    ),
    (
        "v_tout",
        "if(attempt <= 1, coalesce(text_rate_output_cost_usd, output_cost_usd, 0), 0)",
        "first_text_rate_output_cost_usd_sum",
    ),
    ("v_cost", "if(attempt <= 1, assumeNotNull(cost_usd), 0)", "first_cost_usd_sum"),
    ("v_it", "if(attempt <= 1, input_tokens, 0)", "first_input_tokens_sum"),
    ("v_ot", "if(attempt <= 1, output_tokens, 0)", "first_output_tokens_sum"),
    ("v_cr", "if(attempt <= 1, cache_read_tokens, 0)", "first_cache_read_tokens_sum"),
    ("v_rn", "toUInt64(attempt > 1)", "retry_priced_calls"),
    ("v_rcost", "if(attempt > 1, assumeNotNull(cost_usd), 0)", "retry_cost_usd_sum"),
    ("v_pvs", "map(toString(prompt_version), v_n)", "first_calls_by_prompt_version"),
    ("v_tiers", "map(toString(service_tier), v_n)", "first_calls_by_service_tier"),
)


def _cost_calls(keys: list[tuple[str, str]], where: str) -> str:
    """The ``calls`` CTE: priced calls as cell sums with their period, from the rollup's whole hours where it
    holds every dimension asked for (:data:`ROLLUP_DIMENSIONS`), the rest from ``llm_calls``."""
    ksel = ", ".join(f"{col} AS k_{k}" for k, col in keys)
    raw_sums = ",\n        ".join(f"{expr} AS {name}" for name, expr, _ in _CALL_SUMS)
    raw = f"""SELECT {ksel}, provider AS c_provider, request_model AS c_model, timestamp, {raw_sums},
        {_period_cols()}
    FROM llm_calls
    WHERE {LLM_CALL} AND cost_usd IS NOT NULL AND {_range_filter()} AND ({where})"""
    if any(k not in ROLLUP_DIMENSIONS for k, _ in keys):
        return raw
    rolled = ",\n        ".join(f"{col} AS {name}" for name, _, col in _CALL_SUMS)
    return f"""SELECT {ksel}, provider AS c_provider, request_model AS c_model,
        toDateTime64(hour, 6, 'UTC') AS timestamp, {rolled},
        {_period_cols()}
    FROM llm_calls_hourly
    WHERE hour >= toStartOfHour(x_t1 - toIntervalSecond(x_n * x_step + x_w)) AND hour < x_t1
        AND hour > x_first_hour AND NOT has(x_raw_hours, hour) AND ({where})
    UNION ALL
    {raw} AND has(x_raw_hours, toStartOfHour(timestamp))"""


def _key_cols(by: Sequence[str]) -> list[tuple[str, str]]:
    if not by:
        raise ValueError("explain-cost needs at least one --by dimension")
    bad = [b for b in by if b not in GROUP_COLUMNS]
    if bad:
        raise ValueError(f"unknown --by dimension(s): {', '.join(bad)}")
    return [(b, GROUP_COLUMNS[b]) for b in dict.fromkeys(by)]


def explain_cost_sql(
    by: Sequence[str] = ("model", "feature"),
    *,
    t1: str = "now64(6)",
    w: str = "86400",
    n: str = "7",
    step: str = "86400",
    where: str = "1=1",
) -> str:
    """Rows ``(<by…>, driver, delta_usd, before, after, detail)``: see the module docstring."""
    keys = _key_cols(by)
    kn = ", ".join(f"k_{k}" for k, _ in keys)
    sums = (
        *(("n", "n"), ("inc", "in"), ("unc", "unc"), ("outc", "out"), ("cost", "cost"), ("it", "it"), ("ot", "ot")),
        *(("tool", "tool"), ("tin", "tin"), ("tout", "tout")),
    )
    metrics = [(name, f"v_{v}") for name, v in (*sums, ("cr", "cr"), ("rn", "rn"), ("rcost", "rcost"))]
    cell_terms = ",\n        ".join(f"{' + '.join(e)} AS c_{d}" for d, e in _cell_contributions().items())
    key_sums = ",\n        ".join(f"sum(c_{d}) AS d_{d}" for d in COST_DRIVERS)
    kout = ", ".join(f"if(driver = 'total', '', toString(k_{k})) AS {k}" for k, _ in keys)

    def ratio(x: str, d: str) -> str:
        return f"if(({d}) > 0, ({x}) / ({d}), NULL)"

    return f"""WITH {_periods(t1, w, n, step)},
    {_raw_hours()},
calls AS (
    {_cost_calls(keys, where)}
),
cells AS (
    SELECT {kn}, c_provider, c_model,
        {_sums(metrics)},
        sumMapIf(v_pvs, period = 1) AS pvm1, sumMapIf(v_pvs, period = 0) AS pvm0,
        sumMapIf(v_tiers, period = 1) AS tm1, sumMapIf(v_tiers, period = 0) AS tm0
    FROM calls WHERE period >= 0
    GROUP BY {kn}, c_provider, c_model
),
cellk AS (
    SELECT *, cost1 - inc1 - outc1 - tool1 AS oth1, cost0 - inc0 - outc0 - tool0 AS oth0, n1 > 0 AND n0 > 0 AS both,
        -- list prices per token in each period (the other period's where a period has none)
        if(it0 > 0, unc0 / it0, if(it1 > 0, unc1 / it1, 0)) AS pin0, if(it1 > 0, unc1 / it1, pin0) AS pin1,
        if(ot0 > 0, outc0 / ot0, if(ot1 > 0, outc1 / ot1, 0)) AS pout0, if(ot1 > 0, outc1 / ot1, pout0) AS pout1,
        sum(n1) OVER (PARTITION BY {kn}) AS nk1, sum(n0) OVER (PARTITION BY {kn}) AS nk0
    FROM cells
),
terms AS (
    SELECT *,
        {_term_columns()}
    FROM cellk
),
contrib AS (
    SELECT *,
        {cell_terms}
    FROM terms
),
keyed AS (
    SELECT {kn},
        {key_sums},
        sum(n1) AS kn1, sum(n0) AS kn0, sum(it1) AS kit1, sum(it0) AS kit0, sum(ot1) AS kot1, sum(ot0) AS kot0,
        sum(cr1) AS kcr1, sum(cr0) AS kcr0, sum(it1 + it0 + ot1 + ot0) AS ktok,
        sum(unc1 + outc1) AS kmod1, sum(unc0 + outc0) AS kmod0,
        sum(tin1 + tout1) AS ktext1, sum(tin0 + tout0) AS ktext0,
        sum(tool1) AS ktool1, sum(tool0) AS ktool0,
        sum((it1 + it0) * pin0 + (ot1 + ot0) * pout0) AS klist0,
        sum((it1 + it0) * pin1 + (ot1 + ot0) * pout1) AS klist1,
        sum(cost1 + rcost1) AS kcost1, sum(cost0 + rcost0) AS kcost0, sum(rn1) AS krn1, sum(rn0) AS krn0,
        sumIf(cost1, n0 = 0 AND n1 > 0) AS knew1, sumIf(cost0, n1 = 0 AND n0 > 0) AS kgone0,
        argMax(tuple(concat(c_provider, '/', c_model), if(nk1 > 0, n1 / nk1, 0), if(nk0 > 0, n0 / nk0, 0)),
            abs(c_mix)) AS mixcell,
        arrayStringConcat(groupArrayIf(c_model, n0 = 0 AND n1 > 0), ', ') AS new_models,
        arrayStringConcat(groupArrayIf(c_model, n1 = 0 AND n0 > 0), ', ') AS gone_models,
        sumMap(pvm1) AS kpv1, sumMap(pvm0) AS kpv0, sumMap(tm1) AS kt1, sumMap(tm0) AS kt0
    FROM contrib GROUP BY {kn}
),
totals AS (
    SELECT *, sum(kcost1) OVER () AS total1, sum(kcost0) OVER () AS total0,
        row_number() OVER () = 1 AS first_key,
        -- a prompt_version new in the window (none of its calls in the baseline) that carries most of it
        arrayFilter(v -> kpv0[v] = 0 AND v != '', mapKeys(kpv1)) AS new_pvs,
        arraySort(v -> -toInt64(kpv1[v]), new_pvs)[1] AS new_pv,
        toFloat64(if(empty(new_pvs), 0, kpv1[new_pv])) / greatest(arraySum(mapValues(kpv1)), 1) AS new_pv_share,
        if(new_pv_share > 0.5, concat('since prompt_version ', new_pv), '') AS since,
        -- the service tier most calls used in each period
        arraySort(v -> -toInt64(kt1[v]), mapKeys(kt1))[1] AS tier1,
        arraySort(v -> -toInt64(kt0[v]), mapKeys(kt0))[1] AS tier0
    FROM keyed
),
drivers AS (
    SELECT {kn}, total0, total1, d.1 AS driver, d.2 AS delta_usd, d.3 AS before, d.4 AS after, d.5 AS detail
    FROM totals
    ARRAY JOIN arrayConcat([
        tuple('volume', d_volume, toNullable(kn0), toNullable(kn1), ''),
        tuple('mix', d_mix, toNullable(mixcell.3), toNullable(mixcell.2), mixcell.1),
        tuple('input_tokens_per_call', d_input_tokens_per_call, {ratio("kit0", "kn0")}, {ratio("kit1", "kn1")}, since),
        tuple('output_tokens_per_call', d_output_tokens_per_call, {ratio("kot0", "kn0")}, {ratio("kot1", "kn1")},
            since),
        tuple('cache_hit_ratio', d_cache_hit_ratio, {ratio("kcr0", "kit0")}, {ratio("kcr1", "kit1")}, ''),
        tuple('unit_price', d_unit_price, {ratio("klist0 * 1e6", "ktok")}, {ratio("klist1 * 1e6", "ktok")},
            if(tier0 != tier1 AND kn0 > 0 AND kn1 > 0, concat('service tier ', tier0, ' → ', tier1), '')),
        tuple('modality_mix', d_modality_mix, {ratio("kmod0", "ktext0")}, {ratio("kmod1", "ktext1")}, ''),
        tuple('tool_calls', d_tool_calls, {ratio("ktool0", "kn0")}, {ratio("ktool1", "kn1")}, ''),
        tuple('new', d_new, toNullable(0.), toNullable(knew1), new_models),
        tuple('gone', d_gone, toNullable(kgone0), toNullable(0.), gone_models),
        tuple('retries', d_retries, toNullable(krn0), toNullable(krn1), '')
    ], if(first_key, [tuple('total', total1 - total0, toNullable(total0), toNullable(total1), '')], [])) AS d
)
SELECT {kout}, driver, delta_usd, before, after, detail
FROM drivers
WHERE abs(delta_usd) > 1e-12 * (total0 + total1) OR driver = 'total'
ORDER BY driver = 'total' DESC, abs(delta_usd) DESC, driver"""
