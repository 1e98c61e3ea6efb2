"""Prompt-cache miss forensics: ``cache_miss_reason`` and ``cache_miss_cost_usd`` (an enricher on the worker).

llmtap sees every request body of a session, so when a prompt cache stops hitting it can say
why. Per session (``session_id``, else ``api_key_id`` + model) it keeps the previous call's
prefix fingerprints — the tools, the system prompt, and the messages in order, each a hash of
its canonical JSON with every ``cache_control`` marker removed (an agent moves its marker to the
newest turn on every call: that is not a change) — with the call's time, model, and how many
tokens it left in the cache (its cache reads plus writes).

On a call where caching is in use (the provider reported cache reads or writes in the session)
and the call read from the cache fewer tokens than the previous call had cached (the cached
share dropped), the miss is classified, first cause first:

- ``first_call``: nothing was cached yet (the session's first call that writes the cache): a cold start, not
  a miss — its cost is 0;
- ``model_changed``: another model (caches are per model);
- ``tools_changed``, ``system_changed``: the tool list or the system prompt differs;
- ``history_changed``: a message the previous call sent differs now (an earlier turn edited,
  removed or compacted);
- ``ttl_expired``: the prefix is the same, but more than the cache's TTL passed since the
  previous call (5 minutes, or 1 hour when the cache was written with the 1-hour TTL) — also for a
  session's first call when an earlier session of the same ``api_key_id`` cached the same prefix (tools and
  system prompt, same model) and it expired since;
- ``unknown``: none of these (the provider evicted it, a minimum length, …).

Its cost over a warm cache is priced: (tokens the previous call had cached that this call did
not read from the cache) * (input price - cache-read price), from the same price source as the
call's cost (for a ``ttl_expired`` first call, what the earlier session had cached). A hit in a
caching session has reason ``''`` and cost 0; a call of a session without caching, NULL.

Memory is bounded: at most :data:`MAX_SESSIONS` sessions (least recently seen dropped first),
each a few fixed-size hashes (the messages are one rolling hash, not a list).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..record import CacheMissReason, CallRecord

MAX_SESSIONS = 20_000
TTL_5M_S = 300.0
TTL_1H_S = 3600.0

Saving = Callable[[CallRecord, int], float | None]
"""``(record, tokens) → tokens * (input price - cache-read price)`` (:meth:`.pricing.Pricer.cache_read_saving`)."""

# Where each API's request keeps the parts of its prompt prefix, in cache order: tools, system, messages.
_SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "anthropic.messages": (("tools",), ("system",), ("messages",)),
    "openai.chat_completions": (("tools", "functions"), (), ("messages",)),
    "openai.responses": (("tools",), ("instructions",), ("input",)),
    "gemini.generate_content": (("tools",), ("systemInstruction", "system_instruction"), ("contents",)),
    "bedrock.converse": (("toolConfig",), ("system",), ("messages",)),
}
_SYSTEM_ROLES = frozenset({"system", "developer"})


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def fingerprint(v: Any) -> bytes:
    """A hash of ``v``'s canonical JSON, ``cache_control`` markers removed."""
    text = json.dumps(_strip(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).digest()


@dataclass(frozen=True, slots=True)
class Prefix:
    tools: bytes
    system: bytes
    messages: tuple[bytes, ...]  # rolling hashes: messages[i] covers the first i + 1 messages


def prefix_of(api: str, body: Any) -> Prefix | None:
    """The prompt-prefix fingerprints of a request body, or ``None`` for an API without a prefix shape."""
    shape = _SHAPES.get(api)
    if shape is None or not isinstance(body, dict):
        return None
    tools_keys, system_keys, messages_keys = shape
    tools = [body.get(k) for k in tools_keys]
    system = [body.get(k) for k in system_keys]
    messages: Any = next((body[k] for k in messages_keys if k in body), [])
    if isinstance(messages, str):
        messages = [messages]
    if not isinstance(messages, list):
        messages = []
    if api == "openai.chat_completions":  # the leading system/developer messages are its system prompt
        lead = 0
        while lead < len(messages) and isinstance(messages[lead], dict) and messages[lead].get("role") in _SYSTEM_ROLES:
            lead += 1
        system, messages = messages[:lead], messages[lead:]
    chain: list[bytes] = []
    h = b""
    for m in messages:
        h = hashlib.blake2b(h + fingerprint(m), digest_size=12).digest()
        chain.append(h)
    return Prefix(fingerprint(tools), fingerprint(system), tuple(chain))


@dataclass(slots=True)
class _Session:
    model: str
    tools: bytes
    system: bytes
    n: int  # messages of the previous call
    chain: bytes  # the rolling hash of its messages
    at: float  # its time (request start)
    cached: int  # tokens it left in the cache: its reads plus its writes
    ttl: float
    caching: bool  # the provider reported caching in this session


class CacheMissAnalyzer:
    """``saving`` prices a miss; ``ttl_5m_s`` / ``ttl_1h_s`` are the providers' TTLs (tests may shorten them)."""

    def __init__(
        self,
        saving: Saving,
        max_sessions: int = MAX_SESSIONS,
        ttl_5m_s: float = TTL_5M_S,
        ttl_1h_s: float = TTL_1H_S,
    ) -> None:
        self.saving = saving
        self.max_sessions = max_sessions
        self.ttl_5m_s, self.ttl_1h_s = ttl_5m_s, ttl_1h_s
        self._sessions: OrderedDict[tuple[str, ...], _Session] = OrderedDict()
        # (provider, api_key_id, model, tools, system) → the last call that cached that prefix, any session
        self._prefixes: OrderedDict[tuple[str | bytes, ...], _Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def _earlier(self, r: CallRecord, model: str, p: Prefix) -> _Session | None:
        """What an earlier session of ``r``'s credential left cached under the same tools and system prompt."""
        if not r.api_key_id:
            return None
        with self._lock:
            return self._prefixes.get((r.provider, r.api_key_id, model, p.tools, p.system))

    def _remember_prefix(self, r: CallRecord, model: str, now: _Session) -> None:
        if not r.api_key_id or not now.cached:
            return
        key = (r.provider, r.api_key_id, model, now.tools, now.system)
        with self._lock:
            self._prefixes.pop(key, None)
            self._prefixes[key] = now
            while len(self._prefixes) > self.max_sessions:
                self._prefixes.popitem(last=False)

    def enrich(self, r: CallRecord, ctx: Any) -> None:
        if r.outcome != "ok" or r.usage_source != "provider" or r.billing == "batch":
            return
        prefix = prefix_of(r.api, getattr(ctx, "request", None))
        if prefix is None:
            return
        model = r.response_model or r.request_model
        key = (r.provider, "s", r.session_id) if r.session_id else (r.provider, "k", r.api_key_id, model)
        with self._lock:
            prev = self._sessions.pop(key, None)
        reason, lost = self._classify(r, model, prefix, prev)
        if reason == "first_call":  # a cold start — unless an earlier session's cache of this prefix expired
            earlier = self._earlier(r, model, prefix)
            reason, lost = "first_call", 0
            if earlier is not None and earlier.cached and r.timestamp - earlier.at > earlier.ttl:
                reason, lost = "ttl_expired", min(earlier.cached, r.input_tokens) - r.cache_read_tokens
        caching = bool(r.cache_read_tokens or r.cache_write_tokens) or (prev is not None and prev.caching)
        if caching:
            r.cache_miss_reason = reason
            r.cache_miss_cost_usd = 0.0
            if lost > 0:
                r.cache_miss_cost_usd = self.saving(r, lost)
        if r.cache_write_tokens:
            ttl = self.ttl_1h_s if r.cache_write_1h_tokens >= r.cache_write_tokens else self.ttl_5m_s
        else:
            ttl = prev.ttl if prev is not None else self.ttl_5m_s
        now = _Session(
            model,
            prefix.tools,
            prefix.system,
            len(prefix.messages),
            prefix.messages[-1] if prefix.messages else b"",
            r.timestamp,
            r.cache_read_tokens + r.cache_write_tokens,
            ttl,
            caching,
        )
        with self._lock:
            self._sessions[key] = now
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        self._remember_prefix(r, model, now)

    def _classify(self, r: CallRecord, model: str, p: Prefix, prev: _Session | None) -> tuple[CacheMissReason, int]:
        """(reason, tokens lost) for a call in a session whose previous call was ``prev``."""
        if prev is None or prev.cached == 0:
            if r.cache_write_tokens and not r.cache_read_tokens:
                return "first_call", 0
            return "", 0
        lost = min(prev.cached, r.input_tokens) - r.cache_read_tokens
        if lost <= 0:
            return "", 0
        if model != prev.model:
            return "model_changed", lost
        if p.tools != prev.tools:
            return "tools_changed", lost
        if p.system != prev.system:
            return "system_changed", lost
        if prev.n and (len(p.messages) < prev.n or p.messages[prev.n - 1] != prev.chain):
            return "history_changed", lost
        if r.timestamp - prev.at > prev.ttl:
            return "ttl_expired", lost
        return "unknown", lost
