"""Each list is defined once, and what is derived from it cannot be bypassed.

A closed vocabulary (``api``, ``operation``, ``provider``) is exactly what the code emits; a host
pattern of the provider table has a real name the mock answers for.
"""

from __future__ import annotations

import re
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
