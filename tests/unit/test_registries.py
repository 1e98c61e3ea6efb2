"""Each list is defined once, and what is derived from it cannot be bypassed.

A closed vocabulary (``api``, ``operation``, ``provider``) is exactly what the code emits; a host
pattern of the provider table has a real name the mock answers for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from llmtap import adapters, providers, record
from llmtap.testing.mock import CERT_NAMES, HOSTS


def _all_adapters() -> list[type[adapters.Adapter]]:
    http = list(adapters.ADAPTERS.values())
    ws = [cls for w in adapters.WS_REGISTRY for cls in (w, w.call_adapter)]
    return http + ws  # type: ignore[list-item]


def test_the_api_and_operation_vocabularies_are_what_the_adapters_say() -> None:
    every = _all_adapters()
    assert set(get_args(record.Api)) == {a.api for a in every}
    assert set(get_args(record.Operation)) == {a.operation for a in every}


def test_the_provider_vocabulary_is_the_provider_table() -> None:
    assert set(providers.PROVIDER_NAMES) == {p.name for p in providers.PROVIDERS}
    hinted = {a.default_provider for a in _all_adapters()}
    hinted |= {r.provider for a in _all_adapters() for r in a.routes if r.provider}
    assert hinted <= set(providers.PROVIDER_NAMES)


def test_every_host_pattern_has_a_real_name_the_mock_answers_for() -> None:
    for p in providers.PROVIDERS:
        for pattern in p.hosts:
            assert any(re.match(rf"^{pattern}$", h) for h in HOSTS), f"{p.name}: no real name for {pattern}"
        for name in [*filter(None, map(providers.plain_name, p.hosts)), *p.examples]:
            assert providers.endpoint_for_host(name) is p, f"{name} is not routed to its own row ({p.name})"
    assert set(HOSTS) <= set(CERT_NAMES)


def _modules() -> list[str]:
    import pkgutil

    import llmtap

    return [
        m.name
        for m in pkgutil.walk_packages(llmtap.__path__, "llmtap.")
        if not m.name.startswith("llmtap.testing") and not m.name.endswith("__main__")
    ]


def test_every_error_llmtap_raises_derives_from_the_one_base() -> None:
    """As httpx's errors derive from ``httpx.HTTPError``: the CLI prints any of them as one line."""
    import importlib
    import inspect

    from llmtap.errors import LlmtapError

    errors = {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for name in _modules()
        for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == name
    }
    assert len(errors) >= 15  # the walk found them
    outside = sorted(n for n, cls in errors.items() if not issubclass(cls, LlmtapError))
    assert not outside, f"not an LlmtapError: {outside}"


# -- the lists docs/architecture.md's "Where to add…" relies on ----------------------------------------

PKG = Path(__file__).resolve().parents[2] / "proxy" / "llmtap"
ROOT = PKG.parents[1]


def test_every_command_function_is_bound_to_the_parser_its_module_registers() -> None:
    """A command is its ``cmd_*`` function and the sub-parser its module registers with it, nothing else:
    a function without its parser (or a parser without a function) fails here."""
    import importlib
    import inspect

    from llmtap.cli.parser import build_parser, subcommands
    from llmtap.config import Environment

    bound = [p.get_default("func") for p in subcommands(build_parser(Environment.of({}))).values()]
    assert all(callable(f) for f in bound)
    defined = {
        f
        for name in _modules()
        if name.startswith("llmtap.cli")
        for n, f in inspect.getmembers(importlib.import_module(name), inspect.isfunction)
        if n.startswith("cmd_") and f.__module__ == name
    }
    assert set(bound) == defined and len(bound) == len(set(bound))


def test_run_flags_are_the_config_fields() -> None:
    """``llmtap run`` has exactly the flags RunConfig declares (and the logging group): none added by hand."""
    from llmtap.cli.parser import build_parser, subcommands
    from llmtap.config import Environment, RunConfig
    from llmtap.options import flags

    run = subcommands(build_parser(Environment.of({})))["run"]
    dests = {a.dest for a in run._actions} - {"help", "log_level", "log_format"}
    assert dests == {f.name for f in flags(RunConfig)}


def test_only_the_config_reads_the_environment() -> None:
    """No module reads ``os.environ`` (or ``getenv``) behind the configuration's back."""
    import ast

    readers = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                readers.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert readers and all(r.startswith("config.py:") for r in readers), readers


def test_every_board_is_built_committed_documented_and_in_the_viewer() -> None:
    """A panel is its lines in dashboards/dashboard_panels.py: the committed JSON must be what the generator
    builds from them (the viewer and Grafana read that file), each board has its row in docs/dashboards.md
    and its place in the viewer's order."""
    import json

    import generate as dashboards

    from llmtap.admin.viewer import ORDER

    built = dashboards.build()
    for name, board in built.items():
        committed = json.loads((ROOT / "dashboards" / "json" / name).read_text())
        assert committed == board, f"dashboards/json/{name} is stale: run python dashboards/generate.py"
    uids = [b["uid"] for b in built.values()]
    assert sorted(ORDER) == sorted(uids)
    docs = (ROOT / "docs" / "dashboards.md").read_text()
    assert all(f"(`{uid}`)" in docs for uid in uids), [u for u in uids if f"(`{u}`)" not in docs]
