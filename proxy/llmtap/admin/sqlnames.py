"""Every name a query's syntax tree carries, found without knowing its node types.

The engine's ``parseQueryToJSON`` writes a tree of *nodes* (objects with a ``"type"``) whose fields
hold nodes, lists, numbers, booleans, strings and *values* (objects without a ``"type"``: what a
literal holds). This module walks all of it, generically:

- a string held by a node — in any field, under any node type: ``Function.name``, the
  ``func_name`` of an ``APPLY`` transformer, an identifier, a lambda argument, a ``COLUMNS``
  pattern, a type, or a field a later engine version adds — is a **name**: the engine may resolve
  it to something it calls. Identifiers are names too: the engine resolves one that is not a
  column in scope to a function (``SELECT user`` calls ``currentUser()``, ``arrayMap(file, …)``
  reads files). The one exception is an ``alias``: it defines a name, it never calls one;
- a string inside a value (or a bound parameter's value) is **data**; the only callables data can
  name are aggregate functions (``arrayReduce('f', …)``, ``initializeAggregation('f', …)``, a
  ``CAST`` to ``AggregateFunction(f, …)``).

Every identifier-like word of a name that names something the engine could call must be allowed
(:meth:`~llmtap.admin.sqlfunctions.Functions.refusal`); no word of data may name a denied aggregate.
This does not replace the guard's allow-list of node types and fields (:mod:`.sqlguard`), which
refuses syntax nobody reviewed: it is the wall that holds when a reviewed field carries a function
name nobody thought of (an ``APPLY``'s name was one: it read the CA key).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import LlmtapError
from .sqlfunctions import Functions

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ITEMS = 1_000_000  # strings, numbers, nodes and values in one tree: a canonical query of 256 KiB has far fewer


class NameRefused(LlmtapError, ValueError):
    """A name or a value of the query names a function llmtap does not allow."""


def strings(tree: Any) -> Iterator[tuple[str, bool]]:
    """Every string of ``tree`` with whether it is data (inside a value), depth-first, without recursion."""
    stack: list[tuple[Any, bool]] = [(tree, False)]
    seen = 0
    while stack:
        item, data = stack.pop()
        seen += 1
        if seen > MAX_ITEMS:
            raise NameRefused("query too large to check")
        if isinstance(item, str):
            yield item, data
        elif isinstance(item, list):
            stack.extend((v, data) for v in item)
        elif isinstance(item, dict):
            node = not data and isinstance(item.get("type"), str)
            for key, value in item.items():
                if node and key in ("type", "alias"):
                    continue  # the node's own kind ("Function", ...), or the name it defines: neither calls
                if not node:
                    stack.append((key, True))  # a value's keys are data too (a map literal's)
                stack.append((value, data or not node))


def check_tree(tree: Any, functions: Functions, engine: frozenset[str] = frozenset()) -> None:
    """Raises :class:`NameRefused` for the first name or value word of ``tree`` that calls something denied."""
    for text, data in strings(tree):
        (check_data if data else check_name)(text, functions, engine)


def check_name(text: str, functions: Functions, engine: frozenset[str] = frozenset()) -> None:
    for word in WORD.findall(text):
        why = functions.refusal(word, engine)
        if why is not None:
            raise NameRefused(f"{word!r} is not allowed in a query: it names a function llmtap refuses ({why})")


def check_data(text: str, functions: Functions, _engine: frozenset[str] = frozenset()) -> None:
    for word in WORD.findall(text):
        why = functions.denied_aggregate(word)
        if why is not None:
            raise NameRefused(
                f"{word!r} is not allowed in a query: it names an aggregate function llmtap refuses ({why})"
            )


def check_values(values: Iterable[str], functions: Functions) -> None:
    """Bound parameter values: substituted as literals by the engine, so data."""
    for v in values:
        check_data(v, functions)
