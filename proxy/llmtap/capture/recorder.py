"""The recorder: proxy workers' :mod:`llmtap.handoff` messages → one :class:`~.tee.Capture` per call.

The proxy's loop only copies what the wire showed; here, in the supervisor's process, each call's
bytes are replayed at the times they arrived through the same decoders, framers and adapters, and
the finished call goes to the :class:`~llmtap.pipeline.Pipeline` (build, enrichers, sinks). The
request's facts a record needs beyond the wire — attribution, the credential's fingerprint, the
trace ids, the service — are derived here too, so the proxy holds no install secret.

A WebSocket is the call of its upgrade request: a :class:`~.ws.WSConnection` made when its socket
opens takes its messages; an upgrade the server refused is recorded as the call it then is.

Self-overhead: the time spent here on a call's messages is added to what the worker measured on its
loop (``loop_ns``); the pipeline adds its own (:meth:`Pipeline.process`). A worker that stops with
calls in flight (it crashed, or was killed) gets them recorded as cut by the sidecar.

Thread contract: one thread (the supervisor's loop) calls :meth:`Recorder.handle`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from time import monotonic, perf_counter_ns

from .. import handoff
from ..adapters import REGISTRY, WS_REGISTRY, Adapter, GenericJSON, WSAdapter
from ..decode.websocket import DEFAULT_MAX_MESSAGE_BYTES
from ..intercept.attribution import Fingerprinter, read_attribution, trace_ids
from ..record import Api, CaptureMode
from .request import parse_body
from .tee import Capture, End, ParseErrorHook, RequestFacts
from .ws import Submit, WSConnection

log = logging.getLogger("llmtap.recorder")

ADAPTER_CLASSES: dict[str, type[Adapter]] = {a.__name__: a for a in (*REGISTRY, GenericJSON)}
WS_CLASSES: dict[str, type[WSAdapter]] = {a.__name__: a for a in WS_REGISTRY}
AdapterFactory = Callable[[type[Adapter]], Adapter]
Key = tuple[int, int]  # (worker, call)


class _RequestBody:
    """A large request body, handed off in parts (the worker hashed it): what the parser gets of it."""

    __slots__ = ("kept", "lost")

    def __init__(self) -> None:
        self.kept: list[bytes] = []
        self.lost = False  # a part never came (a Gap): the body cannot be parsed


@dataclass(slots=True)
class _Upgrade:
    """A WebSocket's upgrade: the capture of the handshake (a call only if it was refused) and what
    its socket's calls are made from."""

    cap: Capture
    facts: RequestFacts
    adapter: type[WSAdapter]
    model: str
    keep_trace: bool


class Recorder:
    def __init__(
        self,
        submit: Submit,
        fingerprinter: Fingerprinter,
        service: str = "",
        make_adapter: AdapterFactory | None = None,
        on_parse_error: ParseErrorHook | None = None,
        ws_max_message: int = DEFAULT_MAX_MESSAGE_BYTES,
        capture_mode: CaptureMode = "regular",
    ) -> None:
        self._submit = submit
        self._capture_mode: CaptureMode = capture_mode  # --mode: on every call's span
        self._ws_max_message = ws_max_message  # the relay's bound (--ws-max-message-mb): the decoder's too
        self._fp = fingerprinter
        self._service = service
        self._make: AdapterFactory = make_adapter or (lambda cls: cls())
        self._on_parse_error = on_parse_error
        self._calls: dict[Key, Capture] = {}
        self._bodies: dict[Key, _RequestBody] = {}  # request bodies handed off in parts, until their Request
        self._upgrades: dict[Key, _Upgrade] = {}
        self._sockets: dict[Key, WSConnection] = {}

    @property
    def open_calls(self) -> int:
        return len(self._calls) + len(self._upgrades) + len(self._sockets)

    def handle(self, worker: int, messages: Iterable[handoff.Message]) -> None:
        for msg in messages:
            t0 = perf_counter_ns()
            try:
                self._one(worker, msg, t0)
            except Exception:  # a recorder bug loses one call's record, never the others
                log.exception("recording a %s message failed", type(msg).__name__)

    def _one(self, worker: int, msg: handoff.Message, t0: int) -> None:
        key = (worker, getattr(msg, "call", 0))
        if isinstance(msg, handoff.Body):
            cap = self._calls.get(key)
            if cap is not None:
                for t, data in msg.chunks:
                    cap.feed(data, t)
                cap.loop_ns += perf_counter_ns() - t0
        elif isinstance(msg, handoff.Response):
            cap = self._calls.get(key)
            if cap is not None:
                cap.on_response_headers(msg.status, msg.headers, msg.mono)
                cap.loop_ns += perf_counter_ns() - t0
        elif isinstance(msg, handoff.End):
            cap = self._calls.pop(key, None)
            if cap is not None:
                cap.loop_ns += msg.loop_ns + perf_counter_ns() - t0
                self._submit(cap, End(msg.kind, msg.mono, msg.message))
            self._bodies.pop(key, None)  # an upload the client gave up: not a call
        elif isinstance(msg, handoff.RequestPart):
            self._bodies.setdefault(key, _RequestBody()).kept.extend(msg.chunks)
        elif isinstance(msg, handoff.Gap):
            self._gap(key, msg)
        elif isinstance(msg, handoff.Request):
            self._request(key, msg, t0)
        elif isinstance(msg, handoff.SocketMessage):
            conn = self._sockets.get(key)
            if conn is not None:
                conn.on_message(msg.from_client, msg.content, msg.mono)
        elif isinstance(msg, handoff.SocketUnparsed):
            conn = self._sockets.get(key)
            if conn is not None:
                conn.on_unparsed(msg.from_client, msg.why, msg.stop)
        elif isinstance(msg, handoff.SocketOpen):
            self._open(key, msg)
        elif isinstance(msg, handoff.SocketClose):
            up = self._upgrades.pop(key, None)
            if up is not None:
                up.cap.release()
            conn = self._sockets.pop(key, None)
            if conn is not None:
                conn.on_close(msg.closed_by_client, msg.mono, msg.reason)

    def _facts(self, key: Key, req: handoff.Request, api: Api, body_hash: str = "") -> RequestFacts:
        trace_id, parent = trace_ids(next((v for k, v in req.headers if k == "traceparent"), ""))
        return RequestFacts(
            method=req.method,
            host=req.host,
            port=req.port,
            path=req.path,
            headers=req.headers,
            body=b"",
            start_wall=req.start_wall,
            start_mono=req.start_mono,
            provider=req.provider,
            api=api,
            service=req.proxy_user or self._service or "unknown_service",
            attribution=read_attribution(req.headers),
            api_key_id=self._fp.api_key_id(req.headers, req.path.partition("?")[2]),
            trace_id=trace_id,
            span_id=secrets.token_hex(8),
            parent_span_id=parent,
            connection_id=req.connection,
            body_size=req.body_size,
            body_hash=body_hash,
            capture_mode=self._capture_mode,
        )

    def _request(self, key: Key, req: handoff.Request, t0: int) -> None:
        if req.websocket:
            ws = WS_CLASSES[req.adapter]
            # A socket's calls are its messages: each counts its own message's bytes (body_size -1).
            facts = dataclasses.replace(self._facts(key, req, ws.api), transport="websocket", body_size=-1)
            cap = Capture(facts, self._make(ws.call_adapter), self._on_parse_error, path_model=req.model)
            keep_trace = any(k == "traceparent" and v for k, v in req.headers)
            self._upgrades[key] = _Upgrade(cap, facts, ws, req.model, keep_trace)
            self._calls[key] = cap  # until the socket opens: a refused upgrade ends as an HTTP call
            return
        adapter_cls = ADAPTER_CLASSES[req.adapter]
        parts = self._bodies.pop(key, None)
        raw: bytes | None = req.body
        if parts is not None:  # a large body, handed off as it came
            raw = None if parts.lost else b"".join([*parts.kept, req.body])
        digest = req.body_hash or (hashlib.sha256(req.body).hexdigest()[:32] if req.body else "")
        facts = self._facts(key, req, adapter_cls.api, digest)
        encoding = next((v for k, v in req.headers if k == "content-encoding"), "")
        request_json, note = parse_body(None if req.over else raw, encoding)  # None: over the bound, not parsed
        if parts is not None and parts.lost and not req.over:
            note = "request body not parsed: part of it was not handed off (the recorder was behind)"
        facts.body_note = note
        self._calls[key] = Capture(
            facts,
            self._make(adapter_cls),
            self._on_parse_error,
            request=request_json,
            parsed=True,
            path_model=req.model,  # Gemini, Azure deployments and Bedrock name the model in the path
            loop_ns=req.loop_ns + perf_counter_ns() - t0,
        )

    def _gap(self, key: Key, gap: handoff.Gap) -> None:
        if gap.request:
            self._bodies.setdefault(key, _RequestBody()).lost = True
            return
        cap = self._calls.get(key)
        if cap is not None:
            cap.response_bytes += gap.size
            cap.stop_parsing("part of the response was not handed off: the recorder was behind")

    def _open(self, key: Key, msg: handoff.SocketOpen) -> None:
        up = self._upgrades.pop(key, None)
        self._calls.pop(key, None)
        if up is None:
            return
        up.cap.release()
        adapter = up.adapter(up.model)
        self._sockets[key] = WSConnection(
            up.facts, adapter, self._submit, msg.headers, self._on_parse_error, up.keep_trace, self._ws_max_message
        )

    def worker_gone(self, worker: int, why: str) -> int:
        """A worker stopped: its calls still open are recorded as cut by the sidecar."""
        now = monotonic()
        n = 0
        for key in [k for k in self._upgrades if k[0] == worker]:
            self._upgrades.pop(key).cap.release()
        for key in [k for k in self._bodies if k[0] == worker]:
            del self._bodies[key]
        for key in [k for k in self._calls if k[0] == worker]:
            self._submit(self._calls.pop(key), End("sidecar_shutdown", now, why))
            n += 1
        for key in [k for k in self._sockets if k[0] == worker]:
            self._sockets.pop(key).on_close(None, now, why)
            n += 1
        return n
