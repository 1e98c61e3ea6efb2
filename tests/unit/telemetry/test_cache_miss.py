"""Cache-miss forensics: the reason of each miss in a session, its cost, bounded memory. Usage comes
from the mock's simulated Anthropic prompt cache (llmtap.testing.mock.prompt_cache), as a provider
would report it for these bodies."""

from __future__ import annotations

import copy
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from llmtap.record import CallRecord
from llmtap.telemetry.cache_miss import CacheMissAnalyzer, prefix_of
from llmtap.testing.mock import prompt_cache

TOOLS = [{"name": f"t{i}", "description": "x" * 200, "input_schema": {"type": "object"}} for i in range(3)]
SYSTEM = "be careful " * 100
PRICE = 2.7e-6  # the fake saving: per token (input price - cache-read price)


def body(tools: list[Any], system: str, turns: list[str]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    for i, t in enumerate(turns):
        if i:
            msgs.append({"role": "assistant", "content": f"a{i}"})
        msgs.append({"role": "user", "content": [{"type": "text", "text": t}]})
    msgs[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-sonnet-4-5",
        "tools": tools,
        "messages": msgs,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
    }


class Session:
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.analyzer = CacheMissAnalyzer(lambda r, tokens: tokens * PRICE)

    def call(
        self, b: dict[str, Any], t: float, session: str = "s1", model: str = "claude-sonnet-4-5", key: str = ""
    ) -> CallRecord:
        b = {**b, "model": model}
        u = prompt_cache.usage(b, self.scope, 300.0, now=t)
        r = CallRecord(
            timestamp=t,
            provider="anthropic",
            api="anthropic.messages",
            request_model=model,
            session_id=session,
            api_key_id=key,
            usage_source="provider",
            input_tokens=u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
            cache_read_tokens=u["cache_read_input_tokens"],
            cache_write_tokens=u["cache_creation_input_tokens"],
        )
        self.analyzer.enrich(r, SimpleNamespace(request=b))
        return r


def test_each_reason_in_one_session() -> None:
    s = Session("unit-reasons")
    turns = ["q1 " * 50, "q2", "q3", "q4", "q5", "q6"]
    tools2 = [*TOOLS, {"name": "new", "input_schema": {"type": "object"}}]
    got = [
        s.call(body(TOOLS, SYSTEM, turns[:1]), 1000),
        s.call(body(TOOLS, SYSTEM, turns[:2]), 1010),  # the marker moved to the newest turn: a hit
        s.call(body(tools2, SYSTEM, turns[:3]), 1020),
        s.call(body(tools2, SYSTEM + "!", turns[:4]), 1030),
        s.call(body(tools2, SYSTEM + "!", turns[:5]), 1030 + 301),  # past the 5-minute TTL
        s.call(body(tools2, SYSTEM + "!", ["edited " * 50, *turns[1:5]]), 1340),
        s.call(body(tools2, SYSTEM + "!", ["edited " * 50, *turns[1:5]]), 1345, model="claude-opus-4-1"),
    ]
    assert [r.cache_miss_reason for r in got] == [
        "first_call",
        "",
        "tools_changed",
        "system_changed",
        "ttl_expired",
        "history_changed",
        "model_changed",
    ]
    assert got[0].cache_write_tokens > 0 and got[0].cache_miss_cost_usd == 0.0  # a cold start, not a miss (#27)
    assert got[1].cache_miss_cost_usd == 0.0
    for prev, r in itertools.pairwise(got[1:]):  # what the previous call had cached and this one did not read
        lost = min(prev.cache_read_tokens + prev.cache_write_tokens, r.input_tokens) - r.cache_read_tokens
        assert lost > 0 and r.cache_miss_cost_usd == pytest.approx(lost * PRICE)


def test_a_prefix_an_earlier_session_cached_and_let_expire_is_ttl_expired() -> None:
    # DESIGN.md third round: the first call of a new session is first_call (cost 0), unless an earlier session
    # of the same api_key_id cached the same prefix (tools, system, model) and it expired: then ttl_expired.
    s = Session("unit-cross-session")
    first = s.call(body(TOOLS, SYSTEM, ["a " * 50]), 2000, session="s-a", key="k1")
    warm = s.call(body(TOOLS, SYSTEM, ["b " * 50]), 2010, session="s-b", key="k1")  # within the TTL: a read
    cold = s.call(body(TOOLS, SYSTEM, ["c " * 50]), 2010 + 301, session="s-c", key="k1")  # past it
    k2 = Session("unit-cross-session-k2")  # another key: the provider's cache is its own (the mock's scope)
    k2.analyzer = s.analyzer
    other = k2.call(body(TOOLS, SYSTEM, ["d " * 50]), 2010 + 301, session="s-d", key="k2")
    assert (first.cache_miss_reason, first.cache_miss_cost_usd) == ("first_call", 0.0)
    assert warm.cache_read_tokens > 0 and warm.cache_miss_reason == ""
    assert cold.cache_read_tokens == 0 and cold.cache_miss_reason == "ttl_expired"
    lost = min(warm.cache_read_tokens + warm.cache_write_tokens, cold.input_tokens)
    assert cold.cache_miss_cost_usd == pytest.approx(lost * PRICE)
    assert (other.cache_miss_reason, other.cache_miss_cost_usd) == ("first_call", 0.0)


def test_moving_the_cache_control_marker_is_not_a_change() -> None:
    a = body(TOOLS, SYSTEM, ["q1", "q2"])
    b = copy.deepcopy(a)
    for m in b["messages"]:
        for part in m["content"] if isinstance(m["content"], list) else []:
            part.pop("cache_control", None)
    b["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    pa, pb = prefix_of("anthropic.messages", a), prefix_of("anthropic.messages", b)
    assert pa == pb and pa is not None


def test_calls_without_caching_have_no_reason_and_null_cost() -> None:
    an = CacheMissAnalyzer(lambda r, t: 1.0)
    r = CallRecord(
        provider="anthropic",
        api="anthropic.messages",
        request_model="m",
        session_id="x",
        usage_source="provider",
        input_tokens=100,
    )
    an.enrich(r, SimpleNamespace(request=body(TOOLS, SYSTEM, ["q"])))
    assert (r.cache_miss_reason, r.cache_miss_cost_usd) == ("", None)


def test_sessions_are_bounded() -> None:
    an = CacheMissAnalyzer(lambda r, t: 0.0, max_sessions=100)
    for i in range(1000):
        r = CallRecord(
            provider="anthropic",
            api="anthropic.messages",
            request_model="m",
            session_id=f"s{i}",
            usage_source="provider",
            input_tokens=100,
            cache_write_tokens=50,
        )
        an.enrich(r, SimpleNamespace(request=body(TOOLS, SYSTEM, ["q"])))
    assert len(an) == 100
