"""The read-only SQL guard."""

from __future__ import annotations

import pytest

from llmtap.admin.sqlguard import ReadOnlyViolation, check_read_only


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "select * from llm_calls where feature = 'DROP TABLE x; INSERT'",
        "WITH a AS (SELECT 1) SELECT * FROM a",
        "SHOW TABLES",
        "DESCRIBE TABLE llm_calls",
        "EXPLAIN SELECT 1",
        "SELECT 1;",
        "SHOW CREATE TABLE llm_calls",
        "SELECT count() FROM llm_calls -- ; DROP TABLE llm_calls",
    ],
)
def test_sql_guard_accepts_reads(sql: str) -> None:
    assert check_read_only(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "",
        "   ",
        "INSERT INTO llm_calls VALUES (1)",
        "DROP TABLE llm_calls",
        "SELECT 1; DROP TABLE llm_calls",
        "SELECT 1; SELECT 2",
        "ALTER TABLE llm_calls DELETE WHERE 1",
        "SET readonly = 0",
        "SELECT 1 SETTINGS readonly=0",
        "SELECT * FROM file('/etc/passwd')",
        "SELECT * FROM url('http://x')",
        "SELECT * FROM s3('x')",
        "SELECT * FROM remote('h', system.one)",
        "SELECT 1 INTO OUTFILE 'x'",
        "CREATE TABLE x (a Int8) ENGINE=Memory",
        "SELECT 'unterminated",
        "SYSTEM SHUTDOWN",
        "OPTIMIZE TABLE llm_calls",
        "SELECT * FROM executable('x', 'TSV', 'a Int8')",
    ],
)
def test_sql_guard_refuses_everything_else(sql: str) -> None:
    with pytest.raises(ReadOnlyViolation):
        check_read_only(sql)
