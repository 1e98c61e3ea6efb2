"""Fail open, lose nothing, leak nothing: garbage streams, a crashing adapter, load, cancels, exposure."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from helpers import Mock, Sidecar, openai_client, session_id, start_sidecar, stop
from prometheus_client.parser import text_string_to_metric_families

from llmtap.testing.mock import GARBAGE
from llmtap.testing.rawclient import ProxyRefused, request, tls_socket

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
CHAT = "/v1/chat/completions"


def health(sc: Sidecar) -> dict[str, object]:
    status, body = sc.admin_request("GET", "/healthz")
    assert status == 200
    return dict(json.loads(body))


def metric_sum(sc: Sidecar, name: str, **labels: str) -> float:
    _, body = sc.admin_request("GET", "/metrics")
    return sum(
        s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@pytest.mark.parametrize("scenario", [*sorted(GARBAGE), "garbage_json_body"])
def test_garbage_passes_through_byte_identical(sidecar: Sidecar, mock: Mock, scenario: str) -> None:
    body = {"model": "gpt-4o", "stream": True, "messages": []}
    headers = {"x-mock-scenario": scenario}
    direct = request("api.openai.com", mock.port, CHAT, body, headers, mock.ca, connect_host="127.0.0.1")
    sid = session_id()
    via = request(
        "api.openai.com",
        443,
        CHAT,
        body,
        {**headers, "x-llmtap-session": sid},
        sidecar.bundle,
        proxy=("127.0.0.1", sidecar.listen),
    )
    assert via.status == direct.status == 200 and via.body == direct.body
    row = sidecar.row(sid)
    assert row["status_code"] == 200 and row["response_bytes"] == len(direct.body)
    assert health(sidecar)["status"] == "ok"


def test_two_mb_line_is_dropped_by_the_decoder_not_buffered(sidecar: Sidecar) -> None:
    sid = session_id()
    request(
        "api.openai.com",
        443,
        CHAT,
        {"model": "gpt-4o", "stream": True, "messages": []},
        {"x-mock-scenario": "garbage_2mb_line", "x-llmtap-session": sid},
        sidecar.bundle,
        proxy=("127.0.0.1", sidecar.listen),
    )
    row = sidecar.row(sid)
    # the events around the oversized line are still seen: the first content chunk and [DONE]
    assert row["content_events"] == 1 and row["outcome"] == "ok"


@pytest.fixture(scope="module")
def faulty(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = start_sidecar(tmp_path_factory.mktemp("faulty") / "data", mock, env={"LLMTAP_FAULT_INJECT": "adapter,sink"})
    yield sc
    stop(sc.proc)


def test_crashing_adapter_and_sink_fail_open(faulty: Sidecar, mock: Mock) -> None:
    body = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "messages": []}
    direct = request("api.openai.com", mock.port, CHAT, body, {}, mock.ca, connect_host="127.0.0.1")
    sids = [session_id() for _ in range(3)]
    via = request(
        "api.openai.com",
        443,
        CHAT,
        body,
        {"x-llmtap-session": sids[0]},
        faulty.bundle,
        proxy=("127.0.0.1", faulty.listen),
    )
    assert via.body == direct.body  # every event reached the client despite the adapter raising on each
    c = openai_client(faulty)
    text = "".join(
        ch.choices[0].delta.content or ""
        for ch in c.chat.completions.create(
            model="gpt-4o", messages=[], stream=True, extra_headers={"x-llmtap-session": sids[1]}
        )
        if ch.choices
    )
    assert text.startswith("The quick brown fox")
    assert (
        c.embeddings.create(
            model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sids[2]}
        ).usage.prompt_tokens
        == 8
    )
    for i, sid in enumerate(sids):  # still recorded, from what the transport saw
        row = faulty.row(sid)
        assert row["status_code"] == 200 and row["response_bytes"] > 0
        # The SDK closes right after [DONE]; with the parser broken, whether that came before the end of the
        # body is a race llmtap cannot see, so that one call may read as cancelled. The others read fully.
        assert row["outcome"] == "ok" if i != 1 else row["outcome"] in ("ok", "cancelled")
    assert metric_sum(faulty, "llmtap_parse_errors_total") >= 3
    assert metric_sum(faulty, "llmtap_records_dropped_total", reason="sink_error") >= 3
    parse_errors = faulty.sql(
        "SELECT count() AS n FROM otel_traces WHERE SpanAttributes['llmtap.parse_error'] "
        "LIKE '%injected adapter fault%'"
    )
    assert parse_errors[0]["n"] >= 3
    assert health(faulty)["status"] == "ok"


def test_200_concurrent_streams(sidecar: Sidecar, mock: Mock) -> None:
    body = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "messages": []}
    hdrs = {"x-mock-delay-ms": "30"}
    want = request("api.openai.com", mock.port, CHAT, body, hdrs, mock.ca, connect_host="127.0.0.1").body
    tag = session_id()

    def one(i: int) -> bytes:
        return request(
            "api.openai.com",
            443,
            CHAT,
            body,
            {**hdrs, "x-llmtap-feature": tag},
            sidecar.bundle,
            proxy=("127.0.0.1", sidecar.listen),
        ).body

    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        bodies = list(pool.map(one, range(200)))
    assert all(b == want for b in bodies)
    rows = sidecar.rows(f"feature = '{tag}'", 200, timeout=20)
    assert len(rows) == 200 and len({r["span_id"] for r in rows}) == 200
    assert all(r["outcome"] == "ok" and r["content_events"] == 8 and r["input_tokens"] == 31 for r in rows)
    assert sidecar.sql(
        f"SELECT max(duration_ms) - min(duration_ms) < 20000 AS ok FROM llm_calls WHERE feature = '{tag}'"
    )[0]["ok"] in (1, True)


def test_cancels_and_resets_leave_nothing_behind(sidecar: Sidecar) -> None:
    c = openai_client(sidecar)
    deadline = time.monotonic() + 10
    while health(sidecar)["inflight_calls"] != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    baseline = health(sidecar)["event_loop_tasks"]
    assert isinstance(baseline, int)
    tag = session_id()
    for _ in range(10):
        s = c.chat.completions.create(
            model="gpt-4o", messages=[], stream=True, extra_headers={"x-mock-scenario": "slow", "x-llmtap-feature": tag}
        )
        next(iter(s))
        s.close()
        with pytest.raises(openai.APIError):
            list(
                c.chat.completions.create(
                    model="gpt-4o",
                    messages=[],
                    stream=True,
                    extra_headers={"x-mock-scenario": "disconnect", "x-llmtap-feature": tag},
                )
            )
    c.close()
    rows = sidecar.rows(f"feature = '{tag}'", 20)
    assert sorted(r["outcome"] for r in rows) == ["cancelled"] * 10 + ["error"] * 10
    assert {r["error_type"] for r in rows if r["outcome"] == "error"} == {"upstream_disconnected"}
    deadline = time.monotonic() + 15
    h = health(sidecar)
    while time.monotonic() < deadline:
        h = health(sidecar)
        if h["inflight_calls"] == 0 and isinstance(h["event_loop_tasks"], int) and h["event_loop_tasks"] <= baseline:
            break
        time.sleep(0.2)
    assert h["inflight_calls"] == 0
    assert h["event_loop_tasks"] <= baseline, f"tasks grew from {baseline} to {h['event_loop_tasks']}"


def test_proxy_auth(mock: Mock, tmp_path: Path) -> None:
    sc = start_sidecar(tmp_path / "data", mock, "--proxy-auth", "alice:wonder")
    try:
        with pytest.raises(ProxyRefused) as ei:
            tls_socket("api.openai.com", 443, sc.bundle, ("127.0.0.1", sc.listen))
        assert ei.value.status == 407
        with pytest.raises(ProxyRefused):
            tls_socket("api.openai.com", 443, sc.bundle, ("127.0.0.1", sc.listen), proxy_auth="alice:wrong")
        ok = request(
            "api.openai.com",
            443,
            "/v1/embeddings",
            {"model": "text-embedding-3-small", "input": "x"},
            {},
            sc.bundle,
            proxy=("127.0.0.1", sc.listen),
            proxy_auth="alice:wonder",
        )
        assert ok.status == 200
    finally:
        stop(sc.proc)


def test_admin_token(mock: Mock, tmp_path: Path) -> None:
    sc = start_sidecar(tmp_path / "data", mock, "--admin-token", "t0ken")
    try:
        assert sc.admin_request("GET", "/healthz")[0] == 200  # for orchestrators' probes
        assert sc.admin_request("GET", "/metrics")[0] == 401
        query = json.dumps({"query": "SELECT 1 AS one"}).encode()
        as_json = {"Content-Type": "application/json"}
        assert sc.admin_request("POST", "/api/sql", query, as_json)[0] == 401
        assert sc.admin_request("POST", "/api/sql", query, {**as_json, "Authorization": "Bearer t0ke"})[0] == 401
        assert sc.admin_request("GET", "/")[0] == 200  # the viewer's page itself: it asks for the token
        assert not (tmp_path / "data" / "admin-token").exists()  # an explicit token is not written anywhere
        auth = {"Authorization": "Bearer t0ken"}
        assert sc.admin_request("GET", "/metrics", headers=auth)[0] == 200
        assert sc.admin_request("POST", "/api/sql", query, {**as_json, **auth}) == (200, b'{"one":1}\n')
    finally:
        stop(sc.proc)


def test_long_silence_budget() -> None:
    from llmtap.intercept.mitm import TCP_TIMEOUT_S

    assert TCP_TIMEOUT_S >= 30 * 60  # a reasoning model silent for 30 minutes keeps its stream
