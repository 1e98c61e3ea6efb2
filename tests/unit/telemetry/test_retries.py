"""``attempt`` per DESIGN.md: the n-th request with the same hash and key within 10 minutes of a failed one."""

from __future__ import annotations

from llmtap.record import CallRecord
from llmtap.telemetry.retries import RetryDetector


def call(t: float, outcome: str = "ok", key: str = "k1", h: str = "h1", error_type: str = "") -> CallRecord:
    return CallRecord(timestamp=t, duration_ms=1000.0, outcome=outcome, error_type=error_type,  # type: ignore[arg-type]
                      api_key_id=key, request_hash=h)  # fmt: skip


def attempts(det: RetryDetector, calls: list[CallRecord]) -> list[int]:
    for c in calls:
        det.enrich(c)
    return [c.attempt for c in calls]


def test_chain_of_failures_then_success_then_a_new_request() -> None:
    calls = [call(0, "error", error_type="overloaded"), call(5, "error", error_type="server_error"), call(9), call(20)]
    assert attempts(RetryDetector(), calls) == [1, 2, 3, 1]
    assert [c.extra.get("retried_error_type") for c in calls] == [None, "overloaded", "server_error", None]


def test_identical_successes_are_not_retries() -> None:
    assert attempts(RetryDetector(), [call(t) for t in range(5)]) == [1, 1, 1, 1, 1]


def test_another_key_another_body_or_after_the_window_is_a_first_request() -> None:
    det = RetryDetector()
    assert attempts(det, [call(0, "error"), call(2, key="k2"), call(3, h="h2")]) == [1, 1, 1]
    # 600 s after the failed one ended (t=1) is still a retry; later is not
    assert attempts(RetryDetector(), [call(0, "error"), call(601)]) == [1, 2]
    assert attempts(RetryDetector(), [call(0, "error"), call(601.5)]) == [1, 1]
    assert attempts(RetryDetector(), [call(0, "error", h=""), call(2, h="")]) == [1, 1]  # no body: no identity


def test_a_cancelled_attempt_is_not_a_failure_and_the_state_is_bounded() -> None:
    assert attempts(RetryDetector(), [call(0, "cancelled"), call(2)]) == [1, 1]
    det = RetryDetector(max_keys=2)
    attempts(det, [call(0, "error", h="a"), call(0, "error", h="b"), call(0, "error", h="c")])
    assert attempts(det, [call(2, h="a"), call(2, h="c")]) == [1, 2]  # "a" was forgotten first
