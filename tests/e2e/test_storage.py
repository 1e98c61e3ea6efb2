"""Production storage: the ClickHouse server route, the durable spool, crash safety, the collector route.

No ClickHouse server can be installed here, so the server tests run against llmtap.testing.chhttp
(ClickHouse's HTTP interface over chDB, in its own process). Set LLMTAP_TEST_CLICKHOUSE_URL
(clickhouse://user:pass@host:8123/db) to run the same tests against a real server; the
outage part then needs a server the test cannot stop and is skipped.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from helpers import (
    ClickHouseHTTP,
    Mock,
    OtlpReceiver,
    Sidecar,
    free_port,
    openai_client,
    session_id,
    start_sidecar,
    stop,
)

from llmtap.store import SCHEMA_VERSION
from llmtap.telemetry.semconv import es6_number

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REAL_CH = os.environ.get("LLMTAP_TEST_CLICKHOUSE_URL", "")


def make_client(sc: Sidecar) -> openai.OpenAI:
    return openai_client(sc, "sk-storage")  # type: ignore[no-any-return]


def one_call(c: openai.OpenAI, tag: str, i: int) -> float:
    t0 = time.perf_counter()
    if i % 2:
        list(
            c.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": f"{i}"}],
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={"x-llmtap-feature": tag, "x-mock-delay-ms": "1"},
            )
        )
    else:
        c.embeddings.create(model="text-embedding-3-small", input=f"{i}", extra_headers={"x-llmtap-feature": tag})
    return time.perf_counter() - t0


def ch_count(client: Any, where: str) -> int:
    return int(client.command(f"SELECT count() FROM llmtap.llm_calls WHERE {where}"))


def wait_count(client_factory: Any, where: str, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        try:
            got = ch_count(client_factory(), where)
            if got >= n:
                return got
        except Exception:
            pass
        time.sleep(0.25)
    return got


@pytest.fixture
def chhttp(tmp_path: Path) -> Iterator[ClickHouseHTTP]:
    ch = ClickHouseHTTP(tmp_path / "ch", free_port()).start()
    yield ch
    ch.stop()


@pytest.mark.skipif(bool(REAL_CH), reason="needs a ClickHouse endpoint the test can stop")
def test_clickhouse_store_survives_a_10s_outage(mock: Mock, chhttp: ClickHouseHTTP, tmp_path: Path) -> None:
    sc = start_sidecar(tmp_path / "data", mock, "--store", chhttp.url, "--workers", "3")
    try:
        c = make_client(sc)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            before = list(pool.map(lambda i: one_call(c, "phase1", i), range(200)))
        assert wait_count(chhttp.client, "feature = 'phase1'", 200, 30) == 200

        during: list[float] = []
        outage_started = outage_ended = 0.0

        def traffic() -> None:
            for i in range(200):
                during.append(one_call(c, "phase2", i))
                time.sleep(0.06)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(traffic)
            while len(during) < 40:
                time.sleep(0.01)
            outage_started = time.monotonic()
            chhttp.stop()
            n_before_outage = len(during)
            time.sleep(10)
            _, body = sc.admin_request("GET", "/healthz")
            health = json.loads(body)
            chhttp.start()
            outage_ended = time.monotonic()
            n_after_outage = len(during)
            fut.result()
        assert health["store_ok"] is False and health["store_queue"] > 0  # it noticed, and kept the records
        assert outage_ended - outage_started >= 10
        in_outage = during[n_before_outage:n_after_outage]
        assert len(in_outage) >= 50  # traffic kept flowing while the store was away
        # never slowed: calls during the outage are as fast as before it (generous bound, shared CPU)
        assert statistics.median(in_outage) <= 3 * statistics.median(before) + 0.02
        assert wait_count(chhttp.client, "feature = 'phase2'", 200, 60) == 200
        assert ch_count(chhttp.client(), "1") == 400
        assert int(chhttp.client().command("SELECT uniqExact(span_id) FROM llmtap.llm_calls")) == 400
        schema = chhttp.client().command("SELECT max(version) FROM llmtap.llmtap_schema")
        assert int(schema) == SCHEMA_VERSION
    finally:
        stop(sc.proc)


@pytest.mark.skipif(not REAL_CH, reason="set LLMTAP_TEST_CLICKHOUSE_URL to run against a real ClickHouse server")
def test_real_clickhouse_server(mock: Mock, tmp_path: Path) -> None:
    import clickhouse_connect

    from llmtap.store.clickhouse import parse_url

    cfg = parse_url(REAL_CH)
    sc = start_sidecar(tmp_path / "data", mock, "--store", REAL_CH)
    tag = session_id()
    try:
        c = make_client(sc)
        for i in range(20):
            one_call(c, tag, i)

        def client() -> Any:
            return clickhouse_connect.get_client(
                host=cfg["host"],
                port=cfg["port"],
                username=cfg["username"],
                password=cfg["password"],
                secure=cfg["secure"],
            )

        assert wait_count(client, f"feature = '{tag}'", 20, 30) == 20
    finally:
        stop(sc.proc)


def test_sigkill_loses_nothing_completed(mock: Mock, tmp_path: Path) -> None:
    data = tmp_path / "data"
    sc = start_sidecar(data, mock, "--workers", "3")
    c = make_client(sc)
    for i in range(50):
        one_call(c, "killed", i)
    time.sleep(1.0)  # the promise: nothing completed more than 1 s before the kill is lost
    sc.proc.send_signal(signal.SIGKILL)
    sc.proc.wait(10)
    sc2 = start_sidecar(data, mock)
    try:
        deadline = time.monotonic() + 15
        rows: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            rows = sc2.sql("SELECT count() AS n, uniqExact(span_id) AS u FROM llm_calls WHERE feature = 'killed'")
            if rows[0]["n"] >= 50:
                break
            time.sleep(0.2)
        assert rows[0] == {"n": 50, "u": 50}
    finally:
        stop(sc2.proc)


# -- the collector route ---------------------------------------------------------------------------


def any_value_as_string(v: Any) -> str:
    """pcommon Value.AsString, which the exporter's attributesToMap applies to every attribute."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return str(v.string_value)
    if kind == "bool_value":
        return "true" if v.bool_value else "false"
    if kind == "int_value":
        return str(v.int_value)
    if kind == "double_value":
        return es6_number(v.double_value)
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    if kind == "array_value":
        return json.dumps([raw(x) for x in v.array_value.values], separators=(",", ":"))
    if kind == "kvlist_value":
        return json.dumps({kv.key: raw(kv.value) for kv in v.kvlist_value.values}, separators=(",", ":"))
    return ""


def raw(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return (
        None
        if kind is None
        else getattr(v, kind)
        if kind not in ("array_value", "kvlist_value")
        else json.loads(any_value_as_string(v))
    )


KIND = {0: "Unspecified", 1: "Internal", 2: "Server", 3: "Client", 4: "Producer", 5: "Consumer"}
STATUS = {0: "Unset", 1: "Ok", 2: "Error"}


def exporter_rows(otlp: OtlpReceiver) -> list[dict[str, Any]]:
    """otel_traces rows as the Collector's ClickHouse exporter writes them (exporter_traces.go + traces_insert.sql)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    rows = []
    for body in otlp.requests:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            res = {a.key: any_value_as_string(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    rows.append(
                        {
                            "Timestamp": f"{sp.start_time_unix_nano // 10**9}.{sp.start_time_unix_nano % 10**9:09d}",
                            "TraceId": sp.trace_id.hex(),
                            "SpanId": sp.span_id.hex(),
                            "ParentSpanId": sp.parent_span_id.hex(),
                            "TraceState": sp.trace_state,
                            "SpanName": sp.name,
                            "SpanKind": KIND[sp.kind],
                            "ServiceName": res.get("service.name", ""),
                            "ResourceAttributes": res,
                            "ScopeName": ss.scope.name,
                            "ScopeVersion": ss.scope.version,
                            "SpanAttributes": {a.key: any_value_as_string(a.value) for a in sp.attributes},
                            "Duration": sp.end_time_unix_nano - sp.start_time_unix_nano,
                            "StatusCode": STATUS[sp.status.code],
                            "StatusMessage": sp.status.message,
                        }
                    )
    return rows


def test_collector_route_gives_identical_llm_calls_rows(mock: Mock, chhttp: ClickHouseHTTP, tmp_path: Path) -> None:
    otlp = OtlpReceiver()
    sc = start_sidecar(
        tmp_path / "data",
        mock,
        "--otlp-endpoint",
        f"http://127.0.0.1:{otlp.port}",
        env={"OTEL_BSP_SCHEDULE_DELAY": "100"},
    )
    try:
        c = make_client(sc)
        tag = session_id()
        h = {
            "x-llmtap-feature": tag,
            "x-llmtap-user": "u-1",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        }
        list(
            c.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={**h, "x-mock-scenario": "cached_reasoning"},
            )
        )
        list(c.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True, extra_headers=h))
        with pytest.raises(openai.APIError):
            list(
                c.chat.completions.create(
                    model="gpt-4o", messages=[], stream=True, extra_headers={**h, "x-mock-scenario": "mid_stream_error"}
                )
            )
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(model="gpt-4o", messages=[], extra_headers={**h, "x-mock-scenario": "quota_429"})
        c.embeddings.create(model="text-embedding-3-small", input="x", extra_headers=h)
        list(c.responses.create(model="gpt-4.1", input="x", stream=True, extra_headers=h))
        ours = sc.rows(f"feature = '{tag}'", 6)
        assert len(ours) == 6
        deadline = time.monotonic() + 10
        while len(exporter_rows(otlp)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop(sc.proc)
        otlp.close()
    # Route B: what an OTel Collector with the ClickHouse exporter would write, into a fresh store.
    import clickhouse_connect

    from llmtap.store.clickhouse import ClickHouseBackend, parse_url

    backend = ClickHouseBackend(chhttp.url)  # the schema, as the collector deployment applies it
    rows = [r for r in exporter_rows(otlp) if r["SpanAttributes"].get("llmtap.feature") == tag]
    assert len(rows) == 6
    cfg = parse_url(chhttp.url)
    exporter = clickhouse_connect.get_client(
        host=cfg["host"], port=cfg["port"], username=cfg["username"], password=cfg["password"]
    )
    exporter.command(  # the exporter's own insert, not llmtap's writer
        "INSERT INTO llmtap.otel_traces FORMAT JSONEachRow", data="\n".join(json.dumps(r) for r in rows)
    )
    exporter.close()
    theirs = [
        json.loads(x)
        for x in backend.query(
            f"SELECT * FROM llmtap.llm_calls WHERE feature = '{tag}' ORDER BY timestamp"
        ).splitlines()
    ]
    backend.close()
    assert theirs == ours


def test_every_read_path_uses_the_read_only_user(mock: Mock, tmp_path: Path) -> None:
    """Every read — the admin SQL API, the viewer, ``llmtap sql`` opening the store — authenticates as the
    --read-store user, whose queries the engine runs read-only; the documented grant statements parse."""
    import subprocess

    import clickhouse_connect
    from helpers import LLMTAP

    ch = ClickHouseHTTP(tmp_path / "ch", free_port(), read_user="reader", read_password="r3ad").start()
    sc = start_sidecar(tmp_path / "data", mock, "--store", ch.url, "--read-store", ch.read_url)
    try:
        c = make_client(sc)
        one_call(c, "read-user", 0)
        assert wait_count(ch.client, "feature = 'read-user'", 1, 30) == 1
        log_start = len(ch.log())
        assert sc.sql("SELECT count() AS n FROM llm_calls WHERE feature = 'read-user'") == [{"n": 1}]
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {sc.token}"}
        status, body = sc.admin_request(
            "POST", "/api/panel", json.dumps({"uid": "llmtap-calls", "panel": 1}).encode(), headers
        )
        assert status == 200 and json.loads(body)["rows"], body
        r = subprocess.run(
            [*LLMTAP, "sql", "SELECT count() FROM llm_calls", "--admin", "", "--store", ch.url,
             "--read-store", ch.read_url],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0 and r.stdout.strip().endswith("1"), r.stderr
        reads = [(u, q) for u, q in ch.log()[log_start:] if not q.upper().startswith("INSERT")]
        assert reads and {u for u, _ in reads} == {"reader"}, [x for x in reads if x[0] != "reader"]
        reader = clickhouse_connect.get_client(
            host="127.0.0.1", port=ch.port, username="reader", password="r3ad", compress=False
        )
        with pytest.raises(Exception, match=r"(?i)readonly"):
            reader.command("INSERT INTO llmtap.llm_calls (service) VALUES ('x')")
        for stmt in (
            "CREATE USER llmtap_reader IDENTIFIED WITH sha256_password BY 'x' SETTINGS readonly = 2",
            "GRANT SELECT ON llmtap.* TO llmtap_reader",
        ):  # the statements docs/security.md gives: valid ClickHouse SQL
            assert reader.command("SELECT formatQuerySingleLine({q:String})", parameters={"q": stmt})
    finally:
        stop(sc.proc)
        ch.stop()
