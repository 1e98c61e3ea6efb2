"""The bytes: identical bodies through the proxy, no held-back events, no decryption of other hosts."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest
from helpers import Mock, Sidecar, session_id, start_sidecar, stop

from llmtap.testing.rawclient import request, tls_socket

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CASES = [
    (
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "messages": []},
        "default",
    ),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o", "stream": True, "messages": []}, "gzip"),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o", "stream": True, "messages": []}, "crlf"),
    (
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "messages": []},
        "split_utf8",
    ),
    (
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "messages": []},
        "mid_stream_error",
    ),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o", "messages": []}, "quota_429"),
    ("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "stream": True, "input": "x"}, "default"),
    ("api.openai.com", "/v1/embeddings", {"model": "text-embedding-3-small", "input": ["a", "b"]}, "default"),
    (
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 9, "messages": []},
        "default",
    ),
    (
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": []},
        "overloaded_529",
    ),
]


@pytest.mark.parametrize(
    ("host", "path", "body", "scenario"), CASES, ids=[f"{c[1].rsplit('/', 1)[-1]}-{c[3]}" for c in CASES]
)
def test_body_is_byte_identical(
    sidecar: Sidecar, mock: Mock, host: str, path: str, body: dict[str, object], scenario: str
) -> None:
    headers = {"x-mock-scenario": scenario, "anthropic-version": "2023-06-01", "x-api-key": "k"}
    direct = request(host, mock.port, path, body, headers, mock.ca, connect_host="127.0.0.1")
    sid = session_id()
    via = request(
        host,
        443,
        path,
        body,
        {**headers, "x-llmtap-session": sid},
        sidecar.bundle,
        proxy=("127.0.0.1", sidecar.listen),
    )
    assert via.status == direct.status
    assert via.headers.get("content-encoding") == direct.headers.get("content-encoding")
    assert via.body == direct.body  # compressed bytes included: nothing decoded or re-encoded
    assert len(via.body) > 0
    row = sidecar.row(sid)
    assert row["status_code"] == direct.status
    assert row["response_bytes"] == len(direct.body)


def test_no_event_is_held_back(sidecar: Sidecar) -> None:
    """Each event reaches the client before the mock sends the next one (300 ms apart)."""
    sid = session_id()
    resp = request(
        "api.openai.com",
        443,
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "messages": []},
        {"x-mock-scenario": "paced", "x-llmtap-session": sid},
        sidecar.bundle,
        proxy=("127.0.0.1", sidecar.listen),
    )
    arrivals: list[tuple[float, float]] = []  # (sent_at, received_at) per event
    for t, data in resp.chunks:
        for m in re.finditer(rb": sent_at=(\d+\.\d+)", data):
            arrivals.append((float(m.group(1)), t))
    assert len(arrivals) >= 10
    sent = [s for s, _ in arrivals]
    for i in range(len(arrivals) - 1):
        assert arrivals[i][1] < sent[i + 1], f"event {i} arrived after event {i + 1} was sent"
    assert arrivals[0][1] < sent[-1] - 2.0  # the first event long before the last was even sent
    row = sidecar.row(sid)
    assert row["ttft_ms"] < row["duration_ms"] - 2000


def test_non_llm_host_is_tunnelled_not_decrypted(mock: Mock, tmp_path: Path) -> None:
    # ollama.internal is not an LLM host unless --intercept names it: through the proxy, the client must
    # see the mock's own certificate (trusting only the mock CA works, trusting only the llmtap CA does not).
    # (--connect-to routes it to the mock on loopback, which the proxy otherwise refuses to reach.)
    sc = start_sidecar(tmp_path / "data", mock, "--connect-to", f"ollama.internal:443:127.0.0.1:{mock.port}")
    try:
        tls = tls_socket("ollama.internal", 443, mock.ca, proxy=("127.0.0.1", sc.listen))
        try:
            issuer = dict(x[0] for x in tls.getpeercert()["issuer"])
            assert issuer["commonName"] == "llmtap mock provider CA"
        finally:
            tls.close()
        llmtap_ca = sc.data_dir / "ca" / "mitmproxy-ca-cert.pem"
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_socket("ollama.internal", 443, llmtap_ca, proxy=("127.0.0.1", sc.listen)).close()
    finally:
        stop(sc.proc)


def test_llm_host_is_intercepted_with_llmtap_ca(sidecar: Sidecar) -> None:
    llmtap_ca = sidecar.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    tls = tls_socket("api.openai.com", 443, llmtap_ca, proxy=("127.0.0.1", sidecar.listen))
    try:
        issuer = dict(x[0] for x in tls.getpeercert()["issuer"])
        assert issuer["commonName"] == "llmtap interception CA"
    finally:
        tls.close()


def test_ca_key_is_private(sidecar: Sidecar) -> None:
    for name in ("mitmproxy-ca.pem", "mitmproxy-ca.p12"):
        assert (sidecar.data_dir / "ca" / name).stat().st_mode & 0o077 == 0
    assert (sidecar.data_dir / "install-secret").stat().st_mode & 0o077 == 0
