"""Which functions a guarded admin query may call: the engine's own function list, classified once.

``sqlfunctions.json`` (beside this file) lists every function of the ClickHouse engine llmtap ships
(chDB's ``system.functions``, aliases included), each either allowed or denied with a reason. A
function is denied when it touches something outside the query's own data: files, URLs, other
servers or AI providers, dictionaries (which may be sourced from files, URLs or programs), the
process, its environment, settings or host, the access-control state, or when it only exists to
stall (``sleep``). Everything else (arithmetic, strings, dates, arrays, JSON, aggregates, window
functions, hashing, ...) is pure computation over the query's data and is allowed.

The guard allows only names in the allowed list, so a function that a newer engine adds is
refused until it is classified: ``python -m llmtap.admin.sqlfunctions`` regenerates the file from
the installed engine with the rules below, and ``tests/unit/admin/test_sqlguard.py`` fails while
the file and the engine disagree. Every name in the file (allowed or denied, in any case) is a name
the engine could *call* from an expression: the guard refuses it wherever it appears in a query
unless it is allowed (:meth:`Functions.refusal`). Table functions are not listed: a table position
may only name llmtap's tables (:mod:`.sqlguard`).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("sqlfunctions.json")

# Whole categories of system.functions that reach outside the query's data.
DENIED_CATEGORIES: dict[str, str] = {
    "AI": "calls an AI provider over the network",
    "Dictionary": "reads a dictionary (sourced from files, URLs, other servers or programs)",
    "Embedded Dictionary": "reads the server's embedded dictionaries (files)",
    "Introspection": "introspects the server process (symbols, threads, log)",
    "Machine Learning": "evaluates models kept outside the query",
    "Internal": "engine-internal",
    "Time Series": "reads or writes the time-series tag store",
}
# Single functions, by name (their aliases follow them).
DENIED_FUNCTIONS: dict[str, str] = {
    "file": "reads a file",
    "filesystemAvailable": "reads the host's filesystem",
    "filesystemCapacity": "reads the host's filesystem",
    "filesystemUnreserved": "reads the host's filesystem",
    "joinGet": "reads another table by name",
    "joinGetOrNull": "reads another table by name",
    "hasColumnInTable": "reads another table's metadata",
    "getMaxTableNameLengthForDatabase": "reads another database's metadata",
    "pgGetUserById": "reads the access-control state",
    "pgTableIsVisible": "reads another table's metadata",
    "getSetting": "reads the session's settings",
    "getSettingOrDefault": "reads the session's settings",
    "getServerSetting": "reads the server's configuration",
    "getMergeTreeSetting": "reads the server's configuration",
    "getMacro": "reads the server's configuration",
    "globalVariable": "reads the server's state",
    "getClientHTTPHeader": "reads the request's HTTP headers (credentials)",
    "currentRequestURL": "reads the request URL (credentials)",
    "currentHandler": "reads the server's state",
    "currentUser": "reads the access-control state",
    "authenticatedUser": "reads the access-control state",
    "currentRoles": "reads the access-control state",
    "enabledRoles": "reads the access-control state",
    "defaultRoles": "reads the access-control state",
    "currentProfiles": "reads the access-control state",
    "enabledProfiles": "reads the access-control state",
    "defaultProfiles": "reads the access-control state",
    "currentSchemas": "reads the server's catalog",
    "showCertificate": "reads the server's TLS configuration",
    "hostName": "reads the host's identity",
    "FQDN": "reads the host's identity",
    "displayName": "reads the server's configuration",
    "serverUUID": "reads the server's identity",
    "tcpPort": "reads the server's configuration",
    "getServerPort": "reads the server's configuration",
    "getOSKernelVersion": "reads the host's identity",
    "uptime": "reads the server's state",
    "version": "reads the server's identity",
    "revision": "reads the server's identity",
    "buildId": "reads the server's identity",
    "hasThreadFuzzer": "reads the server's state",
    "zookeeperSessionUptime": "reads the coordination service's state",
    "generateSerialID": "writes to the coordination service",
    "connectionId": "reads the connection's state",
    "queryID": "reads the server's state",
    "currentQueryID": "reads the server's state",
    "initialQueryID": "reads the server's state",
    "initialQueryStartTime": "reads the server's state",
    "shardNum": "reads the cluster's state",
    "shardCount": "reads the cluster's state",
    "transactionID": "reads the server's state",
    "transactionLatestSnapshot": "reads the server's state",
    "transactionOldestSnapshot": "reads the server's state",
    "sleep": "only stalls the query",
    "sleepEachRow": "only stalls the query",
    "fuzzQuery": "generates queries",
}
# Listed as internal, but what the parser writes for ``CASE x WHEN ...``: pure.
ALLOWED_INTERNAL = frozenset({"caseWithExpression", "caseWithExpr"})
# SQL constructs the parser writes as function calls but the engine does not list as functions.
SYNTAX_FUNCTIONS = frozenset({"lambda", "exists", "grouping", "GROUPING"})
MEMO_NAMES = 16_384  # distinct names whose decision a Functions remembers (each decision, least recent out)


@dataclass(frozen=True)
class Functions:
    engine: str
    allowed: frozenset[str]
    allowed_ci: frozenset[str]  # lower-cased names of allowed case-insensitive functions
    denied: dict[str, str]
    aggregates: frozenset[str]  # allowed aggregate functions, which take combinators
    combinators: tuple[str, ...]  # aggregate combinators (``-If``, ``-Array``, ...), longest first
    denied_aggregates: frozenset[str] = frozenset()  # lower-cased

    @functools.cached_property
    def callable_lower(self) -> frozenset[str]:
        """Every name the engine could call from an expression, lower-cased: its functions, allowed or not."""
        return frozenset(n.lower() for n in (*self.allowed, *self.denied))

    def refusal(self, name: str, engine: frozenset[str] = frozenset()) -> str | None:
        """Why ``name``, found anywhere in a query, is refused; None when it is allowed or calls nothing.

        A name calls something when it is (in any case) one of the engine's functions (the shipped list,
        or ``engine``: the lower-cased names the running engine reports), or a denied
        aggregate with combinators appended. Allowed functions pass, as :meth:`is_allowed` says."""
        return self._memo_refusal(name, engine)

    def denied_aggregate(self, name: str) -> str | None:
        """Why ``name`` (a word inside a string value) is refused: it names a denied aggregate function,
        the one kind of function a value can call (``arrayReduce('f', …)``, ``AggregateFunction(f, …)``)."""
        return self._memo_denied_aggregate(name)

    # Each word of each query is decided here, most of them many times (``feature``, ``llm_calls``, ...), and a
    # decision strips every combinator suffix: remembered per name. Bounded, as a query may carry any word.
    @functools.cached_property
    def _memo_refusal(self) -> Callable[[str, frozenset[str]], str | None]:
        return functools.lru_cache(maxsize=MEMO_NAMES)(self._refusal)

    @functools.cached_property
    def _memo_denied_aggregate(self) -> Callable[[str], str | None]:
        return functools.lru_cache(maxsize=MEMO_NAMES)(self._denied_aggregate)

    @functools.cached_property
    def _combinators_lower(self) -> tuple[str, ...]:
        return tuple(c.lower() for c in self.combinators)

    def _refusal(self, name: str, engine: frozenset[str]) -> str | None:
        if self.is_allowed(name):
            return None
        low = name.lower()
        if low in self.callable_lower or low in engine:
            return self.denied.get(name) or self._denied_ci(low) or "not a function llmtap allows"
        base = self._denied_base(low)
        return None if base is None else self._denied_ci(base) or "a denied aggregate function"

    def _denied_aggregate(self, name: str) -> str | None:
        low = name.lower()
        base = low if low in self.denied_aggregates else self._denied_base(low)
        return None if base is None else self._denied_ci(base) or "a denied aggregate function"

    def _denied_ci(self, low: str) -> str:
        for k, why in self.denied.items():
            if k.lower() == low:
                return why
        return ""

    def _denied_base(self, low: str) -> str | None:
        """The denied aggregate ``low`` is made of, with combinators appended (``stochasticLinearRegressionIf``)."""
        return next((b for b in _bases(low, self._combinators_lower) if b in self.denied_aggregates), None)

    def is_allowed(self, name: str) -> bool:
        return self._memo_is_allowed(name)

    @functools.cached_property
    def _memo_is_allowed(self) -> Callable[[str], bool]:
        return functools.lru_cache(maxsize=MEMO_NAMES)(self._is_allowed)

    def _is_allowed(self, name: str) -> bool:
        if name in self.allowed or name in SYNTAX_FUNCTIONS or name.lower() in self.allowed_ci:
            return True
        return self._combined(name)

    def _combined(self, name: str) -> bool:
        """``sumIf``, ``quantilesArrayIf``, ...: an allowed aggregate with combinators appended."""
        for base in _bases(name, self.combinators):
            if base in self.aggregates or (base.lower() in self.allowed_ci and base.lower() in self.aggregates):
                return True
        return False


def _bases(name: str, combinators: tuple[str, ...], depth: int = 8) -> set[str]:
    """What ``name`` is with 1 to ``depth`` combinators taken off its end (each distinct base once: linear)."""
    found: set[str] = set()
    level = {name}
    for _ in range(depth):
        nxt = {n[: -len(c)] for n in level for c in combinators if n.endswith(c) and len(n) > len(c)} - found
        if not nxt:
            break
        found |= nxt
        level = nxt
    return found


def classify(rows: list[dict[str, Any]], combinators: list[str]) -> dict[str, Any]:
    """``system.functions`` rows (name, alias_to, case_insensitive, categories, is_aggregate) and the
    aggregate combinators → the data file's content."""
    by_name = {r["name"]: r for r in rows}

    def reason(name: str, seen: frozenset[str] = frozenset()) -> str:
        r = by_name[name]
        if name in ALLOWED_INTERNAL:
            return ""
        if name in DENIED_FUNCTIONS:
            return DENIED_FUNCTIONS[name]
        if name.startswith("_"):
            return "engine-internal"
        if r["categories"] in DENIED_CATEGORIES:
            return DENIED_CATEGORIES[r["categories"]]
        target = r["alias_to"]
        if target and target in by_name and target not in seen:
            return reason(target, seen | {name})
        return ""

    allowed, allowed_ci, aggregates, denied, denied_aggregates = [], [], [], {}, []
    for name in sorted(by_name):
        why = reason(name)
        if why:
            denied[name] = why
            if by_name[name]["is_aggregate"]:
                denied_aggregates.append(name)
            continue
        allowed.append(name)
        if by_name[name]["case_insensitive"]:
            allowed_ci.append(name.lower())
        if by_name[name]["is_aggregate"]:
            aggregates.append(name)
    return {
        "allowed": allowed,
        "allowed_case_insensitive": sorted(set(allowed_ci)),
        "aggregates": aggregates,
        "combinators": sorted(combinators),
        "denied": denied,
        "denied_aggregates": denied_aggregates,
    }


def engine_functions(query: Any) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(engine version, system.functions rows, aggregate combinators) through ``query(sql, fmt) -> bytes``."""
    version = query("SELECT version()", "TSV").decode().strip()
    raw = query(
        "SELECT name, alias_to, case_insensitive, categories, is_aggregate FROM system.functions", "JSONEachRow"
    )
    combinators = query("SELECT name FROM system.aggregate_function_combinators", "TSV").decode().split()
    return version, [json.loads(line) for line in raw.splitlines() if line.strip()], combinators


@functools.cache
def load() -> Functions:
    data = json.loads(DATA.read_text())
    return Functions(
        data["engine"],
        frozenset(data["allowed"]),
        frozenset(data["allowed_case_insensitive"]),
        dict(data["denied"]),
        frozenset(data["aggregates"]) | frozenset(a.lower() for a in data["aggregates"]),
        tuple(sorted(data["combinators"], key=len, reverse=True)),
        frozenset(a.lower() for a in data["denied_aggregates"]),
    )


def main() -> int:
    """Regenerate ``sqlfunctions.json`` from the installed engine (an in-memory chDB session)."""
    from chdb import session

    s = session.Session(":memory:")
    try:
        version, rows, combinators = engine_functions(lambda sql, fmt: bytes(s.query(sql, fmt).bytes()))
    finally:
        s.close()
    out = {"engine": version, **classify(rows, combinators)}
    DATA.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(f"{DATA}: {len(out['allowed'])} allowed, {len(out['denied'])} denied (engine {version})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
