"""The part of mitmproxy the sidecar runs: a regular-mode proxy's addons, imported leanly.

``mitmdump`` loads ~35 addons (replay, map-local, the mitm.it onboarding app, save,
scripts, ...) and mitmproxy offers every hook of every flow to each of them: under load
that dispatch alone was ~15% of the proxy's CPU. And ``mitmproxy.addons/__init__.py``
imports all of them to build that default list, pulling in flask, jinja2, ldap3 and
more: ~14 MB of resident memory for features llmtap does not use.

So the sidecar adds only what a regular-mode proxy needs, and imports the addon modules
without running the package's ``__init__``. That file holds nothing but those imports
and ``default_addons()`` (``tests/test_units.py`` checks it still does, for the
mitmproxy installed), so skipping it changes nothing else.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from typing import Any

ADDONS_PACKAGE = "mitmproxy.addons"


def _addons_namespace() -> None:
    """Make ``mitmproxy.addons`` a plain package of its submodules (its ``__init__`` not run)."""
    if ADDONS_PACKAGE in sys.modules:
        return
    import mitmproxy

    found = importlib.util.find_spec(ADDONS_PACKAGE)
    if found is None or found.submodule_search_locations is None:
        return  # a layout we do not know: import it the normal way
    spec = importlib.machinery.ModuleSpec(ADDONS_PACKAGE, None, is_package=True)
    spec.submodule_search_locations = list(found.submodule_search_locations)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = found.origin
    sys.modules[ADDONS_PACKAGE] = module
    mitmproxy.addons = module


def proxy_addons(proxy_auth: bool) -> list[Any]:
    """The addons, in mitmdump's order: options and commands (core), refusing clients from
    public addresses (block), h2c-upgrade refusal (disable_h2c), proxy auth when asked for,
    the servers (proxyserver), protocol detection (next_layer), TLS interception
    (tlsconfig), and exiting on startup errors (errorcheck)."""
    _addons_namespace()
    from mitmproxy.addons import block, core, disable_h2c, errorcheck, next_layer, proxyserver, tlsconfig

    addons: list[Any] = [core.Core(), block.Block(), disable_h2c.DisableH2C()]
    if proxy_auth:
        from mitmproxy.addons import proxyauth

        addons.append(proxyauth.ProxyAuth())
    addons += [proxyserver.Proxyserver(), next_layer.NextLayer(), tlsconfig.TlsConfig(), errorcheck.ErrorCheck()]
    return addons
