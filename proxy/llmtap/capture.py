"""Per-call capture: request facts in, a tee for response chunks, a record out.

This module knows nothing about mitmproxy. The addon hands it plain values; the
tee (:meth:`Capture.tee`) is the ``flow.response.stream`` callable and must never
raise or change the bytes. Everything expensive (JSON bodies, estimation,
percentiles) happens in :meth:`Capture.build`, which runs off the event loop.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .adapters.base import Adapter, ErrorInfo, Usage, collect_text, error_from_body
from .decompress import Decoder, UnsupportedEncoding, make_decoder
from .estimate import TokenEstimator
from .framing import EventStreamDecoder, JSONArrayDecoder, NDJSONDecoder
from .record import CallRecord
from .redact import redact
from .sse import SSEDecoder
from .timing import percentile

log = logging.getLogger("llmtap.capture")

MAX_JSON_BODY = 64 * 1024 * 1024  # a larger non-stream body is passed through but not parsed
MAX_ERROR_BODY = 1024 * 1024
REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "apim-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-groq-id",
    "x-ds-trace-id",
    "x-generation-id",
    "cf-ray",
)
PROCESSING_HEADERS = {"openai-processing-ms": 1.0, "x-envoy-upstream-service-time": 1.0}


@dataclass(slots=True)
class RequestFacts:
    method: str
    host: str
    port: int
    path: str
    headers: list[tuple[str, str]]  # names lower-cased, as received (attribution included)
    body: bytes
    start_wall: float
    start_mono: float
    provider: str
    api: str
    service: str = ""
    attribution: dict[str, str] = field(default_factory=dict)
    api_key_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""


@dataclass(slots=True)
class End:
    kind: str  # "complete" | "client_disconnected" | "upstream_error"
    mono: float
    message: str = ""


class Capture:
    """The state of one intercepted call."""

    def __init__(
        self,
        facts: RequestFacts,
        adapter: Adapter,
        on_parse_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.facts = facts
        self.adapter = adapter
        self._on_parse_error = on_parse_error
        self.request_json: Any = None
        try:
            self.request_json = json.loads(facts.body) if facts.body else None
        except ValueError:
            self.request_json = None
        try:
            adapter.on_request(self.request_json)
        except Exception as e:  # a hostile request body must not break capture
            self._parse_failed(e)
        self.status = 0
        self.resp_headers: list[tuple[str, str]] = []
        self.headers_mono: float | None = None
        self.response_bytes = 0
        self.parsing = True
        self.parse_error = ""
        self._decoder: Decoder | None = None
        self._sse: SSEDecoder | None = None
        self._frames: EventStreamDecoder | None = None
        self._objects: NDJSONDecoder | JSONArrayDecoder | None = None
        self._body: bytearray | None = None
        self._body_cap = MAX_JSON_BODY
        self.sse = False

    # -- event loop side: must stay cheap and must never raise ------------------------
    def on_response_headers(self, status: int, headers: list[tuple[str, str]], mono: float) -> None:
        self.status = status
        self.resp_headers = headers
        self.headers_mono = mono
        hmap = dict(headers)
        ctype = hmap.get("content-type", "").lower()
        try:
            self._decoder = make_decoder(hmap.get("content-encoding"))
        except UnsupportedEncoding as e:
            self._parse_failed(e)
            return
        ok = 200 <= status < 300
        api = self.facts.api
        if ok and "text/event-stream" in ctype:
            self.sse = True
            self._sse = SSEDecoder()
        elif ok and "vnd.amazon.eventstream" in ctype:
            self.sse = True
            self._frames = EventStreamDecoder()
        elif ok and ("ndjson" in ctype or (api.startswith("ollama.") and self.adapter.req.stream)):
            self.sse = True
            self._objects = NDJSONDecoder()
        elif ok and api == "gemini.generate_content" and ":streamgeneratecontent" in self.facts.path.lower():
            self.sse = True
            self._objects = JSONArrayDecoder()
        else:
            self._body = bytearray()
            self._body_cap = MAX_JSON_BODY if status < 400 else MAX_ERROR_BODY

    def tee(self, data: bytes) -> bytes:
        """The ``flow.response.stream`` callable: returns ``data`` unchanged, always."""
        if data and self.parsing:
            try:
                self._feed(data, time.monotonic())
            except Exception as e:
                self._parse_failed(e)
        self.response_bytes += len(data)
        return data

    def _feed(self, data: bytes, t: float) -> None:
        if self._decoder is not None:
            data = self._decoder(data)
        if self._sse is not None:
            on_event = self.adapter.on_event
            for ev in self._sse.feed(data):
                on_event(ev, t)
        elif self._objects is not None:
            for obj in self._objects.feed(data):
                self.adapter.on_object(obj, t)
        elif self._frames is not None:
            for msg in self._frames.feed(data):
                self.adapter.on_frame(msg, t)
        elif self._body is not None:
            if len(self._body) + len(data) > self._body_cap:
                self.parsing = False
                self.parse_error = "body too large to parse"
                self._body = None
            else:
                self._body += data

    def _parse_failed(self, e: BaseException) -> None:
        self.parsing = False
        self.parse_error = f"{type(e).__name__}: {e}"[:300]
        if self._on_parse_error is not None:
            try:
                self._on_parse_error(self.facts.api, e)
            except Exception:
                pass

    # -- worker side -------------------------------------------------------------------
    def build(self, end: End, estimator: TokenEstimator | None) -> CallRecord:
        f, a = self.facts, self.adapter
        obs, req = a.obs, a.req
        if self.parsing and self._sse is not None:
            try:  # an event not followed by a blank line at EOF still counts for an observer
                for ev in self._sse.feed(b"\n\n"):
                    a.on_event(ev, end.mono)
            except Exception as e:
                self._parse_failed(e)
        if self.parsing and isinstance(self._objects, NDJSONDecoder):
            try:  # a last line without its newline
                for obj in self._objects.flush():
                    a.on_object(obj, end.mono)
            except Exception as e:
                self._parse_failed(e)
        body_obj: Any = None
        if self.parsing and self._body is not None and self._body:
            try:
                body_obj = json.loads(bytes(self._body))
            except ValueError:
                body_obj = None
        if body_obj is not None and 200 <= self.status < 300:
            try:
                a.on_json(body_obj, end.mono)
            except Exception as e:
                self._parse_failed(e)

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
            stream=self.sse or req.stream,
            status_code=self.status,
            duration_ms=max(end.mono - f.start_mono, 0.0) * 1000.0,
            request_bytes=len(f.body),
            response_bytes=self.response_bytes,
            user_id=attr.get("user_id") or req.user,
            session_id=attr.get("session_id", ""),
            tenant=attr.get("tenant", ""),
            feature=attr.get("feature", ""),
            prompt_version=attr.get("prompt_version", ""),
            api_key_id=f.api_key_id,
            request_hash=hashlib.sha256(f.body).hexdigest()[:32] if f.body else "",
            max_output_tokens=req.max_output_tokens
            if req.max_output_tokens is None or 0 <= req.max_output_tokens < 2**32
            else None,
            tool_calls=len(obs.tool_call_keys),
            finish_reason=obs.finish,
            finish_reason_raw=obs.finish_raw,
        )
        if f.parent_span_id:
            r.extra["parent_span_id"] = f.parent_span_id
        if self.parse_error:
            r.extra["parse_error"] = self.parse_error
        if self.headers_mono is not None:
            r.ttfb_ms = (self.headers_mono - f.start_mono) * 1000.0
        self._timings(r)
        self._headers(r)
        self._outcome(r, end, body_obj)
        self._usage(r, estimator)
        return r

    def _timings(self, r: CallRecord) -> None:
        clock, start = self.adapter.obs.clock, self.facts.start_mono
        r.content_events = clock.count if self.sse else 0
        if not self.sse or clock.first is None or clock.last is None:
            return
        r.ttft_ms = (clock.first - start) * 1000.0
        r.decode_ms = (clock.last - clock.first) * 1000.0
        if clock.gaps:
            gaps = sorted(clock.gaps)
            r.itl_p50_ms = percentile(gaps, 0.5) * 1000.0
            r.itl_p95_ms = percentile(gaps, 0.95) * 1000.0
            r.itl_max_ms = clock.gap_max * 1000.0

    def _headers(self, r: CallRecord) -> None:
        h = dict(self.resp_headers)
        for name in REQUEST_ID_HEADERS:
            if h.get(name):
                r.request_id = h[name][:200]
                break
        for name, scale in PROCESSING_HEADERS.items():
            v = _float(h.get(name))
            if v is not None:
                r.provider_processing_ms = v * scale
                break
        reported = self.adapter.obs.extra.get("provider_processing_ms")  # in the body: Groq, Ollama, Bedrock
        if r.provider_processing_ms is None and isinstance(reported, (int, float)):
            r.provider_processing_ms = float(reported)
        r.ratelimit_remaining_requests = _int(
            h.get("x-ratelimit-remaining-requests") or h.get("anthropic-ratelimit-requests-remaining")
        )
        r.ratelimit_remaining_tokens = _int(
            h.get("x-ratelimit-remaining-tokens") or h.get("anthropic-ratelimit-tokens-remaining")
        )
        ms = _float(h.get("retry-after-ms"))
        if ms is not None:
            r.retry_after_s = ms / 1000.0
        elif h.get("retry-after"):
            r.retry_after_s = _retry_after(h["retry-after"])

    def _outcome(self, r: CallRecord, end: End, body_obj: Any) -> None:
        obs = self.adapter.obs
        err: ErrorInfo | None = None
        if self.status >= 400:
            err = error_from_body(body_obj) or ErrorInfo()
            r.outcome = "error"
            r.error_type = errors.classify(self.status, err.code, err.type, err.message)
            r.finish_reason, r.finish_reason_raw = "", ""
        elif obs.error is not None:
            err = obs.error
            r.outcome = "error"
            r.mid_stream_error = True
            r.error_type = errors.classify(0, err.code, err.type, err.message)
            r.finish_reason = "error"
        elif end.kind == "client_disconnected" and not obs.terminal:
            # A client that leaves after the terminal event (SDKs stop reading at
            # [DONE] / message_stop) received the whole answer: that is not a cancel.
            r.outcome = "cancelled"
            r.finish_reason = "cancelled"
        elif not obs.terminal and (
            end.kind == "upstream_error" or self.status == 0 or (self.sse and not self.parse_error)
        ):
            r.outcome = "error"
            msg = end.message or "stream ended before its terminal event"
            r.error_type = (
                "timeout" if "timed out" in msg.lower() or "timeout" in msg.lower() else "upstream_disconnected"
            )
            r.error_message = redact(msg)[:1000]
            if self.sse:
                r.mid_stream_error = 200 <= self.status < 300
        if err is not None:
            amzn = dict(self.resp_headers).get("x-amzn-errortype", "")
            if not err.code and amzn:  # Bedrock names the exception in a header
                err.code = amzn.split(":", 1)[0]
                r.error_type = errors.classify(self.status, err.code, err.type, err.message)
            r.error_code = err.code[:200]
            r.error_message = redact(err.message)[:1000]
            if r.retry_after_s is None:
                r.retry_after_s = errors.retry_after_from_message(err.message)

    def _usage(self, r: CallRecord, estimator: TokenEstimator | None) -> None:
        """Provider usage as is; estimation fills what is missing and marks the row.

        A stream that did not finish (cancelled, cut, failed mid-way) has at best a
        partial usage report (Anthropic's ``message_start`` carries a placeholder
        output count), so its output is estimated from the text actually seen.
        """
        obs, req = self.adapter.obs, self.adapter.req
        usage = obs.usage
        unfinished = self.sse and r.outcome != "ok"
        if usage is not None and not unfinished:
            r.usage_source = "provider"
        elif usage is None and (r.status_code >= 400 or r.status_code == 0):
            r.usage_source = "none"
            return
        else:
            model = req.model or obs.response_model
            est_in = est_out = 0
            labels: list[str] = []
            if estimator is not None:
                if usage is None or usage.input == 0:
                    parts: list[str] = []  # the prompt's text, gathered only when it must be estimated
                    collect_text(self.request_json, parts)
                    est_in, label = estimator.count("\n".join(parts), model)
                    labels.append(label)
                if self.adapter.operation != "embeddings":
                    est_out, label = estimator.count("".join(obs.output_text), model)
                    labels.append(label)
            base = usage or Usage()
            usage = Usage(
                input=base.input or est_in,
                output=max(base.output, est_out),
                cache_read=base.cache_read,
                cache_write=base.cache_write,
                reasoning=base.reasoning,
            )
            r.usage_source = "estimated"
            if labels:
                r.extra["usage_estimator"] = labels[-1]
        r.input_tokens, r.output_tokens = usage.input, usage.output
        r.cache_read_tokens, r.cache_write_tokens = usage.cache_read, usage.cache_write
        r.reasoning_tokens = usage.reasoning
        if obs.provider_cost_usd is not None:
            r.cost_usd = obs.provider_cost_usd
            r.extra["cost_source"] = "provider"
        if r.decode_ms and r.decode_ms > 0 and r.output_tokens:
            r.output_tokens_per_s = r.output_tokens / (r.decode_ms / 1000.0)


def _float(v: str | None) -> float | None:
    if not v:
        return None
    try:
        return float(v.strip())
    except ValueError:
        return None


def _int(v: str | None) -> int | None:
    f = _float(v)
    return int(f) if f is not None else None


def _retry_after(v: str) -> float | None:
    f = _float(v)
    if f is not None:
        return f
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(dt.timestamp() - time.time(), 0.0)
