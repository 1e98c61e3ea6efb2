"""Metric label values from requests are bounded (issue #19, finding 12)."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llmtap.record import CallRecord
from llmtap.telemetry.metrics import (
    MAX_KEYS,
    MAX_MODELS_TOTAL,
    MAX_PRICED_MODELS,
    MAX_UNPRICED_MODELS,
    OTHER,
    Metrics,
)


def models_in(m: Metrics) -> set[str]:
    return {
        s.labels["model"]
        for fam in text_string_to_metric_families(m.exposition().decode())
        for s in fam.samples
        if s.name == "llmtap_requests_total"
    }


def llm_call(**kw: Any) -> CallRecord:
    """A record of an LLM call (``api`` set): the call metrics count only those."""
    return CallRecord(api="openai.chat_completions", **kw)


def test_a_thousand_request_model_names_do_not_grow_the_exposition() -> None:
    m = Metrics()
    for i in range(1000):
        m.observe(llm_call(provider="openai", request_model=f"attacker-{i}-" + "x" * 200, api_key_id=f"k{i}",
                             ratelimit_remaining_requests=1))  # fmt: skip
    labels = models_in(m)
    assert len(labels) == MAX_UNPRICED_MODELS + 1 and OTHER in labels
    assert all(len(v) <= 128 for v in labels)
    assert len(m.exposition()) < 2_000_000
    keys = {
        s.labels["api_key_id"]
        for fam in text_string_to_metric_families(m.exposition().decode())
        for s in fam.samples
        if s.name == "llmtap_ratelimit_remaining"
    }
    assert len(keys) == MAX_KEYS + 1


def test_priced_models_always_keep_their_name() -> None:
    m = Metrics()
    for i in range(MAX_UNPRICED_MODELS + 10):
        m.observe(llm_call(provider="openai", request_model=f"junk-{i}"))
    m.observe(
        CallRecord(
            api="openai.chat_completions",
            provider="openai",
            request_model="gpt-4o",
            cost_source="genai-prices",
            cost_usd=0.1,
        )
    )
    m.observe(llm_call(provider="anthropic", request_model="claude-x"))  # another provider has its own room
    labels = models_in(m)
    assert "gpt-4o" in labels and "claude-x" in labels and OTHER in labels


def test_a_model_name_no_scrape_can_encode_breaks_no_scrape() -> None:
    """Issue #26: one call whose model was "\\ud800" made every later /metrics scrape fail (UnicodeEncodeError)."""
    m = Metrics()
    for model in ("\ud800", "a\udfffb", "tab\there\r\nNUL\x00", "\x9bC1", "😀 ok", "\ud83d\ude00 pair"):
        m.observe(llm_call(provider="openai", request_model=model, api_key_id="k\ud800"))
    m.observe(llm_call(provider="openai", request_model="gpt-4o"))
    labels = models_in(m)  # parses: the exposition is valid UTF-8 text
    assert {"\ufffd", "a\ufffdb", "tab\ufffdhere\ufffd\ufffdNUL\ufffd", "\ufffdC1", "😀 ok", "😀 pair"} <= labels
    assert "gpt-4o" in labels
    assert all(v.isprintable() for v in labels)
    models_in(m)  # and the next scrape too


def test_priced_calls_with_junk_models_are_bounded_too() -> None:
    """Issue #26: the cap held for unpriced models only; 200 priced calls with free-text models (Azure: the
    deployment is in the path, the body's model is anything) grew /metrics from 23 KB to 813 KB."""
    m = Metrics()
    m.observe(
        CallRecord(
            api="openai.chat_completions",
            provider="azure.ai.openai",
            request_model="gpt-4o",
            cost_source="genai-prices",
        )
    )
    before = len(m.exposition())
    for i in range(200):
        m.observe(llm_call(provider="azure.ai.openai", request_model=f"my deployment says {i}", cost_usd=0.01,
                             cost_source="genai-prices", ttft_ms=100.0), gaps_s=[0.01])  # fmt: skip
    labels = models_in(m)
    assert len(labels) == MAX_PRICED_MODELS + 1 and OTHER in labels and "gpt-4o" in labels
    assert len(m.exposition()) < before + MAX_PRICED_MODELS * 8_000
    for i in range(200):  # unpriced junk fills its own room, not the priced one's
        m.observe(llm_call(provider="azure.ai.openai", request_model=f"unpriced {i}"))
    assert len(models_in(m)) == MAX_PRICED_MODELS + MAX_UNPRICED_MODELS + 1
    for p in range(10):  # and over all providers
        for i in range(MAX_PRICED_MODELS):
            m.observe(
                CallRecord(
                    api="openai.chat_completions", provider=f"p{p}", request_model=f"m{i}", cost_source="genai-prices"
                )
            )
    series = {
        (s.labels["provider"], s.labels["model"])
        for fam in text_string_to_metric_families(m.exposition().decode())
        for s in fam.samples
        if s.name == "llmtap_requests_total" and s.labels["model"] != OTHER
    }
    assert len(series) == MAX_MODELS_TOTAL + MAX_UNPRICED_MODELS  # priced ones capped over all providers


def test_other_requests_are_counted_apart() -> None:
    """The contract's third round: a request that is no LLM call (api '') is in llmtap_other_requests_total only."""
    m = Metrics()
    m.observe(CallRecord(api="", operation="other", provider="anthropic", status_code=404, outcome="error"))
    m.observe(CallRecord(api="", operation="other", provider="anthropic", status_code=200))
    m.observe(
        CallRecord(api="anthropic.messages", operation="chat", provider="anthropic", request_model="claude-sonnet-4-5")
    )
    text = m.exposition().decode()
    assert 'llmtap_other_requests_total{provider="anthropic",status_class="4xx"} 1.0' in text
    assert 'llmtap_other_requests_total{provider="anthropic",status_class="2xx"} 1.0' in text
    calls = [ln for ln in text.splitlines() if ln.startswith("llmtap_requests_total{")]
    assert calls == [
        'llmtap_requests_total{error_type="",model="claude-sonnet-4-5",operation="chat",outcome="ok",provider="anthropic"}'
        " 1.0"
    ]
