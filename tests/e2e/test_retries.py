"""Retries on live traffic: ``attempt`` counts a request sent again after it *failed*, not identical successes.

Through a real ``llmtap run`` with the official OpenAI SDK: the mock answers 429 while the request names the
``rate_limit_429`` scenario (a header, so the body, and with it ``request_hash``, stays the same), then the same
request again is answered. The retry panels and ``llmtap_retry_attempts_total`` read ``attempt``.
"""

from __future__ import annotations

import re

import openai
import pytest
from helpers import Sidecar, session_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def send(sid: str, body_tag: str, fail: bool) -> None:
    headers = {"x-llmtap-session": sid, **({"x-mock-scenario": "rate_limit_429"} if fail else {})}
    client = openai.OpenAI(api_key="sk-retry-test-0123456789", max_retries=0)
    call = lambda: client.chat.completions.create(  # noqa: E731
        model="gpt-4o", messages=[{"role": "user", "content": f"retry test {body_tag}"}], extra_headers=headers
    )
    if fail:
        with pytest.raises(openai.RateLimitError):
            call()
    else:
        call()


def retries_counted(sc: Sidecar) -> float:
    status, body = sc.admin_request("GET", "/metrics")
    assert status == 200
    found = re.findall(rb'^llmtap_retry_attempts_total\{[^}]*error_type="rate_limited"[^}]*\} ([0-9.e+]+)$', body, re.M)
    return sum(float(v) for v in found)


def test_a_request_repeated_after_it_failed_is_a_retry_identical_successes_are_not(proxied: Sidecar) -> None:
    tag = session_id()  # a body no other test sends
    before = retries_counted(proxied)
    sids = [session_id() for _ in range(5)]
    send(sids[0], tag, fail=True)  # attempt 1: 429
    send(sids[1], tag, fail=True)  # attempt 2: 429 again
    send(sids[2], tag, fail=False)  # attempt 3: answered
    send(sids[3], tag, fail=False)  # the same request after a success: a new request, not a retry
    send(sids[4], tag, fail=False)  # and again: identical successes are not a storm
    got = []
    for sid in sids:
        row = proxied.row(sid, timeout=15)
        got.append((row["outcome"], row["error_type"], row["attempt"]))
    assert got == [
        ("error", "rate_limited", 1),
        ("error", "rate_limited", 2),
        ("ok", "", 3),
        ("ok", "", 1),
        ("ok", "", 1),
    ]
    assert retries_counted(proxied) - before == 2  # attempts 2 and 3, each repeating a rate-limited one
