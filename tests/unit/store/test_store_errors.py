"""A store error is one line of llmtap's (issue 28): the connection's cause or the server's own message, never the
HTTP library's exception text (as clickhouse-connect raises them, copied from real failures)."""

from __future__ import annotations

import pytest

from llmtap.store.clickhouse import failure_text
from llmtap.store.url import StoreURLError, check_store_url

REFUSED = (
    "Error HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded with url: /?query_id=7579 (Caused by "
    "NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=1): Failed to establish a new connection: [Errno 111] "
    'Connection refused"))'
)
NO_HOST = (
    "Error HTTPConnectionPool(host='nohost.invalid', port=8123): Max retries exceeded with url: / (Caused by "
    "NameResolutionError(\"<urllib3.connection.HTTPConnection object at 0x7f>: Failed to resolve 'nohost.invalid' "
    '([Errno -2] Name or service not known)"))'
)
AUTH = (
    "Received ClickHouse exception, code: 516, server response: Code: 516. DB::Exception: llmtap: Authentication "
    "failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED) (version 24.8.4.13 "
    "(official build))"
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (REFUSED, "cannot connect: Connection refused"),
        (NO_HOST, "cannot connect: Name or service not known"),
        ("HTTPConnectionPool(host='h', port=8123): Read timed out. (read timeout=5)", "cannot connect: timed out"),
        (
            AUTH,
            "the server refused: llmtap: Authentication failed: password is incorrect, or there is no user with "
            "such name. (AUTHENTICATION_FAILED)",
        ),
    ],
)
def test_a_store_error_is_one_line_of_its_cause(text: str, line: str) -> None:
    assert failure_text(RuntimeError(text)) == line


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("mysql://x", "--store: unknown store URL scheme 'mysql'"),
        ("clickhouse://u:pw@h:port/db", "invalid port 'port'"),
        ("clickhouse://u:pw@h:8123/bad-db", "invalid database name"),
        ("chdb://", "chdb:// needs a path"),
    ],
)
def test_store_urls_are_checked_without_opening_anything(url: str, needle: str) -> None:
    with pytest.raises(StoreURLError, match=needle) as e:
        check_store_url(url)
    assert "pw" not in str(e.value)


def test_good_store_urls_pass_the_check() -> None:
    for url in ("none", "chdb://./d/store", "clickhouse://u:pw@h:8123/llmtap", "clickhouses://h/db"):
        check_store_url(url)
    with pytest.raises(StoreURLError, match="--read-store"):
        check_store_url("chdb://./d/store", "clickhouse://r:pw@h:8123/llmtap")
