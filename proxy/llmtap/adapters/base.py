"""The adapter interface shared by every wire API.

An adapter is pure: it sees the parsed request body, then either framed stream
events (with their wire arrival time) or the complete JSON body, and fills an
:class:`Observation`. It never does I/O and never sees headers; the capture layer
owns transport facts (status, headers, bytes, timings of the response itself).

Each adapter declares what it owns: the requests it speaks for (:attr:`Adapter.routes`)
and how a successful response is framed (:meth:`Adapter.framing`). Routing and the
capture only loop over those declarations.

Thread contract: every hook runs on the proxy's event loop, one call at a time per
adapter. Hooks must be cheap (no I/O, no sleeping); they may raise — the capture catches,
stops parsing that call, counts it, and the bytes still flow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, assert_never

from ..decode import EVENTSTREAM, JSON, NDJSON, SSE, Framing, Hook, SSEEvent
from ..durations import parse_duration
from ..providers import ProviderName
from ..record import Api, FinishReason, Operation, cap_message
from .finish import normalize_finish
from .timing import ContentClock

if TYPE_CHECKING:
    from .batch import BatchResults

MAX_TEXT_CHARS = 1_000_000  # text kept for token estimation, per side
FrameHook = Callable[[Any, float], None]  # an adapter hook: a frame, and the monotonic time it arrived


@dataclass(frozen=True, slots=True)
class Route:
    """A request an adapter speaks for.

    ``path`` is a regex searched (case-insensitively) in the URL-decoded path without its query
    and trailing ``/``; a named group ``model`` takes the model from the path (Gemini, Azure
    deployments, Bedrock). ``providers``, when set, limits the route to hosts of those providers
    (``None`` in the set: hosts llmtap does not know, reached with ``--intercept``) unless the
    request carries one of ``or_headers``. ``provider`` names the call's provider when the path
    alone says who serves it (an Azure deployment path behind a gateway host).
    """

    path: str
    providers: frozenset[ProviderName | None] | None = None
    or_headers: tuple[str, ...] = ()
    provider: ProviderName | Literal[""] = ""
    method: str = "POST"
    _rx: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rx", re.compile(self.path, re.IGNORECASE))

    def match(
        self, method: str, path: str, provider: ProviderName | None, headers: frozenset[str]
    ) -> re.Match[str] | None:
        if method != self.method:
            return None
        if (
            self.providers is not None
            and provider not in self.providers
            and not any(h in headers for h in self.or_headers)
        ):
            return None
        return self._rx.search(path)


@dataclass(slots=True)
class Usage:
    """Usage in the contract's terms: ``input`` includes cache reads and writes, ``output`` reasoning."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cache_write_1h: int = 0  # subset of cache_write written with a 1-hour TTL
    input_audio: int = 0  # subsets of input by modality, as reported
    input_image: int = 0
    output_audio: int = 0  # subsets of output by modality
    output_image: int = 0
    cache_read_audio: int = 0  # subset of cache_read that was audio


def output_with_reasoning(completion: int, reasoning: int, prompt: int, total: int | None) -> tuple[int, int]:
    """``(output, reasoning)`` with output including reasoning, whichever way the provider counted.

    OpenAI counts reasoning inside ``completion_tokens`` (``total = prompt + completion``); xAI and
    some OpenAI-compatible servers count it beside it (``total = prompt + completion + reasoning``).
    The total says which: it is checked first. Without a total that settles it, a reasoning count
    larger than the completion count can only be exclusive. When the total says inclusive and the
    reasoning count still exceeds the completion (numbers that contradict each other), the
    completion count is kept and reasoning is capped at it: reasoning is a subset of output.
    """
    if reasoning <= 0:
        return completion, 0
    if total is not None and total > 0:
        if total == prompt + completion + reasoning and total != prompt + completion:
            return completion + reasoning, reasoning
        if total == prompt + completion:
            return completion, min(reasoning, completion)
    if reasoning > completion:
        return completion + reasoning, reasoning
    return completion, reasoning


@dataclass(slots=True)
class ErrorInfo:
    code: str = ""
    type: str = ""
    message: str = ""
    in_body_after_2xx: bool = False
    retry_after_s: float | None = None
    status: int = 0  # the HTTP status the body itself states (``status_code``, a numeric ``code``)


@dataclass(slots=True)
class Observation:
    """What the body told us. Filled by adapters, read by the record builder."""

    response_model: str = ""
    response_id: str = ""
    finish_raw: str = ""
    finish: FinishReason = ""
    usage: Usage | None = None  # provider-reported, last seen wins (it is cumulative)
    usage_final: bool = False  # the usage seen is the provider's closing report (even if an error came too)
    service_tier: str = ""  # the tier that served the call, as the response says
    provider_cost_usd: float | None = None
    error: ErrorInfo | None = None
    terminal: bool = False  # the API's end-of-stream marker was seen
    tool_call_keys: set[Any] = field(default_factory=set)  # tools the client must run (function, custom, …)
    server_tools: dict[str, int] = field(default_factory=dict)  # hosted tool uses by kind (record.ServerTool)
    clock: ContentClock = field(default_factory=ContentClock)
    output_text: list[str] = field(default_factory=list)
    output_chars: int = 0
    provider_processing_ms: float | None = None  # the provider's own time for the call, as its body says

    def text(self, s: str) -> None:
        if s and self.output_chars < MAX_TEXT_CHARS:
            self.output_text.append(s)
            self.output_chars += len(s)


@dataclass(slots=True)
class RequestInfo:
    model: str = ""
    stream: bool = False
    max_output_tokens: int | None = None
    user: str = ""
    wants_stream_usage: bool = True
    service_tier: str = ""  # the tier the request asked for


def as_int(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return max(v, 0)
    if isinstance(v, float) and v == v:
        return max(int(v), 0)
    return 0


def as_opt_int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v)


def as_str(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else str(v)


def d(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` if it is a dict, else an empty dict (tolerates nulls and junk)."""
    if isinstance(obj, dict):
        v = obj.get(key)
        if isinstance(v, dict):
            return v
    return {}


def collect_text(value: Any, out: list[str], budget: int = MAX_TEXT_CHARS) -> None:
    """Gather prompt text from a request body (messages, content parts, input, system...)."""
    stack = [value]
    total = 0
    while stack and total < budget:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
            total += len(v)
        elif isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            for k in (
                "text",
                "content",
                "input",
                "prompt",
                "system",
                "messages",
                "instructions",
                "arguments",
                "parts",
            ):
                if k in v:
                    stack.append(v[k])


def _stated_status(*values: Any) -> int:
    """An HTTP status a body states about itself (``status_code: 400``, Google's ``code: 429``)."""
    for v in values:
        if isinstance(v, bool):
            continue
        if isinstance(v, str) and v.isdigit():
            v = int(v)
        if isinstance(v, int) and 100 <= v <= 599:
            return v
    return 0


def _google_details(details: Any, err: ErrorInfo) -> None:
    """Google ``error.details``: QuotaFailure steers the class, RetryInfo gives the wait."""
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, dict):
            continue
        # Per-minute quotas are rate limits, per-day ones an exhausted quota. The hint only steers
        # classification (``type``); ``code`` stays the provider's, verbatim.
        for v in detail.get("violations") or []:
            quota = as_str(v.get("quotaId") if isinstance(v, dict) else "")
            if "PerDay" in quota:
                err.type = "quota_per_day"
            elif "PerMinute" in quota or "PerSecond" in quota:
                err.type = "quota_per_minute"
        delay = detail.get("retryDelay")
        if isinstance(delay, str) and as_str(detail.get("@type")).endswith("RetryInfo"):
            try:
                err.retry_after_s = parse_duration(delay)
            except ValueError:
                pass


def may_carry_error(obj: dict[str, Any]) -> bool:
    """Whether :func:`error_from_body` can find an error in ``obj`` without a status (a 2xx body or event):
    the cheap test a stream's every event takes before the full one."""
    return "error" in obj or obj.get("object") == "error" or obj.get("type") == "error"


def error_from_body(obj: Any, status: int = 0) -> ErrorInfo | None:
    """The error carried by a JSON body, in any of the shapes providers use.

    ``code`` is the provider's code verbatim; an error whose only code is its type (Anthropic's
    ``error.type``, an OpenAI error with ``code: null``) keeps the type as its code. With an HTTP
    error ``status``, a bare ``{"message": "…"}`` body (AWS, gateways) is an error too.
    """
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        kind = as_str(err.get("type") or err.get("status"))
        code = as_str(err.get("code")) or as_str(err.get("type"))
        info = ErrorInfo(
            code=code,
            type=kind,
            message=cap_message(as_str(err.get("message"))),
            status=_stated_status(err.get("status_code"), obj.get("status_code"), err.get("code")),
        )
        _google_details(err.get("details"), info)
        return info
    if isinstance(err, str) and err:
        return ErrorInfo(message=cap_message(err), status=_stated_status(obj.get("status_code")))
    if obj.get("object") == "error" or (obj.get("type") == "error" and "message" in obj):
        return ErrorInfo(
            code=as_str(obj.get("code")) or as_str(obj.get("type")),
            type=as_str(obj.get("type")),
            message=cap_message(as_str(obj.get("message"))),
            status=_stated_status(obj.get("status_code"), obj.get("code")),
        )
    message = obj.get("message", obj.get("Message"))
    if status >= 400 and isinstance(message, str):
        kind = as_str(obj.get("__type")).rsplit("#", 1)[-1]  # AWS JSON protocol: "ns#ValidationException"
        return ErrorInfo(code=as_str(obj.get("code")) or kind, type=kind, message=cap_message(message))
    return None


class Adapter:
    """Base class: subclasses set ``api``/``operation``/``routes`` and override the hooks they need."""

    api: ClassVar[Api] = ""
    operation: ClassVar[Operation] = "chat"
    routes: ClassVar[tuple[Route, ...]] = ()
    default_provider: ClassVar[ProviderName] = "openai_compatible"  # on a host llmtap does not know
    billable: ClassVar[bool] = True  # False: a control call (a batch created or polled), never priced
    batch: BatchResults | None = None  # what a batch API call said about its batch (the batch adapters set it)

    def framing(self, content_type: str, path: str) -> Framing:
        """How a 2xx response to this call is framed (error bodies are the capture's business).

        The default reads the Content-Type: SSE, AWS event-stream, NDJSON, else a JSON body.
        Adapters whose streams the Content-Type does not reveal override it.
        """
        if "text/event-stream" in content_type:
            return SSE
        if "vnd.amazon.eventstream" in content_type:
            return EVENTSTREAM
        if "ndjson" in content_type:
            return NDJSON
        return JSON

    def __init__(self) -> None:
        self.obs = Observation()
        self.req = RequestInfo()

    # -- request -------------------------------------------------------------------
    def on_request(self, body: Any) -> None:
        if not isinstance(body, dict):
            return
        self.req.model = as_str(body.get("model"))
        self.req.stream = body.get("stream") is True
        self.req.user = as_str(body.get("user"))
        self.req.service_tier = as_str(body.get("service_tier"))

    def on_target(self, path: str) -> None:
        """The request's path (query included), after :meth:`on_request`: adapters whose path
        says the response is streamed (Gemini's ``:streamGenerateContent``, Bedrock's
        ``converse-stream``) set ``req.stream`` here."""

    # -- response ------------------------------------------------------------------
    def on_event(self, ev: SSEEvent, t: float) -> None:
        """A framed stream event, arrived at monotonic time ``t``."""

    def on_json(self, obj: Any, t: float) -> None:
        """The complete (non-stream) JSON body of a 2xx response."""

    def on_object(self, obj: Any, t: float) -> None:
        """One JSON value of an NDJSON stream or a streamed JSON array."""

    def on_frame(self, msg: Any, t: float) -> None:
        """One AWS event-stream message (:class:`llmtap.decode.EventStreamMessage`)."""

    def hook_for(self, hook: Hook) -> FrameHook:
        """The hook a framing's frames go to, bound to this call's adapter."""
        match hook:
            case "on_event":
                return self.on_event
            case "on_object":
                return self.on_object
            case "on_frame":
                return self.on_frame
            case "on_json":
                return self.on_json
        assert_never(hook)

    # -- helpers -------------------------------------------------------------------
    def content(self, t: float) -> None:
        self.obs.clock.mark(t)

    def set_finish(self, raw: Any) -> None:
        raw_s = as_str(raw)
        if raw_s:
            self.obs.finish_raw = raw_s
            self.obs.finish = normalize_finish(raw_s)

    def set_usage(self, usage: Usage, final: bool = False) -> None:
        """The provider's usage report (cumulative: the last one wins); ``final``: its closing one."""
        self.obs.usage = usage
        self.obs.usage_final = self.obs.usage_final or final

    def mid_stream_error(self, err: ErrorInfo) -> None:
        err.in_body_after_2xx = True
        self.obs.error = err
        self.obs.terminal = True

    def error_in_body(self, obj: Any) -> bool:
        """Record the error object of a 2xx body (an event or a whole body), if it has one."""
        err = error_from_body(obj)
        if err is None:
            return False
        self.mid_stream_error(err)
        return True

    @staticmethod
    def parse(data: str) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            return None
