"""Each package's ``__init__`` is its face, declared once in its ``__all__`` (as httpx checks its own).

And the layering the tree promises holds in the code: nothing on the traffic path imports the
testing wing, and only ``intercept`` imports mitmproxy.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "proxy" / "llmtap"

FACES = sorted(
    ".".join(p.relative_to(PKG.parent).parent.parts) for p in PKG.rglob("__init__.py") if "static" not in p.parts
)


def _face_names(init: Path) -> set[str]:
    """What a package's ``__init__`` puts on its face: what it defines, and what it imports from its own
    modules (``from .x import Y``); imports from elsewhere (stdlib helpers) and ``_names`` are not the face."""
    out: set[str] = set()
    body = ast.parse(init.read_text()).body
    for node in list(body):  # a lazy face (telemetry) names its members under TYPE_CHECKING, loads them on use
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            body.extend(node.body)
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            out.update(a.asname or a.name for a in node.names)
    return {n for n in out if not n.startswith("_") or n == "__version__"} - {"__all__"}


@pytest.mark.parametrize("name", FACES)
def test_package_faces_are_their_all(name: str) -> None:
    """A face is declared once, in ``__all__``: everything it names exists, and everything the package puts
    on its face is named there (as httpx checks its ``__all__`` against the module)."""
    module = importlib.import_module(name)
    init = PKG.parent.joinpath(*name.split("."), "__init__.py")
    exported = getattr(module, "__all__", None)
    faced = _face_names(init)
    if exported is None:
        assert not faced, f"{name} puts {sorted(faced)} on its face without an __all__"
        return
    assert len(exported) == len(set(exported)), f"{name}.__all__ names something twice"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names {symbol}, which it does not define"
    assert set(exported) == faced, (
        f"{name}: on the face but not in __all__ {sorted(faced - set(exported))}, "
        f"in __all__ but not on the face {sorted(set(exported) - faced)}"
    )


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against the package)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])  # a module's package; an __init__'s is its own folder
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
            elif node.module:
                out.add(node.module)
    return out


TRAFFIC_PATH = ("intercept", "decode", "adapters", "capture", "telemetry", "store")


def _files(*stages: str) -> list[Path]:
    files = [PKG / "pipeline.py", PKG / "record.py", PKG / "providers.py"] if not stages else []
    for stage in stages or TRAFFIC_PATH:
        files += sorted((PKG / stage).rglob("*.py"))
    return files


def test_the_traffic_path_never_imports_the_testing_wing() -> None:
    for path in _files():
        bad = {m for m in _imports(path) if m.startswith("llmtap.testing")}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_only_intercept_imports_mitmproxy() -> None:
    for path in PKG.rglob("*.py"):
        if (PKG / "intercept") in path.parents:
            continue
        bad = {m for m in _imports(path) if m.split(".")[0] == "mitmproxy"}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_decoders_and_adapters_are_pure() -> None:
    """No I/O modules in the pure stages: they see bytes and values, nothing else."""
    io = {"socket", "ssl", "subprocess", "threading", "asyncio", "http", "urllib.request", "os"}
    for path in _files("decode", "adapters"):
        bad = {m for m in _imports(path) if m.split(".")[0] in io or m in io}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_no_module_is_over_400_lines() -> None:
    for path in PKG.rglob("*.py"):
        n = len(path.read_text().splitlines())
        assert n <= 420, f"{path.relative_to(PKG)} has {n} lines"
