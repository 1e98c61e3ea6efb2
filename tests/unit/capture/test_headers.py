"""Rate-limit and quota headers kept verbatim (names lower-cased), nothing else."""

from __future__ import annotations

from llmtap.capture.headers import MAX_RATELIMIT_HEADERS, ratelimit_headers


def test_every_rate_limit_family_is_kept_and_nothing_else() -> None:
    headers = [
        ("x-ratelimit-remaining-requests", "4999"),
        ("x-ratelimit-limit-tokens-usage-based", "1000000"),
        ("anthropic-ratelimit-tokens-remaining", "39000"),
        ("anthropic-ratelimit-unified-5h-utilization", "0.42"),
        ("anthropic-ratelimit-unified-status", "allowed_warning"),
        ("retry-after", "7"),
        ("retry-after-ms", "6500"),
        ("x-codex-primary-used-percent", "12.5"),
        ("x-codex-secondary-reset-after-seconds", "412000"),
        ("RateLimit-Policy", "100;w=60"),
        ("x-request-id", "req_1"),
        ("anthropic-organization-id", "org"),
        ("x-codex-turn-state", "opaque"),
        ("set-cookie", "a=b"),
    ]
    got = ratelimit_headers(headers)
    assert set(got) == {k.lower() for k, _ in headers[:10]}
    assert got["anthropic-ratelimit-unified-status"] == "allowed_warning" and got["ratelimit-policy"] == "100;w=60"
    many = [(f"x-ratelimit-n{i}", "1") for i in range(200)]
    assert len(ratelimit_headers(many)) == MAX_RATELIMIT_HEADERS
