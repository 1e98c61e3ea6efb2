"""The explain-latency analysis as ClickHouse SQL, once (CLI, viewer and Grafana run it); periods as in
:mod:`.explain_sql`."""

from __future__ import annotations

from ..record import LLM_CALL_SQL as LLM_CALL
from .explain_sql import _logmean, _period_cols, _periods, _range_filter

LATENCY_METRICS = ("duration", "ttft")
LATENCY_COMPONENTS = {
    # component: what it is (the per-call parts add up to the metric, retries included)
    "ttfb": "request → response headers (network + provider queue)",
    "prefill": "headers → first content (prompt processing)",
    "decode_length": "decode time from the number of output tokens",
    "time_per_token": "decode time from the time per output token",
    "other": "after the last content (or the body of a non-streamed response)",
    "retries": "failed earlier attempts of the same request, and the backoff after them",
    "rate_limit_wait": "waiting after a 429 before the retry",
}


def explain_latency_sql(
    *,
    metric: str = "duration",
    quantile: float = 0.95,
    t1: str = "now64(6)",
    w: str = "86400",
    n: str = "7",
    step: str = "86400",
    where: str = "1=1",
    min_samples: int = 20,
) -> str:
    """Why the ``metric`` quantile moved, per provider / server / model and per hour of the window.

    Each call's end-to-end latency (the first attempt's start to the end of this one) is the sum of its
    components: retries and rate-limit waits (earlier attempts of the same request), TTFB, prefill and,
    for ``duration``, decode (output tokens × time per token, LMDI-split) and the rest. Quantiles do not
    add, so each cell's change is measured on the calls around the quantile (the band from q − 0.05 to
    q + 0.04 in each period): there the component means add up exactly to the band's mean, which tracks
    the quantile. Rows per cell (``level`` ``all``, ``server`` or ``hour``) and component: ``delta_ms``
    (band mean change), ``before_ms`` / ``after_ms`` (the component's own quantile); the ``total`` row
    carries the metric's quantile before and after and the band change.
    """
    if metric not in LATENCY_METRICS:
        raise ValueError(f"metric must be one of {', '.join(LATENCY_METRICS)}")
    q = float(quantile)
    if not 0.05 < q < 0.96:
        raise ValueError("quantile must be between p6 and p95")
    lo, hi = round(q - 0.05, 4), round(q + 0.04, 4)
    ttft = metric == "ttft"
    comps = ["ttfb", "prefill", "retries", "rate_limit_wait"] if ttft else list(LATENCY_COMPONENTS)
    unit = "ttft_ms IS NOT NULL" if ttft else "is_final"
    part = "PARTITION BY api_key_id, request_hash, grp"
    comp_sel = ",\n        ".join(
        [
            "ifNull(ttfb_ms, least(ifNull(ttft_ms, duration_ms), duration_ms)) AS c_ttfb",
            "if(ttft_ms IS NULL, 0, ttft_ms - c_ttfb) AS c_prefill",
            "if(ttft_ms IS NULL, 0, ifNull(decode_ms, 0)) AS c_decode",
            "toFloat64(output_tokens) AS c_tokens",
            "greatest(duration_ms - c_ttfb - c_prefill - c_decode, 0) AS c_other",
            "greatest(prior_ms - failed_ms, 0) AS c_wait",
            "if(prev_error IN ('rate_limited', 'quota_exhausted'), c_wait, 0) AS c_rate_limit_wait",
            "failed_ms + c_wait - c_rate_limit_wait AS c_retries",
            f"c_retries + c_rate_limit_wait + {'c_ttfb + c_prefill' if ttft else 'duration_ms'} AS e2e",
        ]
    )
    band_cols = ",\n        ".join(
        [
            f"avgIf(c_{c}, in_band) AS b_{c}"
            for c in ("ttfb", "prefill", "decode", "other", "retries", "rate_limit_wait")
        ]
        + ["avgIf(c_tokens, in_band) AS b_tokens", "avgIf(e2e, in_band) AS b_e2e"]
    )
    qcols = ",\n        ".join(
        [f"quantile({q})(c_{c}) AS q_{c}" for c in ("ttfb", "prefill", "decode", "other", "retries", "rate_limit_wait")]
        + [f"quantile({q})(if(c_tokens > 0, c_decode / c_tokens, 0)) AS q_tpt", f"quantile({q})(c_tokens) AS q_tokens"]
    )
    cell = "level, g_provider, g_server, g_model, g_hour"
    qpick = ", ".join(
        f"qs.q_{c} AS q_{c}"
        for c in ("ttfb", "prefill", "decode", "other", "retries", "rate_limit_wait", "tpt", "tokens")
    )

    def pair(col: str) -> str:
        return f"anyIf({col}, period = 0) AS {col}0, anyIf({col}, period = 1) AS {col}1"

    pairs = ",\n        ".join(
        pair(c)
        for c in [
            "calls",
            "pq",
            "b_e2e",
            "b_ttfb",
            "b_prefill",
            "b_decode",
            "b_other",
            "b_retries",
            "b_rate_limit_wait",
            "b_tokens",
            "q_ttfb",
            "q_prefill",
            "q_decode",
            "q_other",
            "q_retries",
            "q_rate_limit_wait",
            "q_tpt",
            "q_tokens",
        ]
    )
    # decode = tokens × time per token over the band: LMDI on the band means
    d_len = (
        "if(b_decode1 > 0 AND b_decode0 > 0 AND b_tokens1 > 0 AND b_tokens0 > 0, "
        "lm_decode * log(b_tokens1 / b_tokens0), 0)"
    )
    d_tpt = f"b_decode1 - b_decode0 - ({d_len})"
    entries = {
        "ttfb": ("b_ttfb1 - b_ttfb0", "q_ttfb0", "q_ttfb1"),
        "prefill": ("b_prefill1 - b_prefill0", "q_prefill0", "q_prefill1"),
        "decode_length": (d_len, "q_tokens0", "q_tokens1"),
        "time_per_token": (d_tpt, "q_tpt0", "q_tpt1"),
        "other": ("b_other1 - b_other0", "q_other0", "q_other1"),
        "retries": ("b_retries1 - b_retries0", "q_retries0", "q_retries1"),
        "rate_limit_wait": ("b_rate_limit_wait1 - b_rate_limit_wait0", "q_rate_limit_wait0", "q_rate_limit_wait1"),
    }
    arr = ",\n        ".join(
        f"tuple('{c}', toFloat64({entries[c][0]}), toFloat64({entries[c][1]}), toFloat64({entries[c][2]}))"
        for c in comps
    )
    return f"""WITH {_periods(t1, w, n, step)},
    -- no cell can have min_samples units in both periods when the whole range has fewer calls: read nothing
    (SELECT countIf(period = 1) >= {int(min_samples)} AND countIf(period = 0) >= {int(min_samples)}
     FROM (SELECT {_period_cols()} FROM llm_calls
        WHERE {LLM_CALL} AND {_range_filter()} AND ({where}))) AS x_enough,
base AS (
    SELECT provider, server_address, request_model, timestamp, attempt, request_hash, api_key_id, error_type,
        ttfb_ms, ttft_ms, duration_ms, decode_ms, output_tokens
    FROM llm_calls
    WHERE x_enough AND timestamp < x_t1 AND timestamp >= x_t1 - toIntervalSecond(x_n * x_step + x_w + 600)
        AND {LLM_CALL} AND ({where})
),
retried AS (
    SELECT DISTINCT api_key_id, request_hash FROM base WHERE attempt > 1 AND request_hash != ''
),
tagged AS (
    SELECT *, sum(attempt = 1) OVER (PARTITION BY api_key_id, request_hash
        ORDER BY timestamp ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp
    FROM base WHERE request_hash != '' AND (api_key_id, request_hash) IN (SELECT api_key_id, request_hash FROM retried)
),
attempts AS (
    SELECT *,
        toFloat64(if(attempt > 1, (toUnixTimestamp64Micro(timestamp)
            - toUnixTimestamp64Micro(min(timestamp) OVER ({part}))) / 1000, 0)) AS prior_ms,
        toFloat64(if(attempt > 1, sum(duration_ms) OVER ({part} ORDER BY timestamp
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS failed_ms,
        toString(if(attempt > 1, lagInFrame(error_type) OVER ({part} ORDER BY timestamp
            ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), '')) AS prev_error,
        toUInt8(leadInFrame(attempt, 1, toUInt16(0)) OVER ({part} ORDER BY timestamp
            ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) <= attempt) AS is_final
    FROM tagged
    UNION ALL
    -- a request never sent again is its own first and final attempt: no window over it (they are
    -- nearly every call, and the windows' sort over all of them is what made this slow)
    SELECT *, toUInt64(0) AS grp, toFloat64(0) AS prior_ms, toFloat64(0) AS failed_ms, '' AS prev_error,
        toUInt8(1) AS is_final
    FROM base
    WHERE request_hash = '' OR (api_key_id, request_hash) NOT IN (SELECT api_key_id, request_hash FROM retried)
),
calls AS (
    SELECT *,
        {comp_sel},
        {_period_cols()},
        toStartOfHour(toDateTime(timestamp, 'UTC') + toIntervalSecond(if(period = 0, x_ago * x_step, 0))) AS x_hour
    FROM attempts
    WHERE timestamp >= x_t1 - toIntervalSecond(x_n * x_step + x_w)
),
units AS (
    SELECT period, lv.1 AS level, lv.2 AS g_provider, lv.3 AS g_server, lv.4 AS g_model, lv.5 AS g_hour,
        cityHash64(lv, period) AS cell_id,
        e2e, c_ttfb, c_prefill, c_decode, c_other, c_retries, c_rate_limit_wait, c_tokens
    FROM calls
    ARRAY JOIN [
        tuple('all', '', '', '', toDateTime(0, 'UTC')),
        tuple('server', toString(provider), toString(server_address), toString(request_model), toDateTime(0, 'UTC')),
        tuple('hour', toString(provider), toString(server_address), toString(request_model), x_hour)
    ] AS lv
    WHERE period >= 0 AND {unit}
),
qs AS (
    SELECT cell_id, {cell}, period, count() AS calls, quantiles({lo}, {q}, {hi})(e2e) AS qe2e, qe2e[1] AS lo,
        qe2e[2] AS pq, qe2e[3] AS hi,
        {qcols}
    FROM units GROUP BY cell_id, {cell}, period
),
band AS (
    SELECT {cell}, period, any(calls) AS calls, any(pq) AS pq,
        any(q_ttfb) AS q_ttfb, any(q_prefill) AS q_prefill, any(q_decode) AS q_decode, any(q_other) AS q_other,
        any(q_retries) AS q_retries, any(q_rate_limit_wait) AS q_rate_limit_wait, any(q_tpt) AS q_tpt,
        any(q_tokens) AS q_tokens,
        {band_cols}
    -- each call beside its cell's quantiles, joined on one hashed key (the cells are few, the calls many)
    FROM (SELECT units.*, qs.calls AS calls, qs.pq AS pq, {qpick}, e2e BETWEEN qs.lo AND qs.hi AS in_band
          FROM units INNER JOIN qs ON units.cell_id = qs.cell_id)
    GROUP BY {cell}, period
),
cells AS (
    SELECT {cell},
        {pairs}
    FROM band GROUP BY {cell}
    HAVING calls0 >= {int(min_samples)} AND calls1 >= {int(min_samples)}
),
split AS (
    SELECT *, {_logmean("b_decode", "log(b_decode1 / b_decode0)")} AS lm_decode FROM cells
)
SELECT level, g_provider AS provider, g_server AS server_address, g_model AS model, g_hour AS hour,
    d.1 AS component, d.2 AS delta_ms, d.3 AS before_ms,
    d.4 AS after_ms, calls0 AS calls_before, calls1 AS calls_after
FROM split
ARRAY JOIN [
        tuple('total', toFloat64(b_e2e1 - b_e2e0), toFloat64(pq0), toFloat64(pq1)),
        {arr}
    ] AS d
ORDER BY level = 'all' DESC, level = 'server' DESC, component = 'total' DESC, abs(delta_ms) DESC"""
