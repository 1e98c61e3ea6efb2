"""The benchmark's clients: one streamed chat call through a path, on a new or a kept-alive connection.

A path reaches the origin directly (TLS to the mock), through a proxy (CONNECT, then TLS to the
proxy's certificate for api.openai.com), or as a plain-HTTP base-URL gateway (LiteLLM, llmtap's
base-URL mode). Kept-alive mode is how the official SDKs talk: one connection (CONNECT + TLS done
once) carries call after call; a pool keeps the connections of a path across rounds.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmtap.testing.rawclient import request, tls_socket

BODY = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "messages": []}
HOST = "api.openai.com"
CHAT = "/v1/chat/completions"
LITELLM_KEY = "sk-llmtap-bench-" + "0123456789abcdef" * 2
# A send-time stamp: in an SSE comment (x-mock-stamp: 1) or at the start of a delta's text (x-mock-stamp: content).
STAMP = re.compile(rb"(?:sent_at=|@)(\d{9,11}\.\d{6})")
CONTENT = re.compile(rb'"content": ?"[^"]')


class Path_:
    """One way to reach the origin: direct, through a proxy (CONNECT + TLS), or a plain-HTTP gateway."""

    def __init__(
        self,
        name: str,
        proxy: tuple[str, int] | None,
        cafile: Path,
        pid: int | None,
        plain_port: int | None = None,
        plain_path: str = CHAT,
        origin_port: int = 0,
    ) -> None:
        self.name, self.proxy, self.cafile, self.pid = name, proxy, cafile, pid
        self.plain_port, self.plain_path, self.origin_port = plain_port, plain_path, origin_port
        self.pool: queue.SimpleQueue[_Conn] = queue.SimpleQueue()  # kept-alive connections, reused across rounds
        self.rss_only = False  # measured for its footprint only
        self.sidecar: Any = None  # llmtap's harness handle (its admin API), for llmtap's paths
        self.opener: Callable[[], socket.socket] | None = None  # a kept connection's socket made otherwise (a netns)

    @property
    def gateway(self) -> bool:
        return self.plain_port is not None


def cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and its descendants (the sidecar's processes, all counted)."""
    total = 0.0
    for p in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of ``pid`` and its descendants, MB (``RssAnon``: its anonymous part, not file-backed)."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(c) for t in os.listdir(f"/proc/{p}/task") for c in _children(p, t)]
        except OSError:
            continue
        out += kids
        todo += kids
    return out


def _children(pid: int, tid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
    except OSError:
        return []


def mock_headers(events: int, delay_ms: int, stamp: str) -> dict[str, str]:
    headers = {"x-mock-events": str(events), "x-mock-delay-ms": str(delay_ms)}
    if stamp:
        headers["x-mock-stamp"] = stamp
    return headers


def fresh(p: Path_, events: int, delay_ms: int, stamp: str = "") -> tuple[float, list[float]]:
    """One streamed call on a new connection (CONNECT + TLS each time): (time to first content event,
    one-way delays of stamped events), in ms."""
    if p.gateway:
        return kept(p, events, delay_ms, stamp)
    headers = mock_headers(events, delay_ms, stamp)
    t0 = time.time()
    if p.proxy is None:
        r = request(HOST, p.origin_port, CHAT, BODY, headers, p.cafile, connect_host="127.0.0.1")
    else:
        r = request(HOST, 443, CHAT, BODY, headers, p.cafile, proxy=p.proxy)
    first = next((t for t, data in r.chunks if CONTENT.search(data)), r.chunks[-1][0])
    delays = [(t - float(m.group(1))) * 1000 for t, data in r.chunks for m in STAMP.finditer(data)]
    return (first - t0) * 1000, delays


class _Conn(http.client.HTTPConnection):
    """An HTTP/1.1 connection whose socket comes from ``opener`` (re-opened the same way if dropped)."""

    def __init__(self, host: str, opener: Callable[[], socket.socket]) -> None:
        super().__init__(host, timeout=60)
        self._opener = opener

    def connect(self) -> None:
        self.sock = self._opener()
        # http.client writes the head and the body in two sends: without TCP_NODELAY (which the SDKs' HTTP
        # stacks set) Nagle holds the body until the head is acknowledged, ~40 ms of delayed ACK per call.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _connection(p: Path_) -> _Conn:
    if p.opener is not None:
        return _Conn(HOST, p.opener)
    if p.plain_port is not None:
        port = p.plain_port
        return _Conn(f"127.0.0.1:{port}", lambda: socket.create_connection(("127.0.0.1", port), timeout=60))
    if p.proxy is not None:
        proxy = p.proxy
        return _Conn(HOST, lambda: tls_socket(HOST, 443, p.cafile, proxy))

    def direct() -> socket.socket:
        ctx = ssl.create_default_context(cafile=str(p.cafile))
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx.wrap_socket(socket.create_connection(("127.0.0.1", p.origin_port), timeout=60), server_hostname=HOST)

    return _Conn(HOST, direct)


def kept(p: Path_, events: int, delay_ms: int, stamp: str = "") -> tuple[float, list[float]]:
    """One streamed call on a kept-alive connection of ``p``'s pool: (time to first content event, delays)."""
    try:
        conn = p.pool.get_nowait()
    except queue.Empty:
        conn = _connection(p)
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {LITELLM_KEY}",
        **mock_headers(events, delay_ms, stamp),
    }
    payload = json.dumps(BODY)
    for attempt in (1, 2):
        t0 = time.time()
        try:
            conn.request("POST", p.plain_path if p.gateway else CHAT, payload, headers)
            resp = conn.getresponse()
            first: float | None = None
            delays: list[float] = []
            tail = b""
            while chunk := resp.read1(65536):
                t = time.time()
                data = tail + chunk
                cut = data.rfind(b"\n") + 1  # whole lines only: a stamp cut in two is read with its second half
                done, tail = data[:cut], data[cut:]
                if first is None and CONTENT.search(done):
                    first = t
                delays += [(t - float(m.group(1))) * 1000 for m in STAMP.finditer(done)]
            if resp.status != 200:
                raise http.client.HTTPException(f"{p.name}: HTTP {resp.status}")
            p.pool.put(conn)
            return ((first or time.time()) - t0) * 1000, delays
        except (OSError, http.client.HTTPException):
            conn.close()  # a connection the server closed meanwhile: once more on a new one
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def close_pool(p: Path_) -> None:
    while True:
        try:
            p.pool.get_nowait().close()
        except queue.Empty:
            return
