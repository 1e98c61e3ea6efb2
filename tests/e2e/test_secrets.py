"""Planted secrets of every shape found nowhere (issue #19, finding 7): not in the tables, the spans, the
logs (at DEBUG), /metrics, the spool or any file of the data dir.

They are planted where a real sidecar meets them: a SigV4 ``Authorization`` and session token on a
Bedrock call, an upstream error that echoes credentials back, captured request content holding keys
in JSON fields (and Azure hex keys, bearer-like strings), attribution headers, and an upstream that
puts them in the answer's id and model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Mock, OtlpReceiver, Sidecar, session_id, start_sidecar, stop
from secrets_corpus import SHAPES, TEXT

from llmtap.testing.rawclient import request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def vault(mock: Mock, otlp: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = start_sidecar(
        tmp_path_factory.mktemp("vault") / "data",
        mock,
        "--otlp-endpoint",
        f"http://127.0.0.1:{otlp.port}",
        "--capture-content",
        "--log-format",
        "json",
        "--log-level",
        "DEBUG",
        env={"OTEL_BSP_SCHEDULE_DELAY": "100"},
    )
    yield sc
    stop(sc.proc)


def call(sc: Sidecar, host: str, path: str, body: dict[str, object], headers: dict[str, str]) -> str:
    sid = session_id()
    request(host, 443, path, body, {**headers, "x-llmtap-session": sid}, sc.bundle, proxy=("127.0.0.1", sc.listen))
    return sid


def needles() -> list[bytes]:
    out = []
    for value in SHAPES.values():
        out += [value.encode(), value[4:20].encode()]
    return out


def test_planted_secrets_of_every_shape_are_found_nowhere(vault: Sidecar, otlp: OtlpReceiver) -> None:
    sigv4 = (
        f"AWS4-HMAC-SHA256 Credential={SHAPES['sigv4 credential']}/20261201/us-east-1/bedrock/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={SHAPES['sigv4 signature']}"
    )
    sids = [
        call(
            vault,
            "bedrock-runtime.us-east-1.amazonaws.com",
            "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse",
            {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
            {
                "authorization": sigv4,
                "x-amz-security-token": SHAPES["aws session token"],
                "x-amz-date": "20261201T000000Z",
            },
        ),
        # an upstream that echoes every shape in its error body (message, type, code) and x-request-id
        call(
            vault,
            "api.openai.com",
            "/v1/chat/completions",
            {"model": "gpt-4o", "messages": []},
            {"x-mock-scenario": "echo_error", "x-mock-echo": TEXT},
        ),
        # ... and in the answer's id, model and content
        call(
            vault,
            "api.openai.com",
            "/v1/chat/completions",
            {"model": "gpt-4o", "messages": [], "user": SHAPES["openai project"]},
            {"x-mock-scenario": "echo", "x-mock-echo": f"{SHAPES['openai project']} {SHAPES['huggingface']}"},
        ),
        # captured content: keys in JSON fields, Azure hex keys, bearer-like strings, provider prefixes
        call(
            vault,
            "api.openai.com",
            "/v1/chat/completions",
            {
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": TEXT},
                    {
                        "role": "user",
                        "content": json.dumps(
                            {
                                "api_key": SHAPES["anthropic"],
                                "password": SHAPES["json password"],
                                "client_secret": SHAPES["json client secret"],
                            }
                        ),
                    },
                ],
            },
            {"api-key": SHAPES["azure hex"]},
        ),
        # attribution headers carrying a key by mistake
        call(
            vault,
            "api.openai.com",
            "/v1/embeddings",
            {"model": "text-embedding-3-small", "input": "x"},
            {
                "x-llmtap-user": SHAPES["openai project"],
                "x-llmtap-feature": SHAPES["groq"],
                "x-llmtap-tenant": SHAPES["google"],
            },
        ),
    ]
    for sid in sids:
        assert vault.row(sid, timeout=15)
    found: list[str] = []
    for table in ("otel_traces", "llm_calls", "llm_content"):  # decoded: column files are compressed
        dump = json.dumps(vault.sql(f"SELECT * FROM {table}")).encode()
        found += [f"{table}: {n!r}" for n in needles() if n in dump]
    assert vault.sql("SELECT count() AS n FROM llm_content")[0]["n"] >= 1  # content was captured, redacted
    _, metrics = vault.admin_request("GET", "/metrics")
    found += [f"/metrics: {n!r}" for n in needles() if n in metrics]
    assert stop(vault.proc) == 0  # flush everything to disk before searching it
    found += [f"OTLP: {n!r}" for body in otlp.requests for n in needles() if n in body]
    log = vault.log.read_bytes()
    assert b'"level": "debug"' in log or b"llm call" in log
    found += [f"log: {n!r}" for n in needles() if n in log]
    for path in Path(vault.data_dir).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(vault.data_dir)}: {n!r}" for n in needles() if n in data]
    assert found == []
