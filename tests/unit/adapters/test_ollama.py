"""Ollama native API on a recorded real NDJSON stream."""

from __future__ import annotations

import pytest

from corpus import check


def test_generate_stream() -> None:
    # ollama/generate_stream.ndjson: 12 objects; 9 with a non-empty "response", three with ""
    # and the last {"done": true, "done_reason": "stop", "total_duration": 737855362 (ns),
    # "prompt_eval_count": 11, "eval_count": 11}.
    check(
        "ollama/generate_stream.ndjson",
        {
            "provider": "ollama",
            "api": "ollama.generate",
            "request_model": "deepseek-v3.1:671b",
            "response_model": "deepseek-v3.1:671b",
            "stream": True,
            "outcome": "ok",
            "content_events": 9,
            "finish_reason": "stop",
            "finish_reason_raw": "stop",
            "input_tokens": 11,
            "output_tokens": 11,
            "usage_source": "provider",
            "provider_processing_ms": pytest.approx(737.855362),
        },
    )
