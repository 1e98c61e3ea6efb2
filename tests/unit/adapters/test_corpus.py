"""The recorded corpus (tests/corpus): complete, attributed, replayed by a test, and chunking-proof."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import CORPUS, names, recording, replay_row

ADAPTER_TESTS = Path(__file__).parent
STABLE = (
    "provider",
    "api",
    "stream",
    "status_code",
    "outcome",
    "error_type",
    "error_code",
    "mid_stream_error",
    "finish_reason",
    "finish_reason_raw",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "usage_source",
    "content_events",
    "tool_calls",
    "retry_after_s",
)


def test_the_corpus_is_big_attributed_and_every_recording_is_asserted() -> None:
    all_names = names()
    assert len(all_names) >= 30
    provenance = (CORPUS / "PROVENANCE.md").read_text()
    tests = "".join(p.read_text() for p in ADAPTER_TESTS.glob("test_*.py") if p.name != "test_corpus.py")
    for name in all_names:
        rec = recording(name)
        assert rec.host and rec.path.startswith("/") and 100 <= rec.status <= 599
        assert f"`{name}`" in provenance, f"{name} is not in PROVENANCE.md"
        assert f'"{name}"' in tests, f"no adapter test replays {name}"
    providers = {n.split("/", 1)[0] for n in all_names}
    assert providers >= {"openai", "azure", "anthropic", "gemini", "vertex", "bedrock", "groq", "deepseek"}
    assert providers >= {"mistral", "xai", "openrouter", "ollama"}


@pytest.mark.parametrize("name", names())
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, 100_000), max_size=12))
def test_any_chunking_gives_the_same_row(name: str, cuts: list[int]) -> None:
    whole = replay_row(name)
    split = replay_row(name, cuts=cuts)
    assert {k: getattr(split, k) for k in STABLE} == {k: getattr(whole, k) for k in STABLE}
