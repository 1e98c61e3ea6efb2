"""Recorded provider responses, served as they were recorded (``x-mock-replay: <recording>``).

A recording is two files under a corpus root (the project's is ``tests/corpus``): the body
``<provider>/<name>.<ext>`` exactly as the provider sent it (``.sse``, ``.json``, ``.ndjson``,
``.bin`` for AWS event-stream) and ``<provider>/<name>.meta.json`` with the request that
produced it and the recorded status and headers::

    {"host": "api.x.ai", "path": "/v1/chat/completions", "status": 200,
     "headers": [["content-type", "text/event-stream"]], "request": {...}}

The mock serves the recorded status, headers and bytes, split where the provider's frames end
(SSE events, NDJSON lines, event-stream messages; a JSON body in one piece) and paced by the
reply's delay. The corpus root is ``$LLMTAP_MOCK_REPLAY_DIR`` (the server's
:class:`~llmtap.config.MockDefaults`); a name that leaves it is refused.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import Reply, json_reply

REPLAY_DIR_ENV = "LLMTAP_MOCK_REPLAY_DIR"


@dataclass(frozen=True, slots=True)
class Recording:
    name: str  # "<provider>/<name>.<ext>" under the corpus root
    host: str
    path: str
    status: int
    headers: list[tuple[str, str]]
    request: Any
    body: bytes

    @property
    def content_type(self) -> str:
        return dict(self.headers).get("content-type", "")


def load(root: Path, name: str) -> Recording:
    """The recording ``name`` under ``root``; :class:`ValueError` if it is not one."""
    base = root.resolve()
    body_path = (base / name).resolve()
    if base not in body_path.parents or not body_path.is_file():
        raise ValueError(f"no recording {name!r} under {base}")
    meta_path = body_path.with_suffix(".meta.json")
    if not meta_path.is_file():
        raise ValueError(f"recording {name!r} has no {meta_path.name}")
    meta = json.loads(meta_path.read_text())
    return Recording(
        name=name,
        host=str(meta["host"]),
        path=str(meta["path"]),
        status=int(meta["status"]),
        headers=[(str(k).lower(), str(v)) for k, v in meta.get("headers", [])],
        request=meta.get("request"),
        body=body_path.read_bytes(),
    )


def frames(rec: Recording) -> list[bytes]:
    """The body cut where the provider's frames end (the bytes joined back are the body)."""
    data, ext = rec.body, rec.name.rsplit(".", 1)[-1]
    if ext == "bin":
        out, i = [], 0
        while i + 4 <= len(data):
            (total,) = struct.unpack(">I", data[i : i + 4])
            out.append(data[i : i + max(total, 4)])
            i += max(total, 4)
        if i < len(data):
            out.append(data[i:])
        return out
    sep = {"sse": b"\n\n", "ndjson": b"\n"}.get(ext)
    if sep is None or not data:
        return [data]
    if sep == b"\n\n" and b"\r\n\r\n" in data:
        sep = b"\r\n\r\n"
    parts = data.split(sep)
    out = [p + sep for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def reply(name: str, root: str) -> Reply:
    """The mock's reply for ``x-mock-replay: name``: recorded status, headers and frames from corpus ``root``."""
    base = root
    if not base:
        return json_reply(500, {"error": {"message": f"set {REPLAY_DIR_ENV} to replay recordings"}})
    try:
        rec = load(Path(base), name)
    except (ValueError, OSError, KeyError) as e:
        return json_reply(404, {"error": {"message": str(e)[:300], "type": "not_found_error"}})
    headers = [(k, v) for k, v in rec.headers if k not in ("content-length", "transfer-encoding", "content-encoding")]
    streamed = rec.status < 300 and not rec.name.endswith(".json")
    return Reply(rec.status, headers, frames(rec), stream=streamed)
