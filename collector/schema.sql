-- llmtap ClickHouse schema: the single source used by the embedded store (chDB),
-- the ClickHouse-server writer and the OTel Collector deployment.
-- `{db}` is replaced by the database name. Every statement is idempotent.
-- Inserts from llmtap's writer carry insert_deduplication_token and
-- deduplicate_blocks_in_dependent_materialized_views = 1, so the views dedupe too.

CREATE DATABASE IF NOT EXISTS {db};

-- The schema version this store is at (llmtap upgrades older stores from this file at start).
CREATE TABLE IF NOT EXISTS {db}.llmtap_schema (
    version UInt32,
    applied_at DateTime DEFAULT now()
) ENGINE = MergeTree()
ORDER BY version;

-- Exactly the table the OTel Collector ClickHouse exporter creates
-- (exporter/clickhouseexporter/internal/sqltemplates/traces_table.sql), plus a
-- deduplication window so a batch re-sent after a crash (same insert_deduplication_token)
-- is not stored twice. Run the collector with create_schema: false.
CREATE TABLE IF NOT EXISTS {db}.otel_traces (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

-- One typed row per LLM call (the llm_calls contract in DESIGN.md).
CREATE TABLE IF NOT EXISTS {db}.llm_calls (
    timestamp DateTime64(6, 'UTC'),
    trace_id String,
    span_id String,
    service LowCardinality(String),
    provider LowCardinality(String),
    api LowCardinality(String),
    operation LowCardinality(String),
    server_address LowCardinality(String),
    request_model LowCardinality(String),
    response_model LowCardinality(String),
    request_id String,
    response_id String,
    stream Bool,
    status_code UInt16,
    outcome LowCardinality(String),
    error_type LowCardinality(String),
    error_code String,
    error_message String,
    mid_stream_error Bool,
    finish_reason LowCardinality(String),
    finish_reason_raw String,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    reasoning_tokens UInt64,
    usage_source LowCardinality(String),
    cost_usd Nullable(Float64),
    input_cost_usd Nullable(Float64),
    output_cost_usd Nullable(Float64),
    ttfb_ms Nullable(Float64),
    ttft_ms Nullable(Float64),
    duration_ms Float64,
    decode_ms Nullable(Float64),
    itl_p50_ms Nullable(Float64),
    itl_p95_ms Nullable(Float64),
    itl_max_ms Nullable(Float64),
    output_tokens_per_s Nullable(Float64),
    provider_processing_ms Nullable(Float64),
    content_events UInt32,
    tool_calls UInt32,
    max_output_tokens Nullable(UInt32),
    retry_after_s Nullable(Float64),
    ratelimit_remaining_requests Nullable(Int64),
    ratelimit_remaining_tokens Nullable(Int64),
    request_bytes UInt64,
    response_bytes UInt64,
    user_id String,
    session_id String,
    tenant String,
    feature String,
    prompt_version String,
    api_key_id String,
    request_hash String,
    transport LowCardinality(String) DEFAULT 'http',
    connection_id String,
    service_tier LowCardinality(String),
    request_service_tier LowCardinality(String),
    cache_write_1h_tokens UInt64,
    cost_source LowCardinality(String),
    price_version LowCardinality(String),
    billing LowCardinality(String),
    client_name LowCardinality(String),
    client_version LowCardinality(String),
    ratelimit_headers Map(LowCardinality(String), String),
    attempt UInt16 DEFAULT 1,
    cache_miss_reason LowCardinality(String),
    cache_miss_cost_usd Nullable(Float64),
    overhead_ms Nullable(Float64),
    batch_id String,
    uncached_input_cost_usd Nullable(Float64),
    input_audio_tokens UInt64,
    input_image_tokens UInt64,
    output_audio_tokens UInt64,
    output_image_tokens UInt64,
    cache_read_audio_tokens UInt64,
    server_tool_calls Map(LowCardinality(String), UInt32),
    tool_cost_usd Nullable(Float64),
    text_rate_input_cost_usd Nullable(Float64),
    text_rate_output_cost_usd Nullable(Float64)
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (service, provider, request_model, timestamp)
SETTINGS non_replicated_deduplication_window = 10000;

-- otel_traces → llm_calls, whichever route (llmtap's writer or an OTel Collector)
-- wrote the span. Only llmtap's own spans (its instrumentation scope) are selected:
-- current exporters write the scope to ScopeName, older ones to otel.scope.name.
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.llm_calls_mv TO {db}.llm_calls AS
SELECT
    toDateTime64(Timestamp, 6, 'UTC') AS timestamp,
    TraceId AS trace_id,
    SpanId AS span_id,
    ServiceName AS service,
    SpanAttributes['gen_ai.provider.name'] AS provider,
    SpanAttributes['llmtap.api'] AS api,
    SpanAttributes['gen_ai.operation.name'] AS operation,
    SpanAttributes['server.address'] AS server_address,
    SpanAttributes['gen_ai.request.model'] AS request_model,
    SpanAttributes['gen_ai.response.model'] AS response_model,
    SpanAttributes['llmtap.request_id'] AS request_id,
    SpanAttributes['gen_ai.response.id'] AS response_id,
    SpanAttributes['gen_ai.request.stream'] = 'true' AS stream,
    toUInt16OrZero(SpanAttributes['http.response.status_code']) AS status_code,
    SpanAttributes['llmtap.outcome'] AS outcome,
    SpanAttributes['error.type'] AS error_type,
    SpanAttributes['llmtap.error_code'] AS error_code,
    SpanAttributes['llmtap.error_message'] AS error_message,
    SpanAttributes['llmtap.mid_stream_error'] = 'true' AS mid_stream_error,
    SpanAttributes['llmtap.finish_reason'] AS finish_reason,
    SpanAttributes['llmtap.finish_reason_raw'] AS finish_reason_raw,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.input_tokens']) AS input_tokens,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.output_tokens']) AS output_tokens,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.cache_read.input_tokens']) AS cache_read_tokens,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.cache_creation.input_tokens']) AS cache_write_tokens,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.reasoning.output_tokens']) AS reasoning_tokens,
    SpanAttributes['llmtap.usage_source'] AS usage_source,
    toFloat64OrNull(SpanAttributes['llmtap.cost_usd']) AS cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.input_cost_usd']) AS input_cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.output_cost_usd']) AS output_cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.ttfb_ms']) AS ttfb_ms,
    toFloat64OrNull(SpanAttributes['llmtap.ttft_ms']) AS ttft_ms,
    Duration / 1e6 AS duration_ms,
    toFloat64OrNull(SpanAttributes['llmtap.decode_ms']) AS decode_ms,
    toFloat64OrNull(SpanAttributes['llmtap.itl_p50_ms']) AS itl_p50_ms,
    toFloat64OrNull(SpanAttributes['llmtap.itl_p95_ms']) AS itl_p95_ms,
    toFloat64OrNull(SpanAttributes['llmtap.itl_max_ms']) AS itl_max_ms,
    toFloat64OrNull(SpanAttributes['llmtap.output_tokens_per_s']) AS output_tokens_per_s,
    toFloat64OrNull(SpanAttributes['llmtap.provider_processing_ms']) AS provider_processing_ms,
    toUInt32OrZero(SpanAttributes['llmtap.content_events']) AS content_events,
    toUInt32OrZero(SpanAttributes['llmtap.tool_calls']) AS tool_calls,
    toUInt32OrNull(SpanAttributes['gen_ai.request.max_tokens']) AS max_output_tokens,
    toFloat64OrNull(SpanAttributes['llmtap.retry_after_s']) AS retry_after_s,
    toInt64OrNull(SpanAttributes['llmtap.ratelimit_remaining_requests']) AS ratelimit_remaining_requests,
    toInt64OrNull(SpanAttributes['llmtap.ratelimit_remaining_tokens']) AS ratelimit_remaining_tokens,
    toUInt64OrZero(SpanAttributes['llmtap.request_bytes']) AS request_bytes,
    toUInt64OrZero(SpanAttributes['llmtap.response_bytes']) AS response_bytes,
    SpanAttributes['llmtap.user_id'] AS user_id,
    SpanAttributes['llmtap.session_id'] AS session_id,
    SpanAttributes['llmtap.tenant'] AS tenant,
    SpanAttributes['llmtap.feature'] AS feature,
    SpanAttributes['llmtap.prompt_version'] AS prompt_version,
    SpanAttributes['llmtap.api_key_id'] AS api_key_id,
    SpanAttributes['llmtap.request_hash'] AS request_hash,
    if(SpanAttributes['llmtap.transport'] = '', 'http', SpanAttributes['llmtap.transport']) AS transport,
    SpanAttributes['llmtap.connection_id'] AS connection_id,
    SpanAttributes['llmtap.service_tier'] AS service_tier,
    SpanAttributes['llmtap.request_service_tier'] AS request_service_tier,
    toUInt64OrZero(SpanAttributes['llmtap.cache_write_1h_tokens']) AS cache_write_1h_tokens,
    SpanAttributes['llmtap.cost_source'] AS cost_source,
    SpanAttributes['llmtap.price_version'] AS price_version,
    SpanAttributes['llmtap.billing'] AS billing,
    SpanAttributes['llmtap.client_name'] AS client_name,
    SpanAttributes['llmtap.client_version'] AS client_version,
    CAST(JSONExtract(SpanAttributes['llmtap.ratelimit_headers'], 'Map(String, String)'),
        'Map(LowCardinality(String), String)') AS ratelimit_headers,
    ifNull(toUInt16OrNull(SpanAttributes['llmtap.attempt']), 1) AS attempt,
    SpanAttributes['llmtap.cache_miss_reason'] AS cache_miss_reason,
    toFloat64OrNull(SpanAttributes['llmtap.cache_miss_cost_usd']) AS cache_miss_cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.overhead_ms']) AS overhead_ms,
    SpanAttributes['llmtap.batch_id'] AS batch_id,
    toFloat64OrNull(SpanAttributes['llmtap.uncached_input_cost_usd']) AS uncached_input_cost_usd,
    toUInt64OrZero(SpanAttributes['llmtap.input_audio_tokens']) AS input_audio_tokens,
    toUInt64OrZero(SpanAttributes['llmtap.input_image_tokens']) AS input_image_tokens,
    toUInt64OrZero(SpanAttributes['llmtap.output_audio_tokens']) AS output_audio_tokens,
    toUInt64OrZero(SpanAttributes['llmtap.output_image_tokens']) AS output_image_tokens,
    toUInt64OrZero(SpanAttributes['llmtap.cache_read_audio_tokens']) AS cache_read_audio_tokens,
    CAST(JSONExtract(SpanAttributes['llmtap.server_tool_calls'], 'Map(String, UInt32)'),
        'Map(LowCardinality(String), UInt32)') AS server_tool_calls,
    toFloat64OrNull(SpanAttributes['llmtap.tool_cost_usd']) AS tool_cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.text_rate_input_cost_usd']) AS text_rate_input_cost_usd,
    toFloat64OrNull(SpanAttributes['llmtap.text_rate_output_cost_usd']) AS text_rate_output_cost_usd
FROM {db}.otel_traces
WHERE ScopeName = 'llmtap' OR SpanAttributes['otel.scope.name'] = 'llmtap';

-- Opt-in content capture (--capture-content): prompts and completions, redacted and
-- size-capped by llmtap, kept apart from llm_calls with their own retention (7 days
-- unless --content-retention-days says otherwise).
CREATE TABLE IF NOT EXISTS {db}.llm_content (
    timestamp DateTime64(6, 'UTC'),
    trace_id String,
    span_id String,
    service LowCardinality(String),
    input_messages String CODEC(ZSTD(3)),
    output_messages String CODEC(ZSTD(3))
) ENGINE = MergeTree()
PARTITION BY toDate(timestamp)
ORDER BY (timestamp, trace_id)
TTL toDateTime(timestamp) + toIntervalDay(7)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.llm_content_mv TO {db}.llm_content AS
SELECT
    toDateTime64(Timestamp, 6, 'UTC') AS timestamp,
    TraceId AS trace_id,
    SpanId AS span_id,
    ServiceName AS service,
    SpanAttributes['gen_ai.input.messages'] AS input_messages,
    SpanAttributes['gen_ai.output.messages'] AS output_messages
FROM {db}.otel_traces
WHERE (ScopeName = 'llmtap' OR SpanAttributes['otel.scope.name'] = 'llmtap')
  AND mapContains(SpanAttributes, 'gen_ai.output.messages');

-- Hourly rollup for dashboards over long ranges (AggregatingMergeTree fed by a view).
-- Sums are SimpleAggregateFunction(sum); latency quantiles are t-digest states:
--   SELECT hour, sum(calls), sum(cost_usd_sum), quantilesTDigestMerge(0.5, 0.95)(ttft_ms_q) ...
-- The first_* and retry_priced_* columns are explain-cost's sums over priced calls (first attempts, and
-- retries: attempt > 1), so it reads whole hours here instead of every call. explain_ready is 1 on rows this
-- view wrote; rows from before these columns existed have 0 (as does any row a merge made from one of them):
-- explain-cost reads those hours from llm_calls.
CREATE TABLE IF NOT EXISTS {db}.llm_calls_hourly (
    hour DateTime('UTC'),
    service LowCardinality(String),
    provider LowCardinality(String),
    request_model LowCardinality(String),
    feature String,
    calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    input_tokens_sum SimpleAggregateFunction(sum, UInt64),
    output_tokens_sum SimpleAggregateFunction(sum, UInt64),
    cache_read_tokens_sum SimpleAggregateFunction(sum, UInt64),
    cache_write_tokens_sum SimpleAggregateFunction(sum, UInt64),
    reasoning_tokens_sum SimpleAggregateFunction(sum, UInt64),
    cost_usd_sum SimpleAggregateFunction(sum, Float64),
    priced_calls SimpleAggregateFunction(sum, UInt64),
    cache_write_1h_tokens_sum SimpleAggregateFunction(sum, UInt64),
    cache_miss_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    retry_calls SimpleAggregateFunction(sum, UInt64),
    retry_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    ttft_ms_q AggregateFunction(quantilesTDigest(0.5, 0.95), Float64),
    duration_ms_q AggregateFunction(quantilesTDigest(0.5, 0.95), Float64),
    first_priced_calls SimpleAggregateFunction(sum, UInt64),
    first_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_input_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_uncached_input_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_output_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_input_tokens_sum SimpleAggregateFunction(sum, UInt64),
    first_output_tokens_sum SimpleAggregateFunction(sum, UInt64),
    first_cache_read_tokens_sum SimpleAggregateFunction(sum, UInt64),
    first_calls_by_prompt_version SimpleAggregateFunction(sumMap, Map(String, UInt64)),
    first_calls_by_service_tier SimpleAggregateFunction(sumMap, Map(String, UInt64)),
    retry_priced_calls SimpleAggregateFunction(sum, UInt64),
    explain_ready SimpleAggregateFunction(min, UInt8),
    first_tool_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_text_rate_input_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    first_text_rate_output_cost_usd_sum SimpleAggregateFunction(sum, Float64),
    explain_modal_ready SimpleAggregateFunction(min, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (service, provider, request_model, feature, hour)
SETTINGS non_replicated_deduplication_window = 10000;

-- LLM calls only: {llm_call} is llmtap.record.LLM_CALL_SQL (api != ''), the predicate every analysis shares.
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.llm_calls_hourly_mv TO {db}.llm_calls_hourly AS
SELECT
    toStartOfHour(timestamp) AS hour,
    service,
    provider,
    request_model,
    feature,
    toUInt64(count()) AS calls,
    toUInt64(countIf(outcome = 'error')) AS errors,
    sum(input_tokens) AS input_tokens_sum,
    sum(output_tokens) AS output_tokens_sum,
    sum(cache_read_tokens) AS cache_read_tokens_sum,
    sum(cache_write_tokens) AS cache_write_tokens_sum,
    sum(reasoning_tokens) AS reasoning_tokens_sum,
    sum(ifNull(cost_usd, 0)) AS cost_usd_sum,
    toUInt64(countIf(cost_usd IS NOT NULL)) AS priced_calls,
    sum(cache_write_1h_tokens) AS cache_write_1h_tokens_sum,
    sum(ifNull(cache_miss_cost_usd, 0)) AS cache_miss_cost_usd_sum,
    toUInt64(countIf(attempt > 1)) AS retry_calls,
    sumIf(ifNull(cost_usd, 0), attempt > 1) AS retry_cost_usd_sum,
    quantilesTDigestStateIf(0.5, 0.95)(assumeNotNull(ttft_ms), ttft_ms IS NOT NULL) AS ttft_ms_q,
    quantilesTDigestState(0.5, 0.95)(duration_ms) AS duration_ms_q,
    toUInt64(countIf(cost_usd IS NOT NULL AND attempt <= 1)) AS first_priced_calls,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL AND attempt <= 1) AS first_cost_usd_sum,
    sumIf(ifNull(input_cost_usd, 0), cost_usd IS NOT NULL AND attempt <= 1) AS first_input_cost_usd_sum,
    sumIf(coalesce(uncached_input_cost_usd, input_cost_usd, 0), cost_usd IS NOT NULL AND attempt <= 1)
        AS first_uncached_input_cost_usd_sum,
    sumIf(ifNull(output_cost_usd, 0), cost_usd IS NOT NULL AND attempt <= 1) AS first_output_cost_usd_sum,
    sumIf(input_tokens, cost_usd IS NOT NULL AND attempt <= 1) AS first_input_tokens_sum,
    sumIf(output_tokens, cost_usd IS NOT NULL AND attempt <= 1) AS first_output_tokens_sum,
    sumIf(cache_read_tokens, cost_usd IS NOT NULL AND attempt <= 1) AS first_cache_read_tokens_sum,
    sumMapIf(map(toString(prompt_version), toUInt64(1)), cost_usd IS NOT NULL AND attempt <= 1)
        AS first_calls_by_prompt_version,
    sumMapIf(map(toString(service_tier), toUInt64(1)), cost_usd IS NOT NULL AND attempt <= 1)
        AS first_calls_by_service_tier,
    toUInt64(countIf(cost_usd IS NOT NULL AND attempt > 1)) AS retry_priced_calls,
    toUInt8(1) AS explain_ready,
    sumIf(ifNull(tool_cost_usd, 0), cost_usd IS NOT NULL AND attempt <= 1) AS first_tool_cost_usd_sum,
    sumIf(coalesce(text_rate_input_cost_usd, uncached_input_cost_usd, input_cost_usd, 0),
        cost_usd IS NOT NULL AND attempt <= 1) AS first_text_rate_input_cost_usd_sum,
    sumIf(coalesce(text_rate_output_cost_usd, output_cost_usd, 0), cost_usd IS NOT NULL AND attempt <= 1)
        AS first_text_rate_output_cost_usd_sum,
    toUInt8(1) AS explain_modal_ready
FROM {db}.llm_calls
WHERE {llm_call}
GROUP BY hour, service, provider, request_model, feature;
