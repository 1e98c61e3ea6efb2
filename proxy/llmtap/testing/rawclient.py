"""A raw HTTP/1.1 client over CONNECT + TLS that sees exactly the bytes on the wire (tests, benchmarks)."""

from __future__ import annotations

import json
import socket
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes  # de-chunked, still content-encoded
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time.time(), data)
    peer_cert: dict[str, object] = field(default_factory=dict)


class ProxyRefused(ConnectionError):
    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(f"CONNECT refused: {raw[:200]!r}")
        self.status = status


def tls_socket(
    host: str,
    port: int,
    cafile: Path,
    proxy: tuple[str, int] | None,
    proxy_auth: str = "",
    alpn: tuple[str, ...] = ("http/1.1",),
) -> ssl.SSLSocket:
    if proxy is not None:
        sock = socket.create_connection(proxy, timeout=30)
        auth = ""
        if proxy_auth:
            import base64

            auth = f"Proxy-Authorization: Basic {base64.b64encode(proxy_auth.encode()).decode()}\r\n"
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}\r\n".encode())
        resp = b""
        while b"\r\n\r\n" not in resp:
            data = sock.recv(4096)
            if not data:
                raise ConnectionError("proxy closed during CONNECT")
            resp += data
        status_line = resp.split(b"\r\n", 1)[0]
        if b" 200" not in status_line:
            sock.close()
            raise ProxyRefused(int(status_line.split()[1]), resp)
    else:
        sock = socket.create_connection((host, port), timeout=30)
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.set_alpn_protocols(list(alpn))
    return ctx.wrap_socket(sock, server_hostname=host)


def request(
    host: str,
    port: int,
    path: str,
    body: dict[str, object] | bytes,
    headers: dict[str, str],
    cafile: Path,
    proxy: tuple[str, int] | None = None,
    connect_host: str | None = None,
    proxy_auth: str = "",
    deadline_s: float = 300.0,
) -> RawResponse:
    """POST ``body`` as JSON (or as given, when bytes).

    ``connect_host`` dials another address while keeping ``host`` for TLS/Host.

    Raises ``TimeoutError`` (with what arrived so far) when the response has not ended within
    ``deadline_s``, even if data keeps trickling in, so a stalled stream fails loudly.
    """
    if connect_host is not None and proxy is None:
        sock = socket.create_connection((connect_host, port), timeout=30)
        ctx = ssl.create_default_context(cafile=str(cafile))
        tls = ctx.wrap_socket(sock, server_hostname=host)
    else:
        tls = tls_socket(host, port, cafile, proxy, proxy_auth)
    try:
        tls.do_handshake()
        cert = tls.getpeercert() or {}
        payload = bytes(body) if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {host}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            "Accept-Encoding: gzip",
            "Connection: close",
        ]
        head += [f"{k}: {v}" for k, v in headers.items()]
        tls.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        raw = bytearray()
        chunks: list[tuple[float, bytes]] = []
        give_up = time.monotonic() + deadline_s
        while True:
            data = tls.recv(65536)
            if not data:
                break
            chunks.append((time.time(), data))
            raw += data
            if time.monotonic() > give_up:
                raise TimeoutError(f"no end of response after {deadline_s:.0f}s; {len(raw)} bytes: {raw[-300:]!r}")
    finally:
        tls.close()
    head_b, _, rest = bytes(raw).partition(b"\r\n\r\n")
    lines = head_b.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    body_bytes = dechunk(rest) if hdrs.get("transfer-encoding") == "chunked" else rest
    return RawResponse(status, hdrs, body_bytes, chunks, dict(cert))


def dechunk(data: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while pos < len(data):
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:
            break
        out += data[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2
    return bytes(out)
