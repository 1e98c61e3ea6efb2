"""OpenAI embeddings adapter on a recorded real response."""

from __future__ import annotations

from corpus import check


def test_embeddings_usage() -> None:
    # openai/embeddings.json: one 1536-float embedding, usage {"prompt_tokens": 7, "total_tokens": 7}
    check(
        "openai/embeddings.json",
        {
            "api": "openai.embeddings",
            "operation": "embeddings",
            "request_model": "text-embedding-3-small",
            "response_model": "text-embedding-3-small",
            "stream": False,
            "outcome": "ok",
            "input_tokens": 7,
            "output_tokens": 0,
            "usage_source": "provider",
            "request_id": "req_36fe91c62ffa4cdba947d28da81e2bc2",
        },
    )
