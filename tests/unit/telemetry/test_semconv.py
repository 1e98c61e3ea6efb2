"""The span contract: GenAI attribute names and the collector's stringification."""

from __future__ import annotations

import pytest

from llmtap.record import COLUMN_NAMES
from llmtap.telemetry.semconv import SEMCONV, as_string, es6_number, span_attributes
from llmtap.testing import builders


def test_span_attributes_use_genai_names() -> None:
    attrs = span_attributes(builders.sample_record())
    for name in (
        "gen_ai.provider.name",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.request.stream",
        "gen_ai.request.max_tokens",
        "gen_ai.response.time_to_first_chunk",
        "server.address",
        "error.type",
        "http.response.status_code",
    ):
        assert name in attrs, name
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.25025)
    assert set(SEMCONV) <= set(COLUMN_NAMES)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (3, "3"),
        (1.0, "1"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (5e-5, "0.00005"),
        (1e21, "1e+21"),
        (123456789012.5, "123456789012.5"),
        (["stop"], '["stop"]'),
        ("x", "x"),
        (-2.25, "-2.25"),
    ],
)
def test_attribute_stringification_matches_the_collector(value: object, text: str) -> None:
    assert as_string(value) == text


def test_es6_numbers_round_trip() -> None:
    for f in (0.1 + 0.2, 1 / 3, 12345.678, 9.999e-7, 2.5e22):
        assert float(es6_number(f)) == f
