"""``llmtap mock-provider``: an HTTPS server replaying realistic LLM API responses.

It serves the OpenAI (chat, responses, completions, embeddings), Anthropic (messages),
Gemini, Bedrock (event-stream) and Ollama (NDJSON) wire formats with real pacing and faults, and the agents'
other requests (:mod:`.services`: telemetry, account checks, model lists), over TLS with a certificate
valid for the providers' host names (issued by its own CA, written to
``--cert-dir``). Point llmtap at it with ``--connect-to api.openai.com:443:127.0.0.1:PORT
--upstream-ca <cert-dir>/mock-ca.pem``; clients keep their real base URLs.

A scenario is picked by the ``x-mock-scenario`` request header, else by a model
name of the form ``mock-<scenario>``; ``x-mock-delay-ms`` sets the gap between
events (default 5 ms, or ``$LLMTAP_MOCK_DELAY_MS``), ``x-mock-events`` the number of content events
of a chat stream (default 8, or ``$LLMTAP_MOCK_EVENTS``; the completion tokens reported; those variables
are the server's :class:`~llmtap.config.MockDefaults`), ``x-mock-prompt-tokens``
the prompt tokens an OpenAI chat or Anthropic reply reports, ``x-mock-stamp: 1`` prefixes each event
with an SSE comment carrying its send time (``x-mock-stamp: content`` starts each content delta's text
with ``@<send time>|`` instead, which survives gateways that re-encode the stream). ``GET /_mock/requests``
returns the headers of the last requests received (to check what reached "upstream"); ``GET /_mock/reset``
empties it and the WebSocket log.
``x-mock-id: <tag>`` gives the reply its own request and response ids (the fixed ids with ``-<tag>`` appended).
``x-mock-replay: <provider>/<name>.<ext>``
serves a recorded real response from ``$LLMTAP_MOCK_REPLAY_DIR`` instead (:mod:`.replay`).

Cost knobs: ``x-mock-usage: {json}`` overrides fields of the usage a reply reports (a > 200k-token
call, 1h cache writes), ``x-mock-served-tier`` the OpenAI tier reported as served (else the requested
one), scenario ``prompt_cache`` (Anthropic) answers with a simulated prompt cache
(:mod:`.prompt_cache`; ``x-mock-cache-ttl: SECONDS`` stands for its 5-minute TTL). The batch APIs
(:mod:`.batches`) and the providers' cost reports (:mod:`.billing`) are served too.
``x-mock-fail-first: N`` with ``x-mock-fail-key: K``: the first N requests carrying K fail with the
scenario ``x-mock-fail-with`` (default ``rate_limit_429``), the next ones succeed (an SDK's retries).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...adapters import route
from ...config import MockDefaults
from . import (
    agents,
    anthropic,
    batches,
    bedrock,
    billing,
    gemini,
    hostile,
    ollama,
    openai,
    replay,
    responses,
    services,
    websocket,
)
from .certs import ensure_certs
from .common import Reply, json_reply, with_ids

Handler = Callable[[str, dict[str, Any], str], Reply]


def _body_only(fn: Callable[[dict[str, Any], str], Reply]) -> Handler:
    return lambda path, body, scenario: fn(body, scenario)


# One reply builder per wire API, keyed by the adapter that speaks it: the mock routes a
# request the way llmtap does (llmtap.adapters.route), so there is no second route table.
HANDLERS: dict[str, Handler] = {
    "openai.chat_completions": _body_only(openai.openai_chat),
    "openai.responses": _body_only(responses.openai_responses),
    "openai.completions": _body_only(openai.openai_completions),
    "openai.embeddings": _body_only(openai.openai_embeddings),
    "anthropic.messages": _body_only(anthropic.anthropic_messages),
    "gemini.generate_content": gemini.gemini,
    "bedrock.converse": bedrock.bedrock,
    "bedrock.invoke": bedrock.bedrock,
    "ollama.chat": ollama.ollama,
    "ollama.generate": ollama.ollama,
}
_CONTENT = re.compile(rb'("(?:content|text|delta)": ?")(?=[^"])')  # a non-empty text delta (x-mock-stamp: content)
# The APIs whose replies take the benchmark knobs (stream length, default pacing, send stamps).
TUNABLE = frozenset({"openai.chat_completions", "openai.responses", "openai.completions", "anthropic.messages"})


def _knobs(headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """The cost knobs of the request headers, passed to the reply builders in the body."""
    extra: dict[str, Any] = {}
    if headers.get("x-mock-usage"):
        extra["_mock_usage"] = json.loads(headers["x-mock-usage"])
    if headers.get("x-mock-served-tier"):
        extra["_mock_served_tier"] = headers["x-mock-served-tier"]
    if headers.get("x-mock-cache-ttl"):
        extra["_mock_cache_ttl"] = float(headers["x-mock-cache-ttl"])
    extra["_mock_cache_scope"] = headers.get("x-api-key") or headers.get("authorization", "")
    return {**body, **extra}


def special(method: str, path: str, headers: dict[str, str], raw: bytes, body: dict[str, Any]) -> Reply | None:
    """The batch APIs, the cost reports, and the services' other requests (:mod:`.services`): no model calls."""
    bare = path.split("?", 1)[0].rstrip("/")
    host = headers.get("host", "").split(":", 1)[0]
    if (other := services.answer(method, host, path, headers)) is not None:
        return other
    if bare == "/v1/organization/costs":
        return billing.openai_costs(path, headers)
    if bare == "/v1/organizations/cost_report":
        return billing.anthropic_cost_report(path, headers)
    if method == "POST" and bare == "/v1/files":
        return batches.upload(headers, raw)
    if bare.startswith("/v1/messages/batches"):
        return batches.anthropic_batches(method, path, body)
    if bare.startswith(("/v1/batches", "/v1/files/")):
        return batches.openai_batches(method, path, body)
    return None


_failures: dict[str, int] = {}  # x-mock-fail-key → failures served so far


def plan(path: str, headers: dict[str, str], body: dict[str, Any], defaults: MockDefaults | None = None) -> Reply:
    """The reply to a call of a wire API; ``defaults`` stand in for the ``x-mock-*`` headers a client cannot send."""
    defaults = defaults or MockDefaults()
    body = _knobs(headers, body)
    key = headers.get("x-mock-fail-key", "")
    if key and _failures.get(key, 0) < int(headers.get("x-mock-fail-first", "0") or 0):
        # x-mock-fail-first: N — the first N requests with this key fail (scenario x-mock-fail-with), then succeed
        _failures[key] = _failures.get(key, 0) + 1
        headers = {**headers, "x-mock-scenario": headers.get("x-mock-fail-with", "rate_limit_429")}
    if headers.get("x-mock-replay"):  # a recorded response, served as recorded (see .replay)
        reply = replay.reply(headers["x-mock-replay"], defaults.replay_dir)
        if "x-mock-delay-ms" in headers:
            reply.delay = float(headers["x-mock-delay-ms"]) / 1000.0
        return reply
    scenario = headers.get("x-mock-scenario", "")
    model = str(body.get("model", ""))
    if not scenario and model.startswith("mock-"):
        scenario = model[5:]
    if scenario in hostile.SCENARIOS:  # bombs, a cut body, echoed payloads (the security tests)
        return hostile.reply(scenario, body, headers)
    host = headers.get("host", "").split(":", 1)[0]
    match = route("POST", host, path, frozenset(headers))
    handler = HANDLERS.get(match.api) if match is not None else None
    if handler is None:
        return json_reply(404, {"error": {"message": f"no mock route for {path}", "type": "not_found_error"}})
    assert match is not None
    body = {**body, "_mock_provider": match.provider}  # OpenAI's own streams carry obfuscation padding
    if match.api in TUNABLE:
        events = headers.get("x-mock-events") or defaults.events
        if events is not None and events != "":  # benchmarks: stream length
            body = {**body, "_mock_events": max(1, min(int(events), 10_000))}
        prompt = headers.get("x-mock-prompt-tokens")
        if prompt:  # the demo: realistic prompt sizes in the reported usage
            body = {**body, "_mock_prompt_tokens": max(1, min(int(prompt), 10_000_000))}
        reply = handler(path, body, scenario or "default")
        delay = headers.get("x-mock-delay-ms") or defaults.delay_ms
        if delay is not None and delay != "":  # per request, or a default for clients that cannot send headers
            reply.delay = float(delay) / 1000.0
        if headers.get("x-mock-stamp") == "1":  # benchmarks: each event carries its send time
            reply.stamp = True
        elif headers.get("x-mock-stamp") == "content":
            reply.stamp_content = True
        return agents.decorate(host, path, headers, body, reply)
    reply = handler(path, body, scenario or "default")
    if "x-mock-delay-ms" in headers:
        reply.delay = float(headers["x-mock-delay-ms"]) / 1000.0
    return agents.decorate(host, path, headers, body, reply)


# -- server -----------------------------------------------------------------------------------------


class MockServer:
    def __init__(self, defaults: MockDefaults | None = None) -> None:
        self.defaults = defaults or MockDefaults()
        self.requests: deque[dict[str, Any]] = deque(maxlen=200)
        self.sockets: deque[websocket.Socket] = deque(maxlen=50)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                if headers.get("upgrade", "").lower() == "websocket":
                    self.requests.append({"method": method, "path": path, "headers": headers, "body": ""})
                    await websocket.session(reader, writer, head, headers, self.sockets, self.defaults.delay_ms)
                    return
                raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                self.requests.append(
                    {
                        "method": method,
                        "path": path,
                        "headers": headers,
                        "body": raw.decode("utf-8", "replace"),
                    }
                )
                if path.startswith("/_mock/requests"):
                    reply = json_reply(200, list(self.requests))
                elif path.startswith("/_mock/ws"):
                    reply = json_reply(200, [sock.log() for sock in self.sockets])
                elif path.startswith("/_mock/reset"):  # a test starts from empty logs
                    self.requests.clear()
                    self.sockets.clear()
                    reply = json_reply(200, {})
                else:
                    try:
                        body = json.loads(raw) if raw else {}
                    except ValueError:
                        body = {}
                    body = body if isinstance(body, dict) else {}
                    reply = special(method, path, headers, raw, body) or plan(path, headers, body, self.defaults)
                    if headers.get("x-mock-id"):  # the demo: each call its own request and response ids
                        reply = with_ids(reply, headers["x-mock-id"])
                await self.send(writer, reply)
                if reply.abort:
                    writer.transport.abort()
                    return
                if reply.close:
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def send(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            429: "Too Many Requests",
            529: "Overloaded",
        }
        head = [f"HTTP/1.1 {reply.status} {reason.get(reply.status, 'Status')}"]
        fixed = any(k == "content-length" for k, _ in reply.headers)  # a reply that promises its length itself
        streaming = not fixed and (
            reply.stream or any(k == "content-type" and "event-stream" in v for k, v in reply.headers)
        )
        head += [f"{k}: {v}" for k, v in reply.headers]
        head.append("date: Sat, 29 Nov 2025 07:06:40 GMT")  # fixed, like every other byte
        if streaming:
            head.append("transfer-encoding: chunked")
        elif not fixed:
            head.append(f"content-length: {sum(len(c) for c in reply.chunks)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogateescape"))  # raw bytes: odd_headers
        if not streaming:
            writer.write(b"".join(reply.chunks))
            await writer.drain()
            return
        await writer.drain()
        for i, c in enumerate(reply.chunks):
            if i:
                await asyncio.sleep(reply.delay)
            if reply.stamp:
                c = f": sent_at={time.time():.6f}\n".encode() + c
            elif reply.stamp_content:
                c = _CONTENT.sub(f"\\1@{time.time():.6f}|".encode(), c, count=1)
            if c:
                writer.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                await writer.drain()
        if not reply.abort:
            writer.write(b"0\r\n\r\n")
            await writer.drain()


async def _main(host: str, port: int, cert_dir: Path, defaults: MockDefaults) -> None:
    ca, crt, key = ensure_certs(cert_dir)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    ctx.set_alpn_protocols(["http/1.1"])
    mock = MockServer(defaults)
    server = await asyncio.start_server(mock.handle, host, port, ssl=ctx)
    bound = server.sockets[0].getsockname()
    print(json.dumps({"host": bound[0], "port": bound[1], "ca": str(ca.resolve())}), flush=True)
    async with server:
        await server.serve_forever()


def serve(host: str, port: int, cert_dir: Path, defaults: MockDefaults | None = None) -> int:
    try:
        asyncio.run(_main(host, port, cert_dir, defaults or MockDefaults()))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    serve("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0, Path("./llmtap-mock"))
