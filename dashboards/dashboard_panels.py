"""The llmtap dashboards, panel by panel (SQL with the ClickHouse plugin's macros)."""

from __future__ import annotations

from typing import TypedDict

from dashboard_kit import EXPLORER, EXPLORER_VARS, OTHER, Board, DataLink, F, T, W, custom_var, textbox_var

from llmtap.admin.explain_sql import explain_cost_sql
from llmtap.admin.latency_sql import explain_latency_sql
from llmtap.admin.queries import cache_misses_sql, failed_attempts_sql, unpriced_models_sql
from llmtap.record import LLM_CALL_SQL


class Periods(TypedDict):
    """The explain analyses' window and baseline, as SQL expressions."""

    t1: str
    w: str
    n: str
    step: str


# The explain panels: the dashboard's time range is the window, the baseline a variable.
# An error rate's colour: green only while it is low (under 1%), orange to 5%, red above.
ERROR_RATE = ((None, "green"), (0.01, "orange"), (0.05, "red"))
BASELINE = custom_var("baseline", ["7d", "previous"], "baseline", include_all=False)
_W = "toUnixTimestamp($__toTime) - toUnixTimestamp($__fromTime)"
PERIODS: Periods = {
    "t1": "$__toTime",
    "w": _W,
    "n": "if(${baseline:singlequote} = 'previous', 1, 7)",
    "step": f"if(${{baseline:singlequote}} = 'previous', {_W}, 86400)",
}


def overview() -> Board:
    b = Board("llmtap-overview", "LLM overview", ["overview"])
    b.stat("Calls", f"SELECT count() AS calls FROM llm_calls WHERE {W}")
    b.stat("Cost", f"SELECT sum(cost_usd) AS cost FROM llm_calls WHERE {W}", unit="currencyUSD")
    b.stat(
        "Error rate",
        f"SELECT countIf(outcome = 'error') / count() AS error_rate FROM llm_calls WHERE {W}",
        unit="percentunit",
        thresholds=ERROR_RATE,
    )
    b.stat("TTFT p95", f"SELECT quantile(0.95)(ttft_ms) AS ttft_p95 FROM llm_calls WHERE {W}", unit="ms")
    b.ts(
        "Calls/s by provider",
        f"""SELECT {T}, provider, count() / $__interval_s AS calls_per_s
FROM llm_calls WHERE {W} GROUP BY time, provider ORDER BY time""",
        unit="reqps",
    )
    b.ts(
        "Cost per hour by model",
        f"""SELECT {T}, request_model, sum(cost_usd) * 3600 / $__interval_s AS usd_per_hour
FROM llm_calls WHERE {W} GROUP BY time, request_model ORDER BY time""",
        unit="currencyUSD",
    )
    b.ts(
        "Tokens/s",
        f"""SELECT {T}, sum(input_tokens) / $__interval_s AS input, sum(output_tokens) / $__interval_s AS output,
    sum(cache_read_tokens) / $__interval_s AS cache_read, sum(reasoning_tokens) / $__interval_s AS reasoning
FROM llm_calls WHERE {W} GROUP BY time ORDER BY time""",
    )
    b.ts(
        "Error rate by provider",
        f"""SELECT {T}, provider, countIf(outcome = 'error') / count() AS error_rate
FROM llm_calls WHERE {W} GROUP BY time, provider ORDER BY time""",
        unit="percentunit",
    )
    b.ts(
        "TTFT p50 / p95 by model",
        f"""WITH quantiles(0.5, 0.95)(ttft_ms) AS q
SELECT {T}, request_model, q[1] AS p50, q[2] AS p95
FROM llm_calls WHERE {W} AND ttft_ms IS NOT NULL GROUP BY time, request_model ORDER BY time""",
        unit="ms",
        w=24,
    )
    return b


def latency() -> Board:
    b = Board("llmtap-latency", "LLM latency", ["latency"], [BASELINE])
    b.ts(
        "TTFT p95 by model",
        f"""SELECT {T}, request_model, quantile(0.95)(ttft_ms) AS ttft_p95
FROM llm_calls WHERE {W} AND ttft_ms IS NOT NULL GROUP BY time, request_model ORDER BY time""",
        unit="ms",
    )
    b.heatmap(
        "TTFT distribution",
        f"""SELECT {T}, multiIf(ttft_ms < 250, '0000-0250', ttft_ms < 500, '0250-0500',
    ttft_ms < 1000, '0500-1000', ttft_ms < 2000, '1000-2000', ttft_ms < 4000, '2000-4000', '4000+') AS bucket,
    count() AS calls
FROM llm_calls WHERE {W} AND ttft_ms IS NOT NULL GROUP BY time, bucket ORDER BY time, bucket""",
        description="Calls per TTFT bucket (ms) over time",
    )
    b.ts(
        "Inter-token latency p50 / p95",
        f"""SELECT {T}, quantile(0.5)(itl_p50_ms) AS itl_p50, quantile(0.95)(itl_p95_ms) AS itl_p95
FROM llm_calls WHERE {W} AND itl_p50_ms IS NOT NULL GROUP BY time ORDER BY time""",
        unit="ms",
    )
    b.ts(
        "Output tokens/s by model (median)",
        f"""SELECT {T}, request_model, quantile(0.5)(output_tokens_per_s) AS tokens_per_s
FROM llm_calls WHERE {W} AND output_tokens_per_s IS NOT NULL GROUP BY time, request_model ORDER BY time""",
    )
    b.ts(
        "Where the time goes: TTFB, prefill → first token, decode",
        f"""SELECT {T}, avg(ttfb_ms) AS ttfb,
    avg(ttft_ms - ttfb_ms) AS prefill_to_first_token, avg(decode_ms) AS decode
FROM llm_calls WHERE {W} AND ttft_ms IS NOT NULL GROUP BY time ORDER BY time""",
        unit="ms",
        stacked=True,
        fill_opacity=40,
        w=24,
    )
    b.ts(
        "llmtap's own overhead per call p50 / p99",
        f"""WITH quantiles(0.5, 0.99)(overhead_ms) AS q
SELECT {T}, provider, q[1] AS p50, q[2] AS p99
FROM llm_calls WHERE {W} AND overhead_ms IS NOT NULL GROUP BY time, provider ORDER BY time""",
        unit="ms",
        description="Time llmtap's own code spent on the proxy's event loop per call (hooks and the side parser "
        "on every chunk): what the sidecar adds beyond proxying. Also llmtap_overhead_seconds on /metrics.",
    )
    b.table(
        "Slowest calls",
        f"""SELECT timestamp, service, provider, request_model, feature, round(duration_ms) AS duration_ms,
    round(ttft_ms) AS ttft_ms, output_tokens, outcome, trace_id
FROM llm_calls WHERE {W} ORDER BY duration_ms DESC LIMIT 50""",
        w=24,
        h=10,
        links=[TRACE_LINK],
    )
    b.table(
        "Why is it slow? (duration p95 vs baseline, per server and hour)",
        f"""SELECT * FROM ({explain_latency_sql(where=F, **PERIODS)})
WHERE level != 'all' AND component != 'total' AND delta_ms > 0 ORDER BY delta_ms DESC LIMIT 30""",
        w=24,
        h=10,
        description="The same analysis as `llmtap explain-latency`: the change of the duration p95 around the quantile "
        "split into TTFB, prefill, decode length, time per token, retries and rate-limit waits (ms)",
    )
    return b


TRACE_LINK = DataLink("Open trace", "/d/llmtap-trace/llm-trace?var-trace_id=${__data.fields.trace_id}")


def cost() -> Board:
    b = Board("llmtap-cost", "LLM cost", ["cost"], [BASELINE])
    b.stat("Cost", f"SELECT sum(cost_usd) AS cost FROM llm_calls WHERE {W}", unit="currencyUSD")
    b.stat(
        "Cost per call",
        f"SELECT sum(cost_usd) / countIf(cost_usd IS NOT NULL) AS per_call FROM llm_calls WHERE {W}",
        unit="currencyUSD",
    )
    b.stat(
        "Cache hit ratio",
        f"SELECT sum(cache_read_tokens) / sum(input_tokens) AS cache_hit FROM llm_calls WHERE {W}",
        unit="percentunit",
    )
    b.stat(
        "Unpriced calls",
        f"SELECT countIf(cost_usd IS NULL AND usage_source != 'none') AS unpriced FROM llm_calls WHERE {W}",
        description="Calls whose model has no known price",
    )
    b.bar(
        "Cost by model",
        f"""SELECT request_model, sum(cost_usd) AS cost FROM llm_calls WHERE {W}
GROUP BY request_model ORDER BY cost DESC LIMIT 15""",
        unit="currencyUSD",
    )
    b.bar(
        "Cost by feature",
        f"""SELECT feature, sum(cost_usd) AS cost FROM llm_calls WHERE {W}
GROUP BY feature ORDER BY cost DESC LIMIT 15""",
        unit="currencyUSD",
    )
    b.table(
        "Why did cost change?",
        explain_cost_sql(("model", "feature"), where=F, **PERIODS),
        w=24,
        h=10,
        description="The same analysis as `llmtap explain-cost`: the change in cost between the dashboard's range and "
        "its baseline, split exactly into drivers (volume, mix, tokens per call, cache hit ratio, unit price, "
        "modality mix, tool calls, new, gone, retries); the first row is the total",
    )
    b.bar(
        "Cost by tenant",
        f"""SELECT if(tenant = '', '(none)', tenant) AS tenant, sum(cost_usd) AS cost FROM llm_calls WHERE {W}
GROUP BY tenant ORDER BY cost DESC LIMIT 15""",
        unit="currencyUSD",
    )
    b.bar(
        "Cost by user",
        f"""SELECT if(user_id = '', '(none)', user_id) AS user, sum(cost_usd) AS cost FROM llm_calls WHERE {W}
GROUP BY user_id ORDER BY cost DESC LIMIT 15""",  # the column: the alias `user` names a function too
        unit="currencyUSD",
    )
    b.ts(
        "Cost per call trend by model",
        f"""SELECT {T}, request_model, sum(cost_usd) / countIf(cost_usd IS NOT NULL) AS usd_per_call
FROM llm_calls WHERE {W} GROUP BY time, request_model ORDER BY time""",
        unit="currencyUSD",
    )
    b.ts(
        "Cache hit ratio by model",
        f"""SELECT {T}, request_model, sum(cache_read_tokens) / nullIf(sum(input_tokens), 0) AS cache_hit
FROM llm_calls WHERE {W} GROUP BY time, request_model ORDER BY time""",
        unit="percentunit",
    )
    b.ts(
        "Cost this week vs last week",
        f"""SELECT time, sum(this_week) AS this_week, sum(last_week) AS last_week FROM (
    SELECT {T}, sum(cost_usd) AS this_week, 0 AS last_week
    FROM llm_calls WHERE {W} GROUP BY time
    UNION ALL
    SELECT toStartOfInterval(toDateTime(timestamp + INTERVAL 7 DAY), INTERVAL $__interval_s second) AS time,
        0 AS this_week, sum(cost_usd) AS last_week
    FROM llm_calls WHERE timestamp >= $__fromTime - INTERVAL 7 DAY AND timestamp <= $__toTime - INTERVAL 7 DAY
        AND {LLM_CALL_SQL} AND {F}
    GROUP BY time
) GROUP BY time ORDER BY time""",
        unit="currencyUSD",
        w=24,
    )
    b.table(
        "Top spenders (tenant, user)",
        f"""SELECT tenant, user_id, count() AS calls, round(sum(cost_usd), 4) AS cost_usd,
    sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
FROM llm_calls WHERE {W} AND (user_id != '' OR tenant != '') GROUP BY tenant, user_id
ORDER BY cost_usd DESC LIMIT 20""",
    )
    b.table(
        "Spend by API key",
        f"""SELECT api_key_id, provider, count() AS calls, round(sum(cost_usd), 4) AS cost_usd
FROM llm_calls WHERE {W} AND api_key_id != '' GROUP BY api_key_id, provider ORDER BY cost_usd DESC LIMIT 20""",
    )
    b.table(
        "Unpriced models",
        unpriced_models_sql(W),
        description="Models with usage but no known price, and their call count: add them to a price file (--prices)",
    )
    b.table(
        "Spend and time on failed attempts",
        failed_attempts_sql(W),
        description="Retried requests (attempt > 1): what their failed attempts cost and how long they took. "
        "quota_429_retried_more_than_once: quota 429s retried again and again, which never helps",
        w=24,
    )
    b.bar(
        "Cost by modality",
        f"""SELECT part.1 AS modality, sum(part.2) AS cost FROM (
    SELECT arrayJoin([
        ('tokens at the text rate', ifNull(cost_usd, 0) - ifNull(tool_cost_usd, 0) - premium),
        ('audio and images above the text rate', premium),
        ('server tool fees', ifNull(tool_cost_usd, 0))]) AS part
    FROM (
        SELECT cost_usd, tool_cost_usd,
            greatest(coalesce(uncached_input_cost_usd, input_cost_usd, 0)
                - coalesce(text_rate_input_cost_usd, uncached_input_cost_usd, input_cost_usd, 0), 0)
                * ifNull(input_cost_usd / nullIf(uncached_input_cost_usd, 0), 1)
            + greatest(ifNull(output_cost_usd, 0) - coalesce(text_rate_output_cost_usd, output_cost_usd, 0), 0)
                AS premium
        FROM llm_calls WHERE {W} AND cost_usd IS NOT NULL))
GROUP BY modality ORDER BY cost DESC""",
        unit="currencyUSD",
        description="What the calls cost split by what was billed: their tokens priced at the text rate, what audio "
        "and image tokens cost above that rate (input_audio_tokens, output_audio_tokens, … at their own prices), "
        "and server-side tool fees (tool_cost_usd)",
    )
    b.table(
        "Server tool fees",
        f"""SELECT provider, request_model, kind, count() AS calls, sum(uses) AS uses,
    round(sum(fee), 6) AS fees_usd, countIf(unpriced) AS unpriced_calls
FROM (
    SELECT provider, request_model, tool_cost_usd IS NULL AS unpriced, arrayJoin(mapKeys(server_tool_calls)) AS kind,
        server_tool_calls[kind] AS uses,
        ifNull(tool_cost_usd, 0) * uses / arraySum(mapValues(server_tool_calls)) AS fee
    FROM llm_calls WHERE {W} AND length(server_tool_calls) > 0)
GROUP BY provider, request_model, kind ORDER BY fees_usd DESC, uses DESC LIMIT 20""",
        description="Billed server-side tool uses (server_tool_calls: web search, web fetch, file search, code "
        "execution, grounding, …) and their fees (tool_cost_usd, part of cost_usd; a call's fees shared by its "
        "uses). unpriced_calls: uses no price covers — add them to a price file (tools = {…})",
    )
    b.table(
        "Cache misses by reason, and their cost",
        cache_misses_sql(W),
        description="Prompt-cache misses (cache_miss_reason) and what each cost over a warm cache",
    )
    return b


def errors() -> Board:
    b = Board("llmtap-errors", "LLM errors", ["errors"])
    b.ts(
        "Responses by status class",
        f"""SELECT {T}, multiIf(status_code = 0, 'no response', status_code < 300, '2xx',
    status_code < 500, '4xx', '5xx') AS class, count() AS calls
FROM llm_calls WHERE {W} GROUP BY time, class ORDER BY time""",
    )
    b.ts(
        "Mid-stream errors behind a 200",
        f"""SELECT {T}, error_type, count() AS errors
FROM llm_calls WHERE {W} AND mid_stream_error GROUP BY time, error_type ORDER BY time""",
    )
    b.bar(
        "429 and 529: rate limit vs quota vs overload",
        f"""SELECT error_type, count() AS calls FROM llm_calls
WHERE {W} AND error_type IN ('rate_limited', 'quota_exhausted', 'overloaded')
GROUP BY error_type ORDER BY calls DESC""",
    )
    b.ts(
        "Retry-after asked by providers",
        f"""SELECT {T}, provider, max(retry_after_s) AS max_retry_after_s
FROM llm_calls WHERE {W} AND retry_after_s IS NOT NULL GROUP BY time, provider ORDER BY time""",
        unit="s",
    )
    b.ts(
        "Truncation rate (finish = length)",
        f"""SELECT {T}, request_model, countIf(finish_reason = 'length') / count() AS truncated
FROM llm_calls WHERE {W} AND operation != 'embeddings' GROUP BY time, request_model ORDER BY time""",
        unit="percentunit",
    )
    b.ts(
        "Cancelled by the client",
        f"""SELECT {T}, service, countIf(outcome = 'cancelled') AS cancelled
FROM llm_calls WHERE {W} GROUP BY time, service ORDER BY time""",
    )
    b.table(
        "Errors by type",
        f"""SELECT provider, error_type, any(error_code) AS example_code, count() AS calls,
    any(error_message) AS example_message
FROM llm_calls WHERE {W} AND outcome = 'error' GROUP BY provider, error_type ORDER BY calls DESC LIMIT 30""",
        w=24,
    )
    b.table(
        "Other requests (not LLM calls)",
        f"""SELECT provider, server_address, if(client_name = '', 'unknown', client_name) AS client,
    multiIf(status_code = 0, 'no response', status_code < 300, '2xx', status_code < 500, '4xx', '5xx') AS status,
    count() AS requests, sum(request_bytes) AS request_bytes, max(timestamp) AS last
FROM llm_calls WHERE {OTHER} GROUP BY provider, server_address, client, status ORDER BY requests DESC LIMIT 50""",
        description="Requests on intercepted hosts that are no model call (api = ''): agents' telemetry and "
        "event logging, token counts, uploads. Counted in none of the other panels (llmtap_other_requests_total).",
        w=24,
    )
    b.ts(
        "Retries (a failed request sent again)",
        f"""SELECT {T}, provider, countIf(attempt > 1) AS retries
FROM llm_calls WHERE {W} GROUP BY time, provider ORDER BY time""",
        description="Calls with attempt > 1: the same request (same body, same key) within 10 minutes of a failed one",
    )
    b.table(
        "Retried requests (failed, then repeated)",
        f"""SELECT min(timestamp) AS first, any(service) AS service, any(provider) AS provider,
    any(request_model) AS model, max(attempt) AS attempts, countIf(outcome = 'error') AS failed,
    arrayStringConcat(arrayDistinct(groupArrayIf(error_type, error_type != '')), ', ') AS errors,
    argMax(outcome, attempt) AS final_outcome, round((max(toUnixTimestamp64Milli(timestamp))
        - min(toUnixTimestamp64Milli(timestamp))) / 1000, 1) AS span_s,
    round(sumIf(cost_usd, outcome = 'error'), 6) AS failed_cost_usd, argMax(trace_id, attempt) AS trace_id
FROM (SELECT timestamp, service, provider, request_model, attempt, outcome, error_type, cost_usd, trace_id,
    request_hash, api_key_id FROM llm_calls WHERE {W} AND request_hash != '' AND (request_hash, api_key_id) IN (
        SELECT request_hash, api_key_id FROM llm_calls WHERE {W} AND attempt > 1))
GROUP BY request_hash, api_key_id
ORDER BY attempts DESC, first DESC LIMIT 30""",
        w=24,
        links=[TRACE_LINK],
    )
    return b


def agents() -> Board:
    b = Board("llmtap-agents", "LLM agents and plans", ["agents"])
    b.ts(
        "Plan window utilisation and status over time",
        f"""SELECT {T},
    max(toFloat64OrNull(ratelimit_headers['anthropic-ratelimit-unified-5h-utilization'])) AS five_hour,
    max(toFloat64OrNull(ratelimit_headers['anthropic-ratelimit-unified-7d-utilization'])) AS seven_day,
    countIf(ratelimit_headers['anthropic-ratelimit-unified-status'] = 'allowed_warning') / count() AS warning,
    countIf(ratelimit_headers['anthropic-ratelimit-unified-status'] = 'rejected') / count() AS rejected
FROM llm_calls WHERE {W} AND ratelimit_headers['anthropic-ratelimit-unified-status'] != ''
GROUP BY time ORDER BY time""",
        unit="percentunit",
        description="Claude plans (anthropic-ratelimit-unified-*): the highest 5-hour and 7-day window "
        "utilisation reported in each interval, and the share of calls answered allowed_warning / rejected",
    )
    b.ts(
        "Codex plan windows (ChatGPT plans)",
        f"""SELECT {T},
    max(toFloat64OrNull(ratelimit_headers['x-codex-primary-used-percent'])) / 100 AS primary_window,
    max(toFloat64OrNull(ratelimit_headers['x-codex-secondary-used-percent'])) / 100 AS secondary_window
FROM llm_calls WHERE {W} AND ratelimit_headers['x-codex-primary-used-percent'] != ''
GROUP BY time ORDER BY time""",
        unit="percentunit",
        description="x-codex-primary-used-percent (the 5-hour window) and x-codex-secondary-used-percent (weekly)",
    )
    b.stat(
        "Plan traffic at API prices",
        f"SELECT sum(cost_usd) AS api_equivalent FROM llm_calls WHERE {W} AND billing = 'subscription'",
        unit="currencyUSD",
        description="What the calls billed to a subscription would have cost at API list prices",
    )
    b.stat(
        "Calls on plans",
        f"SELECT countIf(billing = 'subscription') / count() AS on_plans FROM llm_calls WHERE {W}",
        unit="percentunit",
    )
    b.stat(
        "WebSocket calls",
        f"SELECT countIf(transport = 'websocket') AS websocket_calls FROM llm_calls WHERE {W}",
    )
    b.stat(
        "Agent sessions",
        f"SELECT uniqExactIf(session_id, client_name != '' AND session_id != '') AS sessions FROM llm_calls WHERE {W}",
    )
    b.ts(
        "Cost per hour by billing",
        f"""SELECT {T}, if(billing = '', 'unknown', billing) AS billing,
    sum(cost_usd) * 3600 / $__interval_s AS usd_per_hour
FROM llm_calls WHERE {W} GROUP BY time, billing ORDER BY time""",
        unit="currencyUSD",
    )
    b.bar(
        "Calls by client",
        f"""SELECT if(client_name = '', 'unknown', client_name) AS client, count() AS calls FROM llm_calls WHERE {W}
GROUP BY client ORDER BY calls DESC LIMIT 15""",
    )
    b.table(
        "Agent sessions by cost",
        f"""SELECT session_id, any(client_name) AS client, any(service) AS service, count() AS calls,
    round(sum(cost_usd), 4) AS cost_usd, sum(input_tokens) AS input_tokens,
    min(timestamp) AS first, max(timestamp) AS last
FROM llm_calls WHERE {W} AND client_name != '' AND session_id != ''
GROUP BY session_id ORDER BY cost_usd DESC LIMIT 30""",
        w=24,
    )
    return b


def calls() -> Board:
    b = Board("llmtap-calls", "LLM calls explorer", ["calls"], EXPLORER_VARS)
    b.table(
        "Calls",
        f"""SELECT timestamp, service, provider, request_model, feature, tenant, user_id, session_id, outcome,
    error_type, status_code, attempt, input_tokens, output_tokens, round(cost_usd, 6) AS cost_usd,
    round(ttft_ms) AS ttft_ms, round(duration_ms) AS duration_ms, finish_reason, request_id, trace_id
FROM llm_calls WHERE {W} AND {EXPLORER} ORDER BY timestamp DESC LIMIT 500""",
        w=24,
        h=20,
        links=[TRACE_LINK],
    )
    return b


def trace() -> Board:
    b = Board("llmtap-trace", "LLM trace", ["trace"], [textbox_var("trace_id", "trace id")], filters=False)
    b.traces(
        "Trace",
        """SELECT TraceId AS traceID, SpanId AS spanID, ParentSpanId AS parentSpanID,
    ServiceName AS serviceName, SpanName AS operationName,
    multiply(toUnixTimestamp64Nano(Timestamp), 0.000001) AS startTime, multiply(Duration, 0.000001) AS duration,
    arrayMap(key -> map('key', key, 'value', SpanAttributes[key]), mapKeys(SpanAttributes)) AS tags,
    arrayMap(key -> map('key', key, 'value', ResourceAttributes[key]), mapKeys(ResourceAttributes)) AS serviceTags,
    if(StatusCode IN ('Error', 'STATUS_CODE_ERROR'), 2, 0) AS statusCode
FROM otel_traces WHERE TraceId = ${trace_id:singlequote} ORDER BY startTime""",
        w=24,
        h=16,
    )
    return b
