"""The guard remembers its verdicts (:mod:`llmtap.admin.sqlverdicts`): a text checked once is not parsed again,
a refusal stays the same refusal, a store that did not answer is asked again, and the memory stays bounded.

The parser here is a stand-in that answers hand-written syntax trees and counts its calls: what is under test is
what the guard asks it, not the engine's grammar (``test_sqlguard.py`` and ``test_sqlguard_grammar.py``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from llmtap.admin.sqlfunctions import Functions, load
from llmtap.admin.sqlguard import Checked, Guard, QueryRefused
from llmtap.admin.sqlverdicts import Refusal, VerdictCache


def _select(*items: dict[str, Any]) -> dict[str, Any]:
    select = {"type": "SelectQuery", "select": {"type": "ExpressionList", "children": list(items)}}
    return {"type": "SelectWithUnionQuery", "list_of_selects": {"type": "ExpressionList", "children": [select]}}


def _call(name: str) -> dict[str, Any]:
    return {"type": "Function", "name": name, "arguments": {"type": "ExpressionList", "children": []}}


TREES: dict[str, dict[str, Any]] = {
    "SELECT 1": _select({"type": "Literal", "value": 1}),
    "SELECT {n:UInt8}": _select({"type": "QueryParameter", "name": "n", "param_type": "UInt8"}),
    "SELECT file()": _select(_call("file")),
    "SELECT * APPLY(file)": _select(
        {
            "type": "Asterisk",
            "transformers": {
                "type": "ColumnsTransformerList",
                "children": [{"type": "ColumnsApplyTransformer", "func_name": "file"}],
            },
        }
    ),
}


class CountingParser:
    """Canonical text = the text itself; trees from :data:`TREES`; ``away`` calls fail as a store that is down."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.away = 0

    def canonical(self, sql: str) -> str:
        self.calls.append(("canonical", sql))
        if self.away:
            self.away -= 1
            raise ConnectionRefusedError("the store is down")
        if sql not in TREES:
            raise RuntimeError(f"Syntax error: {sql}")
        return sql

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        self.calls.append(("syntax_tree", sql))
        return TREES[sql]

    def engine_names(self) -> frozenset[str]:
        return frozenset()


def test_a_text_checked_once_is_not_parsed_again() -> None:
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    first = guard.check("SELECT {n:UInt8}")
    assert first == Checked("SELECT {n:UInt8}", "select", frozenset({"n"}))
    assert [c for c, _ in parser.calls] == ["canonical", "syntax_tree"]
    parser.calls.clear()
    assert guard.check("SELECT {n:UInt8}") == first
    assert parser.calls == []
    guard.check("SELECT 1")  # another text is another verdict
    assert [c for c, _ in parser.calls] == ["canonical", "syntax_tree"]


@pytest.mark.parametrize("sql", ["SELECT file()", "SELECT * APPLY(file)"])
def test_a_refused_text_stays_refused_with_the_same_message(sql: str) -> None:
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    with pytest.raises(QueryRefused) as first:
        guard.check(sql)
    parser.calls.clear()
    with pytest.raises(QueryRefused) as again:
        guard.check(sql)
    assert parser.calls == []
    assert type(again.value) is type(first.value) and str(again.value) == str(first.value)
    assert "file" in str(again.value) and "not allowed" in str(again.value)
    assert again.value is not first.value  # a fresh error: raised in two threads, no traceback is shared


def test_a_store_that_did_not_answer_is_asked_again() -> None:
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    parser.away = 1
    with pytest.raises(ConnectionRefusedError):
        guard.check("SELECT 1")
    parser.calls.clear()
    assert guard.check("SELECT 1").text == "SELECT 1"  # not a remembered failure: the parser was asked
    assert [c for c, _ in parser.calls] == ["canonical", "syntax_tree"]


def test_a_text_that_does_not_parse_is_asked_again() -> None:
    """The store's parser fails alike when the text does not parse and when its answer was lost: not a verdict."""
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    for _ in range(2):
        with pytest.raises(QueryRefused, match="not a single valid statement"):
            guard.check("SELEC 1")
    assert parser.calls == [("canonical", "SELEC 1")] * 2


def test_the_cache_stays_within_its_bounds() -> None:
    cache: VerdictCache[Refusal] = VerdictCache(max_entries=8, max_chars=400, max_text=100)
    for i in range(50):
        cache.put(f"SELECT {i}", Refusal("x" * 10), 10)
        assert len(cache) <= 8 and cache.chars <= 400
    assert cache.get("SELECT 49") == Refusal("x" * 10) and cache.get("SELECT 0") is None  # the oldest went first
    cache.put("SELECT 42" + " " * 200, Refusal("long"), 4)  # longer than max_text: not kept
    assert cache.get("SELECT 42" + " " * 200) is None
    for i in range(8):
        cache.put(f"SELECT {i:040d}", Refusal("y" * 20), 20)  # 67 characters each: the characters bound holds
        assert cache.chars <= 400
    assert len(cache) == 400 // 67 and cache.chars == sum(len(f"SELECT {i:040d}") + 20 for i in range(3, 8))


def test_the_least_recently_used_goes_first() -> None:
    cache: VerdictCache[Refusal] = VerdictCache(max_entries=2)
    cache.put("a", Refusal("a"), 1)
    cache.put("b", Refusal("b"), 1)
    assert cache.get("a") == Refusal("a")  # a is now the most recent
    cache.put("c", Refusal("c"), 1)
    assert cache.get("b") is None and cache.get("a") == Refusal("a") and cache.get("c") == Refusal("c")
    cache.put("a", Refusal("a2"), 2)  # replaced, counted once
    assert len(cache) == 2 and cache.chars == len("a") + 2 + len("c") + 1


def test_a_guard_s_cache_is_bounded() -> None:
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    cache = guard._verdicts
    for i in range(cache.max_entries + 10):
        TREES.setdefault(f"SELECT 1 -- {i}", TREES["SELECT 1"])
        guard.check(f"SELECT 1 -- {i}")
    assert len(cache) == cache.max_entries and cache.chars <= cache.max_chars


def test_threads_share_the_cache() -> None:
    parser = CountingParser()
    guard = Guard(parser, "llmtap")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(200):
                assert guard.check("SELECT 1").text == "SELECT 1"
                with pytest.raises(QueryRefused):
                    guard.check("SELECT file()")
        except BaseException as e:  # reported below, from the test's own thread
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(parser.calls) <= 2 * 2 * 4  # each text parsed at most once per thread that raced to it first


def test_per_name_decisions_are_remembered_and_equal() -> None:
    """The memoized decisions of :class:`Functions` answer as the undecorated ones do, and stay bounded."""
    fns = load()
    fresh = Functions(
        fns.engine, fns.allowed, fns.allowed_ci, fns.denied, fns.aggregates, fns.combinators, fns.denied_aggregates
    )
    words = ["file", "FILE", "lower", "sumIf", "stochasticLinearRegressionIfArray", "feature", "user", "currentUser"]
    for w in words * 2:
        assert fresh.refusal(w) == fresh._refusal(w, frozenset())
        assert fresh.denied_aggregate(w) == fresh._denied_aggregate(w)
        assert fresh.is_allowed(w) == fresh._is_allowed(w)
    assert fresh.refusal("readsecretfile", frozenset({"readsecretfile"})) is not None  # the engine's names count
    assert fresh.refusal("readsecretfile") is None
    assert fresh == fns and repr(fresh) == repr(fns)  # the memo is no field: equality and repr are the data's
