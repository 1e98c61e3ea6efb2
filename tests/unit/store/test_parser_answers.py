"""The guard's parser takes its answer only from the line that carries its own nonce: output another query left
on the engine's session (chDB hands it to the next query: ``test_stale_output.py``) is never read as the answer."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from llmtap.store.readonly import CANONICAL_SQL, NAMES_SQL, TREE_SQL, EngineParser

FUNCTIONS = ("count", "sum", "quantile")


class Engine:
    """Answers the parser's queries as the engine does, after ``stale`` (what a failed query had written)."""

    def __init__(self, stale: list[bytes]) -> None:
        self.stale, self.calls = stale, 0

    def run(self, sql: str, params: Mapping[str, str]) -> bytes:
        self.calls += 1
        before = self.stale.pop(0) if self.stale else b""
        if sql == NAMES_SQL:
            rows = [{"n": params["n"], "f": f} for f in FUNCTIONS]
            return before + b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)
        if sql == CANONICAL_SQL:
            answer = {"n": params["n"], "t": " ".join(params["q"].split())}
        else:
            assert sql == TREE_SQL
            answer = {"n": params["n"], "j": json.dumps({"type": "SelectQuery", "q": params["q"]})}
        return before + json.dumps(answer, separators=(",", ":")).encode() + b"\n"  # as JSONEachRow writes


def test_another_querys_rows_before_the_answer_are_passed_over() -> None:
    stale = b'{"t":"SELECT secret FROM elsewhere"}\n{"one":1}\n{"'  # rows of another query, the last one cut
    engine = Engine([stale, stale])
    parser = EngineParser(engine.run)
    assert parser.canonical("SELECT  1") == "SELECT 1"
    assert parser.syntax_tree("SELECT 2") == {"type": "SelectQuery", "q": "SELECT 2"}
    assert engine.calls == 2  # found in the first answer: no second ask


def test_an_answer_without_the_nonce_is_asked_once_more() -> None:
    class Lagging(Engine):
        def run(self, sql: str, params: Mapping[str, str]) -> bytes:
            out = super().run(sql, params)
            return b'{"n":"0000","t":"SELECT stale"}\n' if self.calls == 1 else out

    engine = Lagging([])
    assert EngineParser(engine.run).canonical("SELECT 3") == "SELECT 3"
    assert engine.calls == 2


def test_no_answer_of_its_own_is_no_statement() -> None:
    parser = EngineParser(lambda sql, params: b'{"n":"x","t":"SELECT 1"}\n')
    try:
        parser.canonical("SELECT 1")
    except ValueError as e:
        assert "no statement" in str(e)
    else:
        raise AssertionError("an answer of another query was taken")


def test_the_engines_function_list_is_only_its_own_rows() -> None:
    """Another query's rows before the list (the last cut, glued to the first row) are no function names."""
    stale = b'{"n":"readsecretfile"}\n{"f":"file"}\n{"n":"'
    engine = Engine([stale])
    assert EngineParser(engine.run).engine_names() == frozenset(FUNCTIONS)
    assert engine.calls == 1


def test_a_function_list_without_the_nonce_is_asked_once_more_then_refused() -> None:
    class Lagging(Engine):
        def run(self, sql: str, params: Mapping[str, str]) -> bytes:
            out = super().run(sql, params)
            return b'{"n":"0000","f":"file"}\n' if self.calls == 1 else out

    engine = Lagging([])
    assert EngineParser(engine.run).engine_names() == frozenset(FUNCTIONS)
    assert engine.calls == 2
    with pytest.raises(ValueError, match="listed no functions"):
        EngineParser(lambda sql, params: b'{"n":"x","f":"file"}\n').engine_names()


def test_an_engine_process_that_stopped_is_no_verdict_on_the_query() -> None:
    """The engine going away mid-parse is the store being away (a 503 "store unreachable" to the viewer), never
    "not a single valid statement" (the 400 of stop 35's layout failure)."""
    from llmtap.admin.sqlguard import Guard, QueryRefused
    from llmtap.store.engine import EngineGone

    def gone(sql: str, params: Mapping[str, str]) -> bytes:
        raise EngineGone("the engine process stopped")

    with pytest.raises(EngineGone) as caught:
        Guard(EngineParser(gone), "llmtap").check("SELECT 1")
    assert not isinstance(caught.value, QueryRefused)
