"""The mitmproxy addon set the sidecar runs, imported leanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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
