"""Pricing rules, redaction, attribution and credential fingerprints, exporter selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from llmtap.intercept.attribution import Fingerprinter, read_attribution
from llmtap.record import CallRecord
from llmtap.telemetry.pricing import PriceFileError, Pricer, PriceRule, load_price_file
from llmtap.telemetry.redact import redact


def rec(**kw: object) -> CallRecord:
    base: dict[str, object] = {
        "provider": "openai",
        "request_model": "gpt-4o",
        "input_tokens": 1000,
        "output_tokens": 500,
        "cache_read_tokens": 400,
        "reasoning_tokens": 100,
        "usage_source": "provider",
    }
    base.update(kw)
    return CallRecord(**base)  # type: ignore[arg-type]


def test_genai_prices_with_dated_models_and_cache() -> None:
    r = rec(response_model="gpt-4o-2024-08-06")
    Pricer().apply(r)
    want = calc_price(
        Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=500), "gpt-4o-2024-08-06", provider_id="openai"
    )
    assert r.cost_usd == pytest.approx(float(want.total_price)) and r.extra["cost_source"] == "genai-prices"


def test_unknown_model_and_self_hosted_stay_null() -> None:
    for r in (rec(request_model="acme-9000"), rec(provider="vllm", request_model="gpt-4o"), rec(usage_source="none")):
        Pricer().apply(r)
        assert r.cost_usd is None and r.input_cost_usd is None


def test_provider_reported_cost_wins() -> None:
    r = rec(provider="openrouter", cost_usd=0.95)
    Pricer([PriceRule(model="*", input_mtok=1e6, output_mtok=1e6)]).apply(r)
    assert r.cost_usd == 0.95


def test_price_rules_glob_and_provider(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(
        '{"price": [{"provider": "vllm", "model": "llama-*", "input_mtok": 1, "output_mtok": 2,'
        ' "cache_read_mtok": 0.5}]}'
    )
    pricer = Pricer(load_price_file(f))
    r = rec(provider="vllm", request_model="llama-3.1-70b")
    pricer.apply(r)
    assert r.input_cost_usd == pytest.approx((600 * 1 + 400 * 0.5) / 1e6)
    assert r.output_cost_usd == pytest.approx(500 * 2 / 1e6) and r.extra["cost_source"] == "price_file"
    other = rec(provider="ollama", request_model="llama-3")
    pricer.apply(other)
    assert other.cost_usd is None


@pytest.mark.parametrize("text", ['{"price": [{"model": "x"}]}', "not json", '{"price": 3}'])
def test_bad_price_files_are_clear_errors(tmp_path: Path, text: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(PriceFileError, match=str(f)):
        load_price_file(f)


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Incorrect API key provided: sk-proj-abc123def456ghi789", "sk-proj-abc123def456ghi789"),
        ("key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA here", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
        ("password=hunter22secret", "hunter22secret"),
        ("contact jane.doe@example.org now", "jane.doe@example.org"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_redaction(text: str, gone: str) -> None:
    out = redact(text)
    assert gone not in out and ("[REDACTED]" in out or "[EMAIL]" in out)


def test_fingerprints_are_keyed_and_stable(tmp_path: Path) -> None:
    fp = Fingerprinter.from_data_dir(tmp_path)
    assert (tmp_path / "install-secret").stat().st_mode & 0o777 == 0o600
    a = fp.api_key_id([("authorization", "Bearer sk-one")])
    assert a == fp.api_key_id([("x-api-key", "sk-one")]) == fp.api_key_id([], "key=sk-one&alt=sse")
    assert a != fp.api_key_id([("authorization", "Bearer sk-two")]) and "sk-one" not in a
    assert Fingerprinter(b"other-install").api_key_id([("x-api-key", "sk-one")]) != a
    sig = "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260101/us-east-1/bedrock/aws4_request, Signature=abc"
    assert fp.api_key_id([("authorization", sig)]) == fp.fingerprint("AKIAEXAMPLE")
    assert fp.api_key_id([]) == ""


def test_attribution_headers_and_foreign_session_headers() -> None:
    got = read_attribution([("x-llmtap-feature", "search"), ("helicone-session-id", "h1"), ("x-llmtap-user", "u")])
    assert got == {"feature": "search", "session_id": "h1", "user_id": "u"}
    assert read_attribution([("x-llmtap-session", "mine"), ("x-session-id", "theirs")])["session_id"] == "mine"


def test_exporter_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    from llmtap.telemetry.spans import otlp_exporter

    for k in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(k, raising=False)
    http = otlp_exporter("http://collector:4318")
    assert isinstance(http, Http) and http._endpoint == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert isinstance(otlp_exporter("http://collector:4317"), Grpc)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
    with pytest.raises(ValueError):
        otlp_exporter("http://x")
