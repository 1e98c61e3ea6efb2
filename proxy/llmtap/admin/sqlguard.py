"""Read-only SQL: one SELECT/WITH/SHOW/DESCRIBE/EXPLAIN statement, nothing else.

The check tokenizes the query (strings, quoted identifiers and comments are
skipped) so that keywords inside literals do not trip it, then refuses anything
that could write, change settings or reach files, URLs or other servers.
"""

from __future__ import annotations

import re

ALLOWED_FIRST = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS"})
FORBIDDEN_WORDS = frozenset(
    {
        "INSERT",
        "ALTER",
        "CREATE",
        "DROP",
        "TRUNCATE",
        "RENAME",
        "ATTACH",
        "DETACH",
        "OPTIMIZE",
        "GRANT",
        "REVOKE",
        "KILL",
        "SET",
        "SETTINGS",
        "INTO",
        "OUTFILE",
        "DELETE",
        "UPDATE",
        "USE",
        "BACKUP",
        "RESTORE",
        "EXCHANGE",
        "UNDROP",
        "MOVE",
    }
)
# Table functions and engines that read files, URLs, other servers or run programs.
FORBIDDEN_FUNCTIONS = frozenset(
    {
        "file",
        "url",
        "s3",
        "s3cluster",
        "gcs",
        "azureblobstorage",
        "azureblobstoragecluster",
        "hdfs",
        "hdfscluster",
        "remote",
        "remotesecure",
        "cluster",
        "clusterallreplicas",
        "mysql",
        "postgresql",
        "mongodb",
        "redis",
        "sqlite",
        "odbc",
        "jdbc",
        "executable",
        "input",
        "iceberg",
        "icebergs3",
        "deltalake",
        "hudi",
        "urlcluster",
        "filecluster",
        "python",
        "dictionary",
        "loop",
        "fuzzjson",
        "fuzzquery",
        "generaterandom",
        "merge",
        "view",
        "viewifpermitted",
        "paimon",
        "arrowflight",
        "ytsaurus",
    }
)

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<str>'(?:[^'\\]|\\.|'')*')
  | (?P<qid>"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<semi>;)
  | (?P<bad>['"`]|/\*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class ReadOnlyViolation(ValueError):
    pass


def check_read_only(sql: str) -> str:
    """Return the statement (without a trailing ``;``) or raise :class:`ReadOnlyViolation`."""
    if not sql or not sql.strip():
        raise ReadOnlyViolation("empty query")
    tokens: list[tuple[str, str]] = []
    pos = 0
    for m in _TOKEN.finditer(sql):
        if m.start() != pos:
            raise ReadOnlyViolation("unterminated string or comment")
        pos = m.end()
        kind = m.lastgroup or "other"
        if kind == "bad":
            raise ReadOnlyViolation("unterminated string, identifier or comment")
        if kind in ("ws", "comment"):
            continue
        tokens.append((kind, m.group()))
    if pos != len(sql):
        raise ReadOnlyViolation("unterminated string or comment")
    # At most one statement: a ';' is allowed only as the very last token.
    semis = [i for i, (k, _) in enumerate(tokens) if k == "semi"]
    if semis and (len(semis) > 1 or semis[0] != len(tokens) - 1):
        raise ReadOnlyViolation("only a single statement is allowed")
    if semis:
        tokens = tokens[:-1]
    if not tokens:
        raise ReadOnlyViolation("empty query")
    first = tokens[0][1].upper() if tokens[0][0] == "word" else ""
    if first not in ALLOWED_FIRST:
        raise ReadOnlyViolation(
            f"only read-only queries are allowed (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN); got {tokens[0][1]!r}"
        )
    for i, (kind, text) in enumerate(tokens):
        if kind != "word":
            continue
        up = text.upper()
        if up in FORBIDDEN_WORDS and not (first == "SHOW" and up == "CREATE" and i == 1):
            raise ReadOnlyViolation(f"{up} is not allowed in a read-only query")
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if nxt == "(" and text.lower() in FORBIDDEN_FUNCTIONS:
            raise ReadOnlyViolation(f"table function {text}() is not allowed")
    end = sql.rstrip()
    return end[:-1].rstrip() if end.endswith(";") else end
