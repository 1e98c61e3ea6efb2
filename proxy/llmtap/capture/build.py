"""Worker side of a capture: the finished call → one :class:`~llmtap.record.CallRecord`.

Runs on the pipeline's worker thread, never on the event loop: whole JSON bodies are parsed
here, usage is estimated where the provider reported none, percentiles are computed. What the
enrichers need beyond the record (the request body, the output text) is handed over in a
:class:`CallContext`, so nothing after this step reaches back into the capture.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from typing import Any

from ..adapters.base import ErrorInfo, Usage, collect_text, error_from_body
from ..adapters.batch import BatchResults
from ..adapters.timing import percentile
from ..providers import is_plan_endpoint
from ..record import CallRecord, cap_message, is_llm_call
from . import headers as hdr
from . import identity, taxonomy
from .clients import client_from_user_agent
from .estimate import HEURISTIC, TokenEstimator, heuristic_count
from .tee import Capture, End


@dataclass(slots=True)
class CallContext:
    """What the worker-side enrichers may read besides the record (never the sinks)."""

    request: Any  # the parsed request body (None when it was not JSON)
    output_text: str  # the text the response carried (capped), for content capture
    request_headers: list[tuple[str, str]]
    batch: BatchResults | None = None  # a batch call: what it said about its batch (and a download's items)


def build(cap: Capture, end: End, estimator: TokenEstimator | None) -> tuple[CallRecord, CallContext]:
    cap.finish(end.mono)
    f, a = cap.facts, cap.adapter
    obs, req = a.obs, a.req
    attr = f.attribution
    r = CallRecord(
        timestamp=f.start_wall,
        trace_id=f.trace_id,
        span_id=f.span_id,
        service=attr.get("service") or f.service,
        provider=f.provider,
        api=f.api,
        operation=a.operation,
        server_address=f.host,
        server_port=f.port,
        request_model=req.model,
        response_model=obs.response_model,
        response_id=obs.response_id,
        # The request asked for a streamed response (its body, or its path: Gemini's
        # :streamGenerateContent, Bedrock's *-stream) — also when the answer is an error body.
        stream=req.stream,
        status_code=cap.status,
        duration_ms=max(end.mono - f.start_mono, 0.0) * 1000.0,
        request_bytes=f.body_size if f.body_size >= 0 else len(f.body),
        response_bytes=cap.response_bytes,
        user_id=attr.get("user_id") or req.user,
        session_id=attr.get("session_id", ""),
        tenant=attr.get("tenant", ""),
        feature=attr.get("feature", ""),
        prompt_version=attr.get("prompt_version", ""),
        api_key_id=f.api_key_id,
        request_hash=f.body_hash or (hashlib.sha256(f.body).hexdigest()[:32] if f.body else ""),
        max_output_tokens=req.max_output_tokens
        if req.max_output_tokens is None or 0 <= req.max_output_tokens < 2**32
        else None,
        tool_calls=len(obs.tool_call_keys),
        server_tool_calls={k: min(n, 2**32 - 1) for k, n in obs.server_tools.items() if n > 0},
        finish_reason=obs.finish,
        finish_reason_raw=obs.finish_raw,
        request_service_tier=req.service_tier[:64],
        service_tier=(obs.service_tier or req.service_tier)[:64],
    )
    _who(r, cap)
    r.parent_span_id = f.parent_span_id
    r.parse_error = cap.parse_error
    if cap.headers_mono is not None:
        r.ttfb_ms = (cap.headers_mono - f.start_mono) * 1000.0
    if cap.loop_ns:  # llmtap's own time on the event loop (not measured per call for WebSocket messages)
        r.overhead_ms = cap.loop_ns / 1e6
    _timings(r, cap)
    hdr.apply_response_headers(r, cap.resp_headers, obs.provider_processing_ms)
    _outcome(r, cap, end)
    _usage(r, cap, estimator, end)
    ctx = CallContext(cap.request_json, "".join(obs.output_text), f.headers, a.batch)
    return r, ctx


def _who(r: CallRecord, cap: Capture) -> None:
    """Transport, the calling tool, who pays, and agent ids the body carries (:mod:`.identity`)."""
    f, req = cap.facts, cap.adapter.req
    h = dict(f.headers)
    r.transport, r.connection_id = f.transport, f.connection_id
    r.capture_mode = f.capture_mode
    r.client_name, r.client_version = client_from_user_agent(h.get("user-agent", ""))
    r.billing = identity.billing(is_plan_endpoint(f.host), h, f.path.partition("?")[2])
    if not f.attribution.get("user_id") and req.user:
        r.user_id, session = identity.agent_user(req.user)
        r.session_id = r.session_id or session
    r.session_id = r.session_id or identity.body_session(cap.request_json)


def _timings(r: CallRecord, cap: Capture) -> None:
    clock, start = cap.adapter.obs.clock, cap.facts.start_mono
    r.content_events = clock.count if cap.streamed else 0
    if not cap.streamed or clock.first is None or clock.last is None:
        return
    r.ttft_ms = (clock.first - start) * 1000.0
    r.decode_ms = (clock.last - clock.first) * 1000.0
    if clock.gaps:
        r.gaps_s = clock.gaps
        gaps = sorted(clock.gaps)
        r.itl_p50_ms = percentile(gaps, 0.5) * 1000.0
        r.itl_p95_ms = percentile(gaps, 0.95) * 1000.0
        r.itl_max_ms = clock.gap_max * 1000.0


def _outcome(r: CallRecord, cap: Capture, end: End) -> None:
    obs = cap.adapter.obs
    err: ErrorInfo | None = None
    if cap.status >= 400:
        err = error_from_body(cap.error_body, cap.status) or ErrorInfo()
        r.outcome = "error"
        r.error_type = taxonomy.classify(cap.status, err.code, err.type, err.message)
        r.finish_reason, r.finish_reason_raw = "", ""
    elif obs.error is not None:
        err = obs.error
        r.outcome = "error"
        r.mid_stream_error = True
        r.error_type = taxonomy.classify(0, err.code, err.type, err.message, err.status)
        r.finish_reason = "error"
    elif end.kind == "sidecar_shutdown" and not obs.terminal:
        # Cut by the sidecar's own shutdown at the end of its drain: neither the client's nor the provider's fault.
        r.outcome = "cancelled"
        r.finish_reason = "cancelled"
        r.error_code = "sidecar_shutdown"
        r.error_message = cap_message(end.message)
    elif end.kind == "client_disconnected" and not obs.terminal:
        # A client that leaves after the terminal event (SDKs stop reading at
        # [DONE] / message_stop) received the whole answer: that is not a cancel.
        r.outcome = "cancelled"
        r.finish_reason = "cancelled"
    elif (cut := _cut_short(cap, end)) or (
        not obs.terminal and (end.kind == "upstream_error" or cap.status == 0 or (cap.streamed and not cap.parse_error))
    ):
        # A body that ended before its Content-Length (or a broken HTTP message) fails the client's read
        # even when the terminal event had arrived: an error, never ok.
        r.outcome = "error"
        msg = end.message or cut or "stream ended before its terminal event"
        r.error_type = taxonomy.transport_error_type(msg)
        r.error_message = cap_message(msg)
        if cap.streamed:
            r.mid_stream_error = 200 <= cap.status < 300 or cap.status == 101  # 101: a WebSocket call
    if err is not None:
        amzn = dict(cap.resp_headers).get("x-amzn-errortype", "")
        if not err.code and amzn:  # Bedrock names the exception in a header
            err.code = amzn.split(":", 1)[0]
            r.error_type = taxonomy.classify(cap.status, err.code, err.type, err.message, err.status)
        r.error_code = err.code[:200]
        r.error_message = cap_message(err.message)
        if r.retry_after_s is None:  # headers first, then the body (Google's RetryInfo), then the message
            r.retry_after_s = err.retry_after_s
        if r.retry_after_s is None:
            r.retry_after_s = taxonomy.retry_after_from_message(err.message)
        if r.retry_after_s is not None and not math.isfinite(r.retry_after_s):  # "try again in 9999…9s"
            r.retry_after_s = None


def _cut_short(cap: Capture, end: End) -> str:
    """Why the response body is incomplete ('' when it is not, or when the client left first)."""
    if end.kind == "client_disconnected" or cap.status in (204, 304) or cap.facts.method == "HEAD":
        return ""
    if end.kind == "upstream_error":
        return end.message or "the upstream broke the response"
    length = hdr.to_int(dict(cap.resp_headers).get("content-length"))
    if length is not None and cap.response_bytes < length:
        return f"response ended after {cap.response_bytes} of {length} bytes (Content-Length)"
    return ""


def _usage(r: CallRecord, cap: Capture, estimator: TokenEstimator | None, end: End) -> None:
    """Provider usage as is; estimation fills what is missing and marks the row.

    A call the provider may have billed never has zero usage: a stream that did not finish
    (cancelled, cut, failed mid-way) has at best a partial usage report (Anthropic's
    ``message_start`` carries the input and a placeholder output count), and a request that got
    no answer at all (a timeout, the client gone before the headers) has none. Input is then
    counted from the request (tiktoken when it is available, else the marked heuristic), output
    from the text actually seen; ``usage_source`` is ``partial`` when part of it is the
    provider's, ``estimated`` when none is.
    """
    adapter = cap.adapter
    obs, req = adapter.obs, adapter.req
    usage = obs.usage
    # A provider's closing usage report is final even when an error came with it (OpenRouter
    # reports usage in the chunk that carries the error).
    unfinished = cap.streamed and r.outcome != "ok" and not obs.usage_final
    if not adapter.billable:  # a control call (a batch created or polled): nothing to bill
        r.usage_source = "none"
        return
    if not is_llm_call(adapter.api) and usage is None:  # an other request: never estimated
        r.usage_source = "none"
        return
    if usage is not None and (not unfinished or not is_llm_call(adapter.api)):
        r.usage_source = "provider"
    elif usage is None and not may_be_billed(r, end):
        r.usage_source = "none"
        return
    else:
        model = req.model or obs.response_model
        est_in = est_out = 0
        labels: list[str] = []
        count = estimator.count if estimator is not None else _heuristic
        if usage is None or usage.input == 0:
            parts: list[str] = []  # the prompt's text, gathered only when it must be estimated
            collect_text(cap.request_json, parts)
            est_in, label = count("\n".join(parts), model)
            labels.append(label)
        if adapter.operation != "embeddings":
            est_out, label = count("".join(obs.output_text), model)
            labels.append(label)
        base = usage or Usage()
        usage = replace(base, input=base.input or est_in, output=max(base.output, est_out))
        r.usage_source = "partial" if base.input or base.output else "estimated"
        if labels:
            r.usage_estimator = labels[-1]
    r.input_tokens, r.output_tokens = usage.input, usage.output
    r.cache_read_tokens, r.cache_write_tokens = usage.cache_read, usage.cache_write
    r.reasoning_tokens = usage.reasoning
    r.cache_write_1h_tokens = min(usage.cache_write_1h, usage.cache_write)
    r.input_audio_tokens = min(usage.input_audio, r.input_tokens)
    r.input_image_tokens = min(usage.input_image, r.input_tokens - r.input_audio_tokens)
    r.output_audio_tokens = min(usage.output_audio, r.output_tokens)
    r.output_image_tokens = min(usage.output_image, r.output_tokens - r.output_audio_tokens)
    r.cache_read_audio_tokens = min(usage.cache_read_audio, r.cache_read_tokens, r.input_audio_tokens)
    if obs.provider_cost_usd is not None:
        r.cost_usd = obs.provider_cost_usd
        r.cost_source = "provider"
    if r.decode_ms and r.decode_ms > 0 and r.output_tokens:
        r.output_tokens_per_s = r.output_tokens / (r.decode_ms / 1000.0)


def _heuristic(text: str, model: str) -> tuple[int, str]:
    return heuristic_count(text), HEURISTIC


# A request that never reached the provider (nothing to bill): the connection to it failed.
_NOT_SENT = (
    "connection refused",
    "connect call failed",
    "name or service not known",
    "name resolution",
    "failed to establish",
    "no route to host",
    "network is unreachable",
    "certificate",
    "tls",
)


def may_be_billed(r: CallRecord, end: End) -> bool:
    """The provider may have billed the call: it answered 2xx (or opened a WebSocket), or the request
    reached it and no answer came back (a timeout, the client gone before the headers, a reset)."""
    if 200 <= r.status_code < 300 or r.status_code == 101:
        return True
    if r.status_code != 0:
        return False  # an error status: not billed
    if end.kind == "client_disconnected":
        return True
    low = end.message.lower()
    return not any(s in low for s in _NOT_SENT)
