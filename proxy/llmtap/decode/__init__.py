"""Bytes → frames, pure: compression decoders and stream framers behind one protocol each.

Every content decoder has ``decode(bytes) -> bytes`` and ``flush() -> bytes``; every framer
``feed(bytes) -> list[frame]`` and ``flush() -> list[frame]``. Each accepts any chunking and
bounds its memory. A :class:`Framing` names a framer together with the adapter hook its
frames go to, so the capture holds one decoder and one framer and has no per-type branches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .body import BodyTooLarge, Budget, JSONBody
from .compression import DECODERS, ContentDecoder, UnsupportedEncoding, make_decoder
from .eventstream import EventStreamDecoder, EventStreamError, EventStreamMessage, encode_event
from .jsonarray import JSONArrayDecoder
from .ndjson import NDJSONDecoder
from .sse import SSEDecoder, SSEEvent
from .websocket import WSMessageDecoder

FramingName = Literal["sse", "ndjson", "json_array", "eventstream", "json", "websocket"]
Hook = Literal["on_event", "on_object", "on_frame", "on_json"]

MAX_JSON_BODY = 16 * 1024 * 1024  # a larger non-stream body is passed through but not parsed


class Framer(Protocol):
    def feed(self, chunk: bytes) -> list[Any]: ...

    def flush(self) -> list[Any]: ...

    def release(self) -> None:
        """Give back what it buffers (the call stopped being parsed, or was dropped)."""


@dataclass(frozen=True, slots=True)
class Framing:
    """How a response body is framed, and which adapter hook receives its frames. ``new(budget)`` makes
    the framer; a framer that buffers a whole body takes its bytes from ``budget`` (shared by all calls)."""

    name: FramingName
    new: Callable[[Budget | None], Framer]
    hook: Hook
    stream: bool  # frames arrive while the response does (timings are per frame)


SSE = Framing("sse", lambda _: SSEDecoder(), "on_event", True)
NDJSON = Framing("ndjson", lambda _: NDJSONDecoder(), "on_object", True)
JSON_ARRAY = Framing("json_array", lambda _: JSONArrayDecoder(), "on_object", True)
EVENTSTREAM = Framing("eventstream", lambda _: EventStreamDecoder(), "on_frame", True)
JSON = Framing("json", lambda budget: JSONBody(MAX_JSON_BODY, budget), "on_json", False)
WEBSOCKET = Framing("websocket", lambda _: WSMessageDecoder(), "on_object", True)  # whole messages, one by one

__all__ = [
    "DECODERS",
    "EVENTSTREAM",
    "JSON",
    "JSON_ARRAY",
    "MAX_JSON_BODY",
    "NDJSON",
    "SSE",
    "BodyTooLarge",
    "Budget",
    "ContentDecoder",
    "EventStreamDecoder",
    "EventStreamError",
    "EventStreamMessage",
    "Framer",
    "Framing",
    "FramingName",
    "Hook",
    "JSONArrayDecoder",
    "JSONBody",
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
    "UnsupportedEncoding",
    "WEBSOCKET",
    "WSMessageDecoder",
    "encode_event",
    "make_decoder",
]
