"""Telemetry outputs from a real `llmtap run`: OTLP spans, Prometheus values, price file, content, no leaks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers import Mock, OtlpReceiver, Sidecar, openai_client, session_id, start_sidecar, stop
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from prometheus_client.parser import text_string_to_metric_families

from llmtap.testing.rawclient import request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PLANTED = "sk-PLANTEDsecret0123456789abcdefXYZ"  # must never be found anywhere llmtap writes
PRICES = """
[[price]]
provider = "openai"
model = "gpt-4o*"
input_mtok = 100.0
output_mtok = 1000.0
cache_read_mtok = 10.0
"""


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def tele(mock: Mock, otlp: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    base = tmp_path_factory.mktemp("tele")
    prices = base / "prices.toml"
    prices.write_text(PRICES)
    sc = start_sidecar(
        base / "data",
        mock,
        "--otlp-endpoint",
        f"http://127.0.0.1:{otlp.port}",
        "--prices",
        str(prices),
        "--capture-content",
        "--log-format",
        "json",
        "--service",
        "tele-svc",
        env={"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"},
    )
    yield sc
    stop(sc.proc)


def client(sc: Sidecar, key: str = "sk-test") -> openai.OpenAI:
    return openai_client(sc, key)  # type: ignore[no-any-return]


def attrs(sp: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in sp.attributes:
        v = a.value
        kind = v.WhichOneof("value")
        out[a.key] = list(x.string_value for x in v.array_value.values) if kind == "array_value" else getattr(v, kind)
    return out


def test_streamed_call_becomes_a_client_span(tele: Sidecar, otlp: OtlpReceiver) -> None:
    sid = session_id()
    parent_trace, parent_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    list(
        client(tele).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={
                "x-llmtap-session": sid,
                "x-mock-scenario": "cached_reasoning",
                "traceparent": f"00-{parent_trace}-{parent_span}-01",
            },
        )
    )
    row = tele.row(sid)
    res, sp = otlp.span(row["span_id"])
    assert sp.name == "chat gpt-4o"
    assert sp.kind == Span.SpanKind.SPAN_KIND_CLIENT
    assert sp.trace_id.hex() == row["trace_id"] == parent_trace
    assert sp.parent_span_id.hex() == parent_span
    assert sp.status.code == Status.StatusCode.STATUS_CODE_UNSET
    start_us = int(time.mktime(time.strptime(row["timestamp"][:19], "%Y-%m-%d %H:%M:%S")) - time.timezone) * 10**6
    start_us += int(row["timestamp"][20:26])
    assert abs(sp.start_time_unix_nano // 1000 - start_us) <= 1
    assert (sp.end_time_unix_nano - sp.start_time_unix_nano) / 1e6 == pytest.approx(row["duration_ms"], abs=0.01)
    assert res["service.name"] == "tele-svc" and res["deployment.environment"] == "test" and res["scope"] == "llmtap"
    a = attrs(sp)
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "gpt-4o" and a["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert a["gen_ai.response.id"] == "chatcmpl-mock123" and a["gen_ai.response.finish_reasons"] == ["stop"]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (2048, 96)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 1024 and a["gen_ai.usage.reasoning.output_tokens"] == 64
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(row["ttft_ms"] / 1000)
    assert a["server.address"] == "api.openai.com" and a["server.port"] == 443
    assert a["http.response.status_code"] == 200 and "error.type" not in a
    # every other llm_calls column rides along as llmtap.*
    for col in ("outcome", "usage_source", "request_id", "content_events", "itl_p50_ms", "request_hash", "api_key_id"):
        assert a[f"llmtap.{col}"] == row[col], col


def test_mid_stream_error_span_has_error_status(tele: Sidecar, otlp: OtlpReceiver) -> None:
    sid = session_id()
    with pytest.raises(openai.APIError):
        list(
            client(tele).chat.completions.create(
                model="gpt-4o",
                messages=[],
                stream=True,
                extra_headers={"x-llmtap-session": sid, "x-mock-scenario": "mid_stream_error"},
            )
        )
    row = tele.row(sid)
    _, sp = otlp.span(row["span_id"])
    assert sp.status.code == Status.StatusCode.STATUS_CODE_ERROR
    assert sp.status.message.startswith("The server had an error")
    a = attrs(sp)
    assert a["error.type"] == "server_error" and a["llmtap.mid_stream_error"] is True
    assert a["http.response.status_code"] == 200


def test_price_file_overrides_the_library(tele: Sidecar) -> None:
    sid = session_id()
    list(
        client(tele).chat.completions.create(
            model="gpt-4o",
            messages=[],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-llmtap-session": sid, "x-mock-scenario": "cached_reasoning"},
        )
    )
    row = tele.row(sid)
    want_in = ((2048 - 1024) * 100.0 + 1024 * 10.0) / 1e6
    want_out = 96 * 1000.0 / 1e6
    assert row["input_cost_usd"] == pytest.approx(want_in) and row["output_cost_usd"] == pytest.approx(want_out)
    assert row["cost_usd"] == pytest.approx(want_in + want_out)


def test_content_capture_is_redacted_and_kept_apart(tele: Sidecar) -> None:
    sid = session_id()
    client(tele).chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "mail bob@example.com, key sk-live0123456789abcdefgh"}],
        extra_headers={"x-llmtap-session": sid},
    )
    row = tele.row(sid)
    rows = tele.sql(f"SELECT * FROM llm_content WHERE span_id = '{row['span_id']}'")
    assert len(rows) == 1
    inp = json.loads(rows[0]["input_messages"])
    assert inp[0]["role"] == "user"
    text = inp[0]["parts"][0]["content"]
    assert "bob@example.com" not in text and "sk-live0123456789abcdefgh" not in text and "[REDACTED]" in text
    out = json.loads(rows[0]["output_messages"])
    assert out[0]["parts"][0]["content"].startswith("The quick brown fox")
    ddl = tele.sql("SHOW CREATE TABLE llm_content")[0]["statement"]
    assert "toIntervalDay(7)" in ddl


def test_json_log_line_per_call(tele: Sidecar) -> None:
    sid = session_id()
    client(tele).embeddings.create(model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid})
    tele.row(sid)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [json.loads(x) for x in tele.log.read_text().splitlines() if x.startswith("{")]
        calls = [x for x in lines if x.get("session_id") == sid]
        if calls:
            break
        time.sleep(0.05)
    assert len(calls) == 1 and calls[0]["msg"] == "llm call" and calls[0]["api"] == "openai.embeddings"


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    found = False
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
                found = True
    assert found, f"{name}{labels} not exposed"
    return total


def test_metrics_values_after_known_calls(tele: Sidecar) -> None:
    c = client(tele)
    for _ in range(3):
        list(
            c.chat.completions.create(
                model="gpt-metrics", messages=[], stream=True, stream_options={"include_usage": True}
            )
        )
    with pytest.raises(openai.RateLimitError):
        c.chat.completions.create(model="gpt-metrics", messages=[], extra_headers={"x-mock-scenario": "quota_429"})
    failed = session_id()
    with pytest.raises(openai.APIError):
        list(
            c.chat.completions.create(
                model="gpt-metrics",
                messages=[],
                stream=True,
                extra_headers={"x-mock-scenario": "mid_stream_error", "x-llmtap-session": failed},
            )
        )
    tele.rows("request_model = 'gpt-metrics'", 5)
    estimated_out = tele.row(failed)["output_tokens"]  # tiktoken or the offline heuristic
    assert estimated_out > 0
    _, body = tele.admin_request("GET", "/metrics")
    t = body.decode()
    m = "gpt-metrics"
    assert metric(t, "llmtap_requests_total", model=m, outcome="ok", error_type="") == 3
    assert metric(t, "llmtap_requests_total", model=m, outcome="error", error_type="quota_exhausted") == 1
    assert metric(t, "llmtap_requests_total", model=m, outcome="error", error_type="server_error") == 1
    assert metric(t, "llmtap_tokens_total", model=m, type="input") == 3 * 31  # the failed stream: empty prompt
    assert metric(t, "llmtap_tokens_total", model=m, type="output") == 3 * 8 + estimated_out
    assert metric(t, "llmtap_mid_stream_errors_total", model=m, error_type="server_error") == 1
    assert metric(t, "llmtap_request_duration_seconds_count", model=m) == 5
    assert metric(t, "llmtap_request_duration_seconds_count", model=m, outcome="ok", operation="chat") == 3
    assert metric(t, "llmtap_time_to_first_token_seconds_count", model=m) == 4  # 3 ok streams + the failed one
    assert metric(t, "llmtap_time_per_output_chunk_seconds_count", model=m) == 3 * 7 + 2
    assert metric(t, "llmtap_time_to_first_token_seconds_bucket", model=m, le="+Inf") == 4
    assert metric(t, "llmtap_ratelimit_remaining", provider="openai", kind="requests") == 4999


def test_planted_key_is_found_nowhere(tele: Sidecar, mock: Mock, otlp: OtlpReceiver) -> None:
    sids = [session_id() for _ in range(4)]
    client(tele, key=PLANTED).embeddings.create(
        model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sids[0]}
    )
    import ssl

    anthropic.Anthropic(
        api_key=PLANTED,
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(
            proxy=tele.proxy_url, verify=ssl.create_default_context(cafile=str(tele.bundle))
        ),
    ).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=5,
        messages=[{"role": "user", "content": "x"}],
        extra_headers={"x-llmtap-session": sids[1]},
    )
    for sid, hdrs, path in (
        (
            sids[2],
            {"api-key": PLANTED, "x-goog-api-key": PLANTED, "cookie": f"session={PLANTED}"},
            "/v1/chat/completions",
        ),
        (sids[3], {"proxy-authorization": f"Bearer {PLANTED}"}, f"/v1/chat/completions?key={PLANTED}"),
    ):
        request(
            "api.openai.com",
            443,
            path,
            {"model": "gpt-4o", "messages": []},
            {**hdrs, "x-llmtap-session": sid},
            tele.bundle,
            proxy=("127.0.0.1", tele.listen),
        )
    for sid in sids:
        assert tele.row(sid)["api_key_id"]
    ids = {tele.row(s)["api_key_id"] for s in sids}
    assert len(ids) == 1  # the same key gives the same fingerprint in every position
    for table in ("otel_traces", "llm_calls", "llm_content"):  # decoded rows: column files are compressed
        dump = json.dumps(tele.sql(f"SELECT * FROM {table}"))
        assert PLANTED not in dump and PLANTED[3:20] not in dump, f"planted key in {table}"
    _, metrics_text = tele.admin_request("GET", "/metrics")
    assert PLANTED.encode() not in metrics_text
    stop_ok = stop(tele.proc)  # flush everything to disk before searching it
    assert stop_ok == 0
    needle = PLANTED.encode()
    for path in Path(tele.data_dir).rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), f"planted key found in {path}"
    assert needle not in tele.log.read_bytes()
    assert all(needle not in body for body in otlp.requests)
