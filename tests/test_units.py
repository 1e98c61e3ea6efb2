"""Pure pieces: error taxonomy, read-only SQL guard, token estimation (both paths, offline), the mitmproxy addon set."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load

from llmtap.admin.sqlguard import ReadOnlyViolation, check_read_only
from llmtap.capture import taxonomy as errors
from llmtap.capture.estimate import HEURISTIC, TokenEstimator, encoding_name_for, heuristic_count


@pytest.mark.parametrize(
    ("status", "code", "type_", "message", "want"),
    [
        (429, "rate_limit_exceeded", "tokens", "Rate limit reached ... try again in 174ms", "rate_limited"),
        (
            429,
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota",
            "quota_exhausted",
        ),
        (429, "", "insufficient_quota", "old style quota error", "quota_exhausted"),
        (529, "", "overloaded_error", "Overloaded", "overloaded"),
        (
            400,
            "",
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API.",
            "quota_exhausted",
        ),
        (
            400,
            "",
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "context_length_exceeded",
        ),
        (
            400,
            "context_length_exceeded",
            "invalid_request_error",
            "This model's maximum context length is",
            "context_length_exceeded",
        ),
        (400, "", "invalid_request_error", "messages: field required", "bad_request"),
        (401, "invalid_api_key", "", "Incorrect API key", "auth"),
        (403, "", "permission_error", "", "auth"),
        (404, "model_not_found", "", "", "not_found"),
        (500, "", "api_error", "Internal server error", "server_error"),
        (504, "", "timeout_error", "", "timeout"),
        (402, "", "", "Insufficient credits", "quota_exhausted"),
        (0, "", "server_error", "The server had an error", "server_error"),
        (0, "server_is_overloaded", "", "", "overloaded"),
        (0, "", "overloaded_error", "Overloaded", "overloaded"),
        (0, "rate_limit_exceeded", "", "", "rate_limited"),
        (400, "content_filter", "", "The response was filtered", "content_filter"),
    ],
)
def test_error_taxonomy(status: int, code: str, type_: str, message: str, want: str) -> None:
    assert errors.classify(status, code, type_, message) == want


@pytest.mark.parametrize(
    ("message", "want"),
    [
        ("Please try again in 11.054s. Visit", 11.054),
        ("try again in 174ms", 0.174),
        ("Rate limit exceeded. Try again in 35 seconds.", 35.0),
        ("retry after 2 minutes", 120.0),
        ("nothing", None),
    ],
)
def test_retry_after_from_message(message: str, want: float | None) -> None:
    assert errors.retry_after_from_message(message) == (pytest.approx(want) if want is not None else None)


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


def small_rank_file(tmp_path: Path) -> Path:
    """A tiny tiktoken rank file: every byte, plus a few merges."""
    ranks = [bytes([i]) for i in range(256)] + [b"th", b"he", b"the", b" the", b"ll", b"llo", b"hello"]
    path = tmp_path / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(tok).decode()} {i}\n" for i, tok in enumerate(ranks)))
    return path


def test_estimator_uses_tiktoken_encoding(tmp_path: Path) -> None:
    ranks = tiktoken.load.load_tiktoken_bpe(str(small_rank_file(tmp_path)))
    enc = tiktoken.Encoding(name="tiny", pat_str=r"\s?\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    asked: list[str] = []

    def loader(name: str) -> tiktoken.Encoding:
        asked.append(name)
        return enc

    est = TokenEstimator(loader=loader)
    n, label = est.count("hello the", "gpt-4o")
    assert (n, label) == (2, "tiktoken:o200k_base")  # "hello" + " the"
    est.count("hello", "gpt-4o")
    assert asked == ["o200k_base"]  # loaded once


def test_estimator_offline_falls_back_and_marks_it(tmp_path: Path) -> None:
    calls: list[str] = []

    def offline(name: str) -> tiktoken.Encoding:
        calls.append(name)
        raise OSError("Name or service not known")

    est = TokenEstimator(cache_dir=tmp_path / "tk", loader=offline)
    assert est.count("hello world, how are you?", "gpt-4o") == (
        heuristic_count("hello world, how are you?"),
        HEURISTIC,
    )
    est.count("again", "gpt-4o")
    assert calls == ["o200k_base"]  # the failure is remembered: no retry storm while offline
    assert (tmp_path / "tk").is_dir()


def test_estimator_never_waits_long_on_a_hanging_fetch(tmp_path: Path) -> None:
    """A fetch that hangs (dropped packets) must not stall the pipeline: heuristic now, tiktoken once loaded."""
    ranks = tiktoken.load.load_tiktoken_bpe(str(small_rank_file(tmp_path)))
    enc = tiktoken.Encoding(name="tiny", pat_str=r"\s?\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    release = threading.Event()
    asked: list[str] = []

    def hanging(name: str) -> tiktoken.Encoding:
        asked.append(name)
        release.wait(30)
        return enc

    est = TokenEstimator(loader=hanging, first_wait=0.2)
    assert est.count("hello the", "gpt-4o") == (heuristic_count("hello the"), HEURISTIC)
    assert est.count("hello the", "gpt-4o") == (heuristic_count("hello the"), HEURISTIC)
    assert asked == ["o200k_base"]  # one fetch, not one per call
    release.set()
    deadline = time.monotonic() + 10
    while est.count("hello the", "gpt-4o")[1] == HEURISTIC and time.monotonic() < deadline:
        time.sleep(0.01)
    assert est.count("hello the", "gpt-4o") == (2, "tiktoken:o200k_base")
    assert est.count("hello the", "gpt-4-turbo")[1] == "tiktoken:cl100k_base"  # loaded only when first needed
    assert asked == ["o200k_base", "cl100k_base"]


def test_real_tiktoken_loader_offline_does_not_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tiktoken.load, "read_file", lambda path: (_ for _ in ()).throw(OSError("no network")))
    n, label = TokenEstimator().count("four words right here", "gpt-4o")
    assert label == HEURISTIC and n == heuristic_count("four words right here")


def test_encoding_choice() -> None:
    assert encoding_name_for("gpt-4o-mini") == "o200k_base"
    assert encoding_name_for("gpt-4-turbo") == "cl100k_base"
    assert encoding_name_for("claude-sonnet-4-5") == "o200k_base"


def test_mitmproxy_addons_init_only_builds_the_default_list() -> None:
    """llmtap imports mitmproxy's addon modules without running ``mitmproxy/addons/__init__.py``
    (see llmtap.mitm): safe only while that file does nothing but import them and define
    ``default_addons()``. A mitmproxy release that changes this must fail here, not in production."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("mitmproxy.addons")
    assert spec is not None and spec.origin
    tree = ast.parse(Path(spec.origin).read_text())
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"ImportFrom", "Import", "FunctionDef"}, kinds
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["default_addons"]


def test_sidecar_addons_leave_unused_mitmproxy_features_unimported() -> None:
    code = """
import sys
from llmtap.intercept.mitm import proxy_addons
names = [type(a).__name__ for a in proxy_addons(False)]  # before mitmproxy.master, as the sidecar does
from mitmproxy.master import Master
assert not {"flask", "ldap3", "jinja2"} & set(sys.modules), sorted({"flask", "ldap3", "jinja2"} & set(sys.modules))
assert "ProxyAuth" not in names, names
assert "ProxyAuth" in [type(a).__name__ for a in proxy_addons(True)]
print(",".join(names))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Core,Block,DisableH2C,Proxyserver,NextLayer,TlsConfig,ErrorCheck"]
