"""The analysis SQL, once: the provisioned Grafana alert rules, ``llmtap check-cost`` and ``llmtap report``.

Regressions are measured against a baseline, not a fixed threshold: the same window (e.g. the
last hour) on each of the previous N days, averaged. Each query returns one row per group
with a numeric ``value``; Grafana turns each row into an alert instance labelled by the
group columns, and ``check-cost`` prints the rows and exits 1 when one crosses the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP_COLUMNS = {
    "model": "request_model",
    "feature": "feature",
    "provider": "provider",
    "service": "service",
    "user": "user_id",
    "key": "api_key_id",
    "tenant": "tenant",
}


def _baseline_window(window_s: int, baseline_days: int) -> str:
    return (
        f"WITH {int(window_s)} AS w, {int(baseline_days)} AS n, now() AS t1, "
        "dateDiff('second', timestamp, t1) AS age, intDiv(age, 86400) AS day_ago, "
        "age - day_ago * 86400 AS age_in_day"
    )


def cost_regression_sql(
    window_s: int = 3600,
    baseline_days: int = 7,
    by: tuple[str, ...] = ("model", "feature"),
    min_samples: int = 20,
    where: str = "1=1",
    value: str = "ratio",
) -> str:
    """Cost in the window vs the mean cost of the same window on each of the previous days.

    ``value`` (``ratio``: cost per window, or ``per_call_ratio``) is repeated as a ``value``
    column for Grafana alerting, and orders the rows.
    """
    if value not in ("ratio", "per_call_ratio"):
        raise ValueError(value)
    cols = ", ".join(GROUP_COLUMNS[b] + (f" AS {b}" if GROUP_COLUMNS[b] != b else "") for b in by) or "'all' AS all"
    keys = ", ".join(by) or "all"
    return f"""{_baseline_window(window_s, baseline_days)}
SELECT {cols},
    sumIf(ifNull(cost_usd, 0), age < w) AS current_cost,
    countIf(age < w) AS current_calls,
    sumIf(ifNull(cost_usd, 0), day_ago BETWEEN 1 AND n AND age_in_day < w) / n AS baseline_cost,
    countIf(day_ago BETWEEN 1 AND n AND age_in_day < w) AS baseline_calls,
    round(current_cost / nullIf(baseline_cost, 0), 4) AS ratio,
    round((current_cost / nullIf(current_calls, 0))
          / nullIf(baseline_cost * n / nullIf(baseline_calls, 0), 0), 4) AS per_call_ratio,
    {value} AS value
FROM llm_calls
WHERE timestamp >= now() - toIntervalSecond(n * 86400 + w) AND timestamp <= now() AND ({where})
GROUP BY {keys}
HAVING current_calls >= {int(min_samples)} AND baseline_calls >= {int(min_samples)}
ORDER BY value DESC"""


def ttft_regression_sql(window_s: int = 1800, baseline_days: int = 7, min_samples: int = 20) -> str:
    return f"""{_baseline_window(window_s, baseline_days)}
SELECT provider, request_model AS model,
    quantileIf(0.95)(ttft_ms, age < w) AS current_p95,
    quantileIf(0.95)(ttft_ms, day_ago BETWEEN 1 AND n AND age_in_day < w) AS baseline_p95,
    round(current_p95 / nullIf(baseline_p95, 0), 4) AS value
FROM llm_calls
WHERE timestamp >= now() - toIntervalSecond(n * 86400 + w) AND ttft_ms IS NOT NULL
GROUP BY provider, model
HAVING countIf(age < w) >= {int(min_samples)}
    AND countIf(day_ago BETWEEN 1 AND n AND age_in_day < w) >= {int(min_samples)}"""


@dataclass(frozen=True)
class AlertRule:
    uid: str
    title: str
    sql: str
    threshold: float
    for_: str
    summary: str
    severity: str = "warning"


RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "llmtap-cost-per-hour-regression",
        "LLM cost per hour regression (vs same hour, last 7 days)",
        cost_regression_sql(value="ratio"),
        1.2,
        "10m",
        "{{ $labels.model }}/{{ $labels.feature }} costs {{ $values.B }}x its baseline",
    ),
    AlertRule(
        "llmtap-cost-per-call-regression",
        "LLM cost per call regression (vs last 7 days)",
        cost_regression_sql(value="per_call_ratio"),
        1.2,
        "10m",
        "{{ $labels.model }}/{{ $labels.feature }}: cost per call is {{ $values.B }}x baseline",
    ),
    AlertRule(
        "llmtap-quota-exhausted",
        "LLM quota exhausted",
        """SELECT provider, request_model AS model, api_key_id AS key, toFloat64(count()) AS value
FROM llm_calls
WHERE error_type = 'quota_exhausted' AND timestamp >= now() - INTERVAL 5 MINUTE
GROUP BY provider, model, key""",
        0,
        "0s",
        "{{ $labels.provider }} quota exhausted for key {{ $labels.key }}",
        "critical",
    ),
    AlertRule(
        "llmtap-mid-stream-errors",
        "LLM mid-stream error rate",
        """SELECT provider, request_model AS model, round(countIf(mid_stream_error) / count(), 4) AS value
FROM llm_calls
WHERE timestamp >= now() - INTERVAL 15 MINUTE AND stream
GROUP BY provider, model
HAVING count() >= 20""",
        0.05,
        "10m",
        "{{ $labels.model }}: {{ $values.B }} of streams fail after a 200",
    ),
    AlertRule(
        "llmtap-ttft-regression",
        "LLM TTFT p95 regression (vs same window, last 7 days)",
        ttft_regression_sql(),
        1.5,
        "15m",
        "{{ $labels.model }}: TTFT p95 is {{ $values.B }}x its baseline",
    ),
    AlertRule(
        "llmtap-truncation-rate",
        "LLM truncation rate (finish = length)",
        """SELECT provider, request_model AS model, feature,
    round(countIf(finish_reason = 'length') / count(), 4) AS value
FROM llm_calls
WHERE timestamp >= now() - INTERVAL 1 HOUR AND operation != 'embeddings' AND outcome = 'ok'
GROUP BY provider, model, feature
HAVING count() >= 20""",
        0.1,
        "15m",
        "{{ $labels.model }}/{{ $labels.feature }}: {{ $values.B }} of answers truncated",
    ),
)


def report_sql(since_s: int) -> dict[str, str]:
    """``llmtap report``: the totals, the cost by model, the errors, over the last ``since_s`` seconds."""
    rng = f"timestamp >= now() - INTERVAL {int(since_s)} SECOND"
    return {
        "total": f"""SELECT count() AS calls, round(sum(cost_usd), 4) AS cost_usd,
        sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
        countIf(outcome = 'error') AS errors, countIf(outcome = 'cancelled') AS cancelled,
        round(quantiles(0.5, 0.95)(ttft_ms)[1]) AS ttft_p50, round(quantiles(0.5, 0.95)(ttft_ms)[2]) AS ttft_p95,
        round(quantiles(0.5, 0.95)(duration_ms)[1]) AS duration_p50,
        round(quantiles(0.5, 0.95)(duration_ms)[2]) AS duration_p95
        FROM llm_calls WHERE {rng}""",
        "models": f"""SELECT provider, request_model AS model, count() AS calls,
        round(sum(cost_usd), 4) AS cost_usd, sum(input_tokens) AS input, sum(output_tokens) AS output,
        round(quantile(0.95)(ttft_ms)) AS ttft_p95_ms, round(countIf(outcome = 'error') / count(), 3) AS error_rate
        FROM llm_calls WHERE {rng} GROUP BY provider, model ORDER BY cost_usd DESC, calls DESC LIMIT 20""",
        "errors": f"""SELECT provider, error_type, count() AS calls, countIf(mid_stream_error) AS mid_stream
        FROM llm_calls WHERE {rng} AND outcome = 'error' GROUP BY provider, error_type ORDER BY calls DESC LIMIT 20""",
    }


# -- cost truth (#15): the cost page's panels and ``llmtap reconcile`` ------------------------------


def unpriced_models_sql(where: str) -> str:
    """Models whose calls have usage but no price (genai-prices does not know them, no price file
    rule matches), with their call count: what a price file should add."""
    return f"""SELECT provider, request_model AS model, response_model, count() AS calls,
    sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
FROM llm_calls WHERE {where} AND cost_usd IS NULL AND usage_source != 'none'
GROUP BY provider, model, response_model ORDER BY calls DESC LIMIT 50"""


def failed_attempts_sql(where: str) -> str:
    """Spend and time on failed attempts that were retried, per provider, model and error type.

    A retry chain is the calls of one ``(request_hash, api_key_id)`` of which one has ``attempt > 1``
    (the contract's retry); its failed attempts are its calls with ``outcome != 'ok'``. A quota-type
    429 retried more than once (a chain reaching attempt 3 or more over a quota error) is counted
    apart in ``quota_429_retried_more_than_once``: retrying an exhausted quota never helps."""
    return f"""WITH chains AS (
    SELECT provider, request_model AS model, request_hash, api_key_id, max(attempt) AS attempts,
        anyIf(error_type, outcome != 'ok') AS chain_error,
        countIf(outcome != 'ok') AS failed,
        sumIf(ifNull(cost_usd, 0), outcome != 'ok') AS failed_usd,
        sumIf(duration_ms, outcome != 'ok') AS failed_ms,
        countIf(status_code = 429 AND error_type = 'quota_exhausted') AS quota_429s,
        max(outcome = 'ok' AND attempt > 1) AS recovered
    FROM llm_calls
    WHERE {where} AND request_hash != '' AND (request_hash, api_key_id) IN (
        SELECT request_hash, api_key_id FROM llm_calls WHERE {where} AND attempt > 1)
    GROUP BY provider, model, request_hash, api_key_id
)
SELECT provider, model, chain_error AS error_type, count() AS retry_chains, sum(failed) AS failed_attempts,
    round(sum(failed_usd), 6) AS failed_spend_usd, round(sum(failed_ms) / 1000, 3) AS failed_time_s,
    max(attempts) AS max_attempt, sum(recovered) AS recovered_chains,
    countIf(quota_429s > 0 AND attempts >= 3) AS quota_429_retried_more_than_once
FROM chains GROUP BY provider, model, chain_error
ORDER BY quota_429_retried_more_than_once DESC, failed_time_s DESC LIMIT 50"""


def cache_misses_sql(where: str) -> str:
    """Prompt-cache misses by reason (``cache_miss_reason``) and what they cost over a warm cache."""
    return f"""SELECT cache_miss_reason AS reason, count() AS misses,
    round(sum(ifNull(cache_miss_cost_usd, 0)), 6) AS miss_cost_usd,
    round(sum(cost_usd), 6) AS calls_cost_usd
FROM llm_calls WHERE {where} AND cache_miss_reason != ''
GROUP BY reason ORDER BY miss_cost_usd DESC"""


def tracked_cost_sql(provider_names: tuple[str, ...], start: float, end: float) -> str:
    """``llmtap reconcile``: what llmtap tracked per UTC day and model in ``[start, end)`` for the
    providers named (API and batch calls; a plan's calls are not billed per token)."""
    names = ", ".join("'" + p.replace("\\", "").replace("'", "") + "'" for p in provider_names)
    return f"""SELECT toString(toDate(timestamp, 'UTC')) AS day,
    if(response_model != '', response_model, request_model) AS model,
    count() AS calls, sum(ifNull(cost_usd, 0)) AS tracked_usd
FROM llm_calls
WHERE timestamp >= toDateTime64({float(start):.3f}, 6) AND timestamp < toDateTime64({float(end):.3f}, 6)
    AND provider IN ({names}) AND usage_source != 'none' AND billing != 'subscription'
GROUP BY day, model ORDER BY day, model"""
