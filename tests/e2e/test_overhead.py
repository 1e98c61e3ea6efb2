"""llmtap's own cost per call (``overhead_ms``, ``llmtap.overhead_ms``, ``llmtap_overhead_seconds``) on a real
`llmtap run`: near zero on a plain call to the mock, and at least the delay injected into the parser when llmtap's
own code is made slow (``LLMTAP_FAULT_INJECT=tee_delay``) — a delay the traffic never waits for, since the parse runs
in the recorder's process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import Mock, OtlpReceiver, Sidecar, openai_client, session_id, start_sidecar, stop
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

EVENTS = 10  # content events per stream (the mock adds a role chunk, a finish chunk, usage and [DONE])
TEE_DELAY_MS = 10  # injected before each event the tee hands to the adapter
INJECTED_MS = EVENTS * TEE_DELAY_MS  # at least this much per call with the delay injected


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


def _sidecar(mock: Mock, otlp: OtlpReceiver, base: pytest.TempPathFactory, name: str, **env: str) -> Sidecar:
    return start_sidecar(
        base.mktemp(name) / "data",
        mock,
        "--otlp-endpoint",
        f"http://127.0.0.1:{otlp.port}",
        env={"OTEL_BSP_SCHEDULE_DELAY": "100", **env},
    )


@pytest.fixture(scope="module")
def plain(mock: Mock, otlp: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = _sidecar(mock, otlp, tmp_path_factory, "plain")
    yield sc
    stop(sc.proc)


@pytest.fixture(scope="module")
def slow(mock: Mock, otlp: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    env = {"LLMTAP_FAULT_INJECT": "tee_delay", "LLMTAP_FAULT_TEE_DELAY_MS": str(TEE_DELAY_MS)}
    sc = _sidecar(mock, otlp, tmp_path_factory, "slow", **env)
    yield sc
    stop(sc.proc)


def streamed_calls(sc: Sidecar, n: int) -> list[str]:
    sids = [session_id() for _ in range(n)]
    for sid in sids:
        chunks = openai_client(sc).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-llmtap-session": sid, "x-mock-events": str(EVENTS), "x-mock-delay-ms": "2"},
        )
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == EVENTS
    return sids


def overhead_histogram(sc: Sidecar) -> tuple[float, float, float]:
    """(count, sum in s, calls over 50 ms) of ``llmtap_overhead_seconds{provider="openai"}``."""
    _, body = sc.admin_request("GET", "/metrics")
    got = {"count": 0.0, "sum": 0.0, "le_0.05": 0.0}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.labels.get("provider") != "openai" or not s.name.startswith("llmtap_overhead_seconds"):
                continue
            if s.name.endswith("_count"):
                got["count"] = s.value
            elif s.name.endswith("_sum"):
                got["sum"] = s.value
            elif s.name.endswith("_bucket") and s.labels.get("le") == "0.05":
                got["le_0.05"] = s.value
    return got["count"], got["sum"], got["count"] - got["le_0.05"]


def check_exported(sc: Sidecar, otlp: OtlpReceiver, rows: list[dict[str, float]], before: tuple[float, ...]) -> None:
    """Each row's figure is its span's ``llmtap.overhead_ms``, and each call was counted once in the histogram."""
    for row in rows:
        _, sp = otlp.span(str(row["span_id"]))
        got = {a.key: a.value.double_value for a in sp.attributes if a.key == "llmtap.overhead_ms"}
        assert got == {"llmtap.overhead_ms": pytest.approx(row["overhead_ms"])}
    count, total, _ = overhead_histogram(sc)
    assert count - before[0] == len(rows)
    assert total - before[1] == pytest.approx(sum(r["overhead_ms"] for r in rows) / 1000, rel=1e-6)


def test_overhead_is_near_zero_on_a_plain_call(plain: Sidecar, otlp: OtlpReceiver) -> None:
    before = overhead_histogram(plain)
    rows = [plain.row(sid) for sid in streamed_calls(plain, 5)]
    values = sorted(r["overhead_ms"] for r in rows)
    assert all(v > 0 for v in values), values  # measured, not left NULL
    # Hooks and a JSON parse per chunk take microseconds (~0.3 ms per call on an idle machine): under a tenth of
    # what the injected delay adds, even on a loaded one (the figure is the loop's wall time in llmtap's code).
    assert values[len(values) // 2] < INJECTED_MS / 10, values
    assert all(r["overhead_ms"] < r["duration_ms"] for r in rows), [(r["overhead_ms"], r["duration_ms"]) for r in rows]
    check_exported(plain, otlp, rows, before)


def test_overhead_grows_with_a_delay_injected_in_the_tee(slow: Sidecar, otlp: OtlpReceiver) -> None:
    before = overhead_histogram(slow)
    rows = [slow.row(sid) for sid in streamed_calls(slow, 3)]
    for row in rows:
        assert row["outcome"] == "ok" and row["content_events"] == EVENTS
        # every content event waited TEE_DELAY_MS in the parser (the role/finish/usage chunks too)
        assert row["overhead_ms"] >= INJECTED_MS, row["overhead_ms"]
        # ...in the recorder's process, off the traffic's path: the call ended before its parse did
        assert row["duration_ms"] < row["overhead_ms"], (row["duration_ms"], row["overhead_ms"])
    check_exported(slow, otlp, rows, before)
    assert overhead_histogram(slow)[2] - before[2] == len(rows)  # each observed over 50 ms
