"""The analysis SQL, once: the alert rules (provisioned for Grafana and evaluated by the sidecar itself with
``--alert-webhook``), ``llmtap check-cost`` and ``llmtap report`` (the explain analyses: :mod:`.explain_sql`).
Each reads LLM calls only (:data:`llmtap.record.LLM_CALL_SQL`): an agent's telemetry is no call, its 404s no error.

Regressions are measured against a baseline, not a fixed threshold: the same window (e.g. the
last hour) on each of the previous N days, averaged. Each query returns one row per group
with a numeric ``value``; Grafana turns each row into an alert instance labelled by the
group columns, and ``check-cost`` prints the rows and exits 1 when one crosses the threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..record import LLM_CALL_SQL as LLM_CALL

GROUP_COLUMNS = {
    "model": "request_model",
    "feature": "feature",
    "provider": "provider",
    "service": "service",
    "user": "user_id",
    "key": "api_key_id",
    "tenant": "tenant",
}


NOW = "now64(6)"
"""The evaluation time in the rules' SQL: Grafana evaluates at ``now64(6)``; the sidecar's own alerting
(:mod:`llmtap.alerts`) also evaluates at past times to judge a rule's pending period on stored history.
Microseconds, as ``timestamp`` and :meth:`AlertRule.sql_at`: ``now()`` is whole seconds, and ``timestamp <= now()``
left out a call made earlier in the same second (``check-cost`` right after a call counted 0 calls)."""


def _baseline_window(window_s: int, baseline_days: int, t1: str = NOW) -> str:
    return (
        f"WITH {int(window_s)} AS w, {int(baseline_days)} AS n, {t1} AS t1, "
        "dateDiff('second', timestamp, t1) AS age, intDiv(age, 86400) AS day_ago, "
        "age - day_ago * 86400 AS age_in_day"
    )


def _recent(t1: str, minutes: int) -> str:
    return f"timestamp >= {t1} - INTERVAL {int(minutes)} MINUTE AND timestamp <= {t1}"


def cost_regression_sql(
    window_s: int = 3600,
    baseline_days: int = 7,
    by: tuple[str, ...] = ("model", "feature"),
    min_samples: int = 20,
    where: str = "1=1",
    value: str = "ratio",
    t1: str = NOW,
) -> str:
    """Cost in the window vs the mean cost of the same window on each of the previous days.

    ``value`` (``ratio``: cost per window, or ``per_call_ratio``) is repeated as a ``value``
    column for Grafana alerting, and orders the rows.
    """
    if value not in ("ratio", "per_call_ratio"):
        raise ValueError(value)
    cols = ", ".join(GROUP_COLUMNS[b] + (f" AS {b}" if GROUP_COLUMNS[b] != b else "") for b in by) or "'all' AS all"
    keys = ", ".join(GROUP_COLUMNS[b] for b in by) or "all"  # the columns: an alias (``user``) may name a function
    base = "baseline_cost" if value == "ratio" else "baseline_cost * n / nullIf(baseline_calls, 0)"
    return f"""{_baseline_window(window_s, baseline_days, t1)}
SELECT {cols},
    sumIf(ifNull(cost_usd, 0), age < w) AS current_cost,
    countIf(age < w) AS current_calls,
    sumIf(ifNull(cost_usd, 0), day_ago BETWEEN 1 AND n AND age_in_day < w) / n AS baseline_cost,
    countIf(day_ago BETWEEN 1 AND n AND age_in_day < w) AS baseline_calls,
    round(current_cost / nullIf(baseline_cost, 0), 4) AS ratio,
    round((current_cost / nullIf(current_calls, 0))
          / nullIf(baseline_cost * n / nullIf(baseline_calls, 0), 0), 4) AS per_call_ratio,
    {value} AS value,
    {base} AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND timestamp >= t1 - toIntervalSecond(n * 86400 + w) AND timestamp <= t1 AND ({where})
GROUP BY {keys}
HAVING current_calls >= {int(min_samples)} AND baseline_calls >= {int(min_samples)}
ORDER BY value DESC"""


def ttft_regression_sql(window_s: int = 1800, baseline_days: int = 7, min_samples: int = 20, t1: str = NOW) -> str:
    return _quantile_regression("ttft_ms", window_s, baseline_days, min_samples, t1)


def _quantile_regression(col: str, window_s: int, baseline_days: int, min_samples: int, t1: str) -> str:
    """p95 of ``col`` in the window vs p95 over the same window on each of the previous days."""
    return f"""{_baseline_window(window_s, baseline_days, t1)}
SELECT provider, request_model AS model,
    quantileIf(0.95)({col}, age < w) AS current_p95,
    quantileIf(0.95)({col}, day_ago BETWEEN 1 AND n AND age_in_day < w) AS baseline_p95,
    round(current_p95 / nullIf(baseline_p95, 0), 4) AS value,
    baseline_p95 AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND timestamp >= t1 - toIntervalSecond(n * 86400 + w) AND timestamp <= t1 AND {col} IS NOT NULL
GROUP BY provider, model
HAVING countIf(age < w) >= {int(min_samples)}
    AND countIf(day_ago BETWEEN 1 AND n AND age_in_day < w) >= {int(min_samples)}"""


def error_rate_sql(minutes: int = 15, baseline_days: int = 7, min_samples: int = 20, t1: str = NOW) -> str:
    """Share of calls that failed in the last ``minutes``, with the same window's share over the previous days."""
    return f"""{_baseline_window(minutes * 60, baseline_days, t1)}
SELECT provider, request_model AS model,
    countIf(age < w) AS calls,
    round(countIf(age < w AND outcome = 'error') / nullIf(calls, 0), 4) AS value,
    round(countIf(day_ago BETWEEN 1 AND n AND age_in_day < w AND outcome = 'error')
        / nullIf(countIf(day_ago BETWEEN 1 AND n AND age_in_day < w), 0), 4) AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND timestamp >= t1 - toIntervalSecond(n * 86400 + w) AND timestamp <= t1
GROUP BY provider, model
HAVING calls >= {int(min_samples)}"""


def no_first_token_sql(minutes: int = 15, min_samples: int = 20, t1: str = NOW) -> str:
    """Streams the provider accepted (2xx) that ended without a first content event: stalls, empty answers,
    cut streams (``llmtap_no_first_token_total`` minus the requests that failed outright)."""
    return f"""SELECT provider, request_model AS model, count() AS streams,
    round(countIf(content_events = 0) / count(), 4) AS value,
    CAST(NULL AS Nullable(Float64)) AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND {_recent(t1, minutes)} AND stream AND status_code BETWEEN 200 AND 299
    AND operation != 'embeddings'
GROUP BY provider, model
HAVING streams >= {int(min_samples)}"""


def capture_dropped_sql(window_s: int = 3600, baseline_days: int = 7, min_baseline: int = 20, t1: str = NOW) -> str:
    """Calls captured in the last hour per service vs the same hour on the previous days (mean): near 0 while
    the baseline had traffic means the sidecar stopped seeing it (clients bypass it, a proxy setting lost)."""
    return f"""{_baseline_window(window_s, baseline_days, t1)}
SELECT service,
    countIf(age < w) AS current_calls,
    countIf(day_ago BETWEEN 1 AND n AND age_in_day < w) / n AS baseline,
    round(current_calls / nullIf(baseline, 0), 4) AS value
FROM llm_calls
WHERE {LLM_CALL} AND timestamp >= t1 - toIntervalSecond(n * 86400 + w) AND timestamp <= t1
GROUP BY service
HAVING baseline >= {int(min_baseline)}"""


@dataclass(frozen=True)
class AlertRule:
    uid: str
    title: str
    build: Callable[[str], str]  # the evaluation time (an SQL expression) → the rule's query
    threshold: float
    for_: str
    summary: str
    severity: str = "warning"
    op: str = "gt"  # value > threshold fires ("lt": value < threshold)
    needs_uptime_s: int = 0  # the sidecar's own alerting judges it only once it has been up this long

    @property
    def sql(self) -> str:
        """The query at ``now64(6)``, as Grafana runs it."""
        return self.build(NOW)

    def sql_at(self, t: float) -> str:
        return self.build(f"toDateTime64({t:.6f}, 6, 'UTC')")

    def fires(self, value: float | None) -> bool:
        if value is None or value != value:
            return False
        return value > self.threshold if self.op == "gt" else value < self.threshold


RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "llmtap-cost-per-hour-regression",
        "LLM cost per hour regression (vs same hour, last 7 days)",
        lambda t1: cost_regression_sql(value="ratio", t1=t1),
        1.2,
        "10m",
        "{{ $labels.model }}/{{ $labels.feature }} costs {{ $values.B }}x its baseline",
    ),
    AlertRule(
        "llmtap-cost-per-call-regression",
        "LLM cost per call regression (vs last 7 days)",
        lambda t1: cost_regression_sql(value="per_call_ratio", t1=t1),
        1.2,
        "10m",
        "{{ $labels.model }}/{{ $labels.feature }}: cost per call is {{ $values.B }}x baseline",
    ),
    AlertRule(
        "llmtap-quota-exhausted",
        "LLM quota exhausted",
        lambda t1: (
            f"""SELECT provider, request_model AS model, api_key_id AS key, toFloat64(count()) AS value,
    CAST(NULL AS Nullable(Float64)) AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND error_type = 'quota_exhausted' AND {_recent(t1, 5)}
GROUP BY provider, model, key"""
        ),
        0,
        "0s",
        "{{ $labels.provider }} quota exhausted for key {{ $labels.key }}",
        "critical",
    ),
    AlertRule(
        "llmtap-error-rate",
        "LLM error rate",
        lambda t1: error_rate_sql(t1=t1),
        0.05,
        "5m",
        "{{ $labels.provider }}/{{ $labels.model }}: {{ $values.B }} of calls fail",
    ),
    AlertRule(
        "llmtap-mid-stream-errors",
        "LLM mid-stream error rate",
        lambda t1: (
            f"""SELECT provider, request_model AS model, round(countIf(mid_stream_error) / count(), 4) AS value,
    CAST(NULL AS Nullable(Float64)) AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND {_recent(t1, 15)} AND stream
GROUP BY provider, model
HAVING count() >= 20"""
        ),
        0.05,
        "10m",
        "{{ $labels.model }}: {{ $values.B }} of streams fail after a 200",
    ),
    AlertRule(
        "llmtap-ttft-regression",
        "LLM TTFT p95 regression (vs same window, last 7 days)",
        lambda t1: ttft_regression_sql(t1=t1),
        1.5,
        "15m",
        "{{ $labels.model }}: TTFT p95 is {{ $values.B }}x its baseline",
    ),
    AlertRule(
        "llmtap-stream-stalls",
        "LLM stream stalls: longest gap between tokens p95 (vs same window, last 7 days)",
        lambda t1: _quantile_regression("itl_max_ms", 1800, 7, 20, t1),
        2.0,
        "15m",
        "{{ $labels.model }}: the longest pause inside streams (p95) is {{ $values.B }}x its baseline",
    ),
    AlertRule(
        "llmtap-no-first-token",
        "LLM streams without a first token",
        lambda t1: no_first_token_sql(t1=t1),
        0.1,
        "5m",
        "{{ $labels.provider }}/{{ $labels.model }}: {{ $values.B }} of accepted streams sent no token",
    ),
    AlertRule(
        "llmtap-truncation-rate",
        "LLM truncation rate (finish = length)",
        lambda t1: (
            f"""SELECT provider, request_model AS model, feature,
    round(countIf(finish_reason = 'length') / count(), 4) AS value, CAST(NULL AS Nullable(Float64)) AS baseline
FROM llm_calls
WHERE {LLM_CALL} AND {_recent(t1, 60)} AND operation != 'embeddings' AND outcome = 'ok'
GROUP BY provider, model, feature
HAVING count() >= 20"""
        ),
        0.1,
        "15m",
        "{{ $labels.model }}/{{ $labels.feature }}: {{ $values.B }} of answers truncated",
    ),
    AlertRule(
        "llmtap-capture-dropped",
        "LLM capture dropped (calls per hour vs same hour, last 7 days)",
        lambda t1: capture_dropped_sql(t1=t1),
        0.05,
        "15m",
        "{{ $labels.service }}: {{ $values.B }}x its usual calls per hour reach the sidecar",
        op="lt",
        needs_uptime_s=3600,
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
        FROM llm_calls WHERE {LLM_CALL} AND {rng}""",
        "models": f"""SELECT provider, request_model AS model, count() AS calls,
        round(sum(cost_usd), 4) AS cost_usd, sum(input_tokens) AS input, sum(output_tokens) AS output,
        round(quantile(0.95)(ttft_ms)) AS ttft_p95_ms, round(countIf(outcome = 'error') / count(), 3) AS error_rate
        FROM llm_calls WHERE {LLM_CALL} AND {rng}
        GROUP BY provider, model ORDER BY cost_usd DESC, calls DESC LIMIT 20""",
        "errors": f"""SELECT provider, error_type, count() AS calls, countIf(mid_stream_error) AS mid_stream
        FROM llm_calls WHERE {LLM_CALL} AND {rng} AND outcome = 'error'
        GROUP BY provider, error_type ORDER BY calls DESC LIMIT 20""",
    }


# -- cost truth (#15): the cost page's panels and ``llmtap reconcile`` ------------------------------


def unpriced_models_sql(where: str) -> str:
    """Models whose calls have usage but no price (genai-prices does not know them, no price file
    rule matches), with their call count: what a price file should add."""
    return f"""SELECT provider, request_model AS model, response_model, count() AS calls,
    sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
FROM llm_calls WHERE {LLM_CALL} AND {where} AND cost_usd IS NULL AND usage_source != 'none'
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
    WHERE {LLM_CALL} AND {where} AND request_hash != '' AND (request_hash, api_key_id) IN (
        SELECT request_hash, api_key_id FROM llm_calls WHERE {LLM_CALL} AND {where} AND attempt > 1)
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
FROM llm_calls WHERE {LLM_CALL} AND {where} AND cache_miss_reason != ''
GROUP BY reason ORDER BY miss_cost_usd DESC"""


def tracked_cost_sql(provider_names: tuple[str, ...], start: float, end: float) -> str:
    """``llmtap reconcile``: what llmtap tracked per UTC day and model in ``[start, end)`` for the
    providers named (API and batch calls; a plan's calls are not billed per token)."""
    names = ", ".join("'" + p.replace("\\", "").replace("'", "") + "'" for p in provider_names)
    return f"""SELECT toString(toDate(timestamp, 'UTC')) AS day,
    if(response_model != '', response_model, request_model) AS model,
    count() AS calls, sum(ifNull(cost_usd, 0)) AS tracked_usd
FROM llm_calls
WHERE {LLM_CALL} AND timestamp >= toDateTime64({float(start):.3f}, 6) AND timestamp < toDateTime64({float(end):.3f}, 6)
    AND provider IN ({names}) AND usage_source != 'none' AND billing != 'subscription'
GROUP BY day, model ORDER BY day, model"""
