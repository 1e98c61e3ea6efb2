"""``attempt`` per the contract: the n-th request with the same request_hash and api_key_id within
10 minutes of a failed earlier one."""

from __future__ import annotations

from typing import Any

from llmtap.record import CallRecord
from llmtap.telemetry.retries import RETRY_WINDOW_S, RetryDetector


def call(t: float, ok: bool = True, key: str = "k1", h: str = "h" * 32, **kw: Any) -> CallRecord:
    r = CallRecord(timestamp=t, request_hash=h, api_key_id=key, duration_ms=200.0, **kw)
    if not ok:
        r.outcome, r.error_type, r.status_code = "error", "quota_exhausted", 429
    return r


def run(d: RetryDetector, *calls: CallRecord) -> list[int]:
    for c in calls:
        d.enrich(c)
    return [c.attempt for c in calls]


def test_two_failures_then_a_success_are_attempts_1_2_3() -> None:
    calls = [call(100, False), call(101, False), call(103)]
    assert run(RetryDetector(), *calls) == [1, 2, 3]
    assert [c.retried_error_type for c in calls] == ["", "quota_exhausted", "quota_exhausted"]


def test_a_success_ends_the_chain_and_successes_are_never_retried() -> None:
    assert run(RetryDetector(), call(100), call(101), call(102, False), call(103), call(104)) == [1, 1, 1, 2, 1]


def test_another_key_another_body_or_past_the_window_is_a_first_attempt() -> None:
    d = RetryDetector()
    assert run(d, call(100, False), call(101, key="k2"), call(102, h="x" * 32)) == [1, 1, 1]
    assert run(d, call(100 + RETRY_WINDOW_S + 5)) == [1]


def test_identical_requests_in_flight_together_are_not_retries_of_each_other() -> None:
    first = call(100, False)
    first.duration_ms = 10_000  # failed at t = 110
    assert run(RetryDetector(), first, call(104)) == [1, 1]  # sent while the first was still running


def test_memory_is_bounded() -> None:
    d = RetryDetector(max_chains=50)
    for i in range(500):
        d.enrich(call(100 + i * 0.01, False, h=f"{i:032d}"))
    assert len(d) == 50
