"""Metric label values from requests are bounded (issue #19, finding 12)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from llmtap.record import CallRecord
from llmtap.telemetry.metrics import MAX_KEYS, MAX_UNPRICED_MODELS, OTHER, Metrics


def models_in(m: Metrics) -> set[str]:
    return {
        s.labels["model"]
        for fam in text_string_to_metric_families(m.exposition().decode())
        for s in fam.samples
        if s.name == "llmtap_requests_total"
    }


def test_a_thousand_request_model_names_do_not_grow_the_exposition() -> None:
    m = Metrics()
    for i in range(1000):
        m.observe(CallRecord(provider="openai", request_model=f"attacker-{i}-" + "x" * 200, api_key_id=f"k{i}",
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
        m.observe(CallRecord(provider="openai", request_model=f"junk-{i}"))
    m.observe(CallRecord(provider="openai", request_model="gpt-4o", cost_source="genai-prices", cost_usd=0.1))
    m.observe(CallRecord(provider="anthropic", request_model="claude-x"))  # another provider has its own room
    labels = models_in(m)
    assert "gpt-4o" in labels and "claude-x" in labels and OTHER in labels
