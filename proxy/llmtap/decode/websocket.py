"""WebSocket messages → JSON values, pure.

mitmproxy hands over whole messages (fragments reassembled, permessage-deflate undone), so a
message is one frame of this stage. The JSON APIs spoken over WebSockets (OpenAI Realtime,
Responses WebSocket mode) send one JSON object per text message. A message larger than
``max_bytes`` is passed through but not parsed (counted in ``oversized``), as the SSE decoder
drops an oversized event.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class WSMessageDecoder:
    """``feed(payload)`` → ``[(value, text)]`` for a JSON message, ``[]`` for anything else."""

    __slots__ = ("max_bytes", "oversized", "undecodable")

    def __init__(self, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.oversized = 0
        self.undecodable = 0

    def feed(self, payload: bytes) -> list[tuple[Any, str]]:
        if len(payload) > self.max_bytes:
            self.oversized += 1
            return []
        try:
            text = payload.decode("utf-8")
            return [(json.loads(text), text)]
        except ValueError:  # binary audio, invalid UTF-8, not JSON
            self.undecodable += 1
            return []

    def release(self) -> None:
        """Nothing is buffered between messages."""

    def flush(self) -> list[tuple[Any, str]]:
        return []
