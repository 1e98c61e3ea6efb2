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


def test_openai_compatible_embeddings_keep_their_id() -> None:
    # mistral/embeddings_gzip.json (gzip as recorded): "id": "cc93a06d10244e07a4b2604c20855c61", model mistral-embed,
    # usage {"prompt_tokens": 10, "completion_tokens": 0}.
    check(
        "mistral/embeddings_gzip.json",
        {
            "provider": "mistral_ai",
            "api": "openai.embeddings",
            "operation": "embeddings",
            "request_model": "mistral-embed",
            "response_model": "mistral-embed",
            "response_id": "cc93a06d10244e07a4b2604c20855c61",
            "input_tokens": 10,
            "output_tokens": 0,
            "usage_source": "provider",
        },
    )


def test_openai_embeddings_have_no_id() -> None:
    # openai/embeddings_ada_gzip.json: no "id" in the body (OpenAI's embeddings object has none); usage 8 tokens.
    check(
        "openai/embeddings_ada_gzip.json",
        {
            "response_id": "",
            "response_model": "text-embedding-ada-002-v2",
            "input_tokens": 8,
            "usage_source": "provider",
        },
    )
