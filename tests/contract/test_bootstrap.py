"""``./bootstrap`` finds a Python >= 3.12 on every kind of machine the README promises, and builds .venv.

Each case runs the real script with ``sh`` in a made-up machine: a PATH holding only the basic tools
plus the pythons of that case, and a PYENV_ROOT of the case's choosing (never PYENV_VERSION).
A machine of this kind: ``python3.12`` is a pyenv shim that fails unless PYENV_VERSION selects 3.12,
``python3`` is 3.11, and pyenv has 3.12 installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY312 = Path(sys._base_executable).resolve()  # the Python 3.12 the tests run on, outside the venv
TOOLS = ("sh", "dirname", "sort", "tail", "rm", "cat", "env", "uname", "ls", "sed", "grep", "mkdir", "cp")
SHIM = '#!/bin/sh\necho "pyenv: $(basename "$0"): command not found" >&2\nexit 127\n'
PY311 = '#!/bin/sh\nexec {real} "$@"\n'


def machine(tmp: Path, bins: dict[str, str | Path], pyenv: dict[str, Path] | None = None) -> dict[str, str]:
    """An environment: PATH = basic tools + ``bins`` (name → script text or a python to link)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bindir / tool).symlink_to(found)
    (bindir / "basename").symlink_to(shutil.which("basename") or "/usr/bin/basename")
    for name, what in bins.items():
        if isinstance(what, Path):
            (bindir / name).symlink_to(what)
        else:
            (bindir / name).write_text(what)
            (bindir / name).chmod(0o755)
    root = tmp / "pyenv"
    for version, python in (pyenv or {}).items():
        d = root / "versions" / version / "bin"
        d.mkdir(parents=True)
        minor = ".".join(version.split(".")[:2])
        (d / f"python{minor}").symlink_to(python)
    return {"PATH": str(bindir), "PYENV_ROOT": str(root), "HOME": str(tmp)}


def bootstrap(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cwd / "bootstrap"), *args], capture_output=True, text=True, env=env, timeout=900, cwd=cwd
    )


def fake_311(tmp: Path) -> str:
    """A python3 that is 3.11 (a real interpreter when one is installed, else a script that says so)."""
    for cand in ("/usr/bin/python3.11", shutil.which("python3.11") or ""):
        if cand and os.access(cand, os.X_OK):
            return PY311.format(real=cand)
    return "#!/bin/sh\necho 'Python 3.11.2'; exit 1\n"


def test_this_kind_of_machine_pyenv_312_installed_but_not_selected(tmp_path: Path) -> None:
    env = machine(
        tmp_path,
        {"python3.12": SHIM, "python3": fake_311(tmp_path), "pyenv": "#!/bin/sh\nexit 1\n"},
        {"3.11.7": PY312, "3.12.1": PY312, "3.12.10": PY312, "3.13.0t": PY312},
    )
    (tmp_path / "pyenv" / "versions" / "3.11.7" / "bin" / "python3.11").unlink()  # 3.11 is not a candidate
    r = bootstrap(env, "--print-python")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "pyenv" / "versions" / "3.12.10" / "bin" / "python3.12")  # newest 3.12


def test_a_real_python312_on_path_wins(tmp_path: Path) -> None:
    env = machine(tmp_path, {"python3.12": PY312, "python3": fake_311(tmp_path)}, {"3.12.1": PY312})
    r = bootstrap(env, "--print-python")
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path / "bin" / "python3.12"), r.stderr


def test_only_python3_which_is_312(tmp_path: Path) -> None:
    env = machine(tmp_path, {"python3": PY312})
    r = bootstrap(env, "--print-python")
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path / "bin" / "python3"), r.stderr


def test_llmtap_python_overrides_and_is_checked(tmp_path: Path) -> None:
    env = machine(tmp_path, {"python3": PY312})
    r = bootstrap({**env, "LLMTAP_PYTHON": str(PY312)}, "--print-python")
    assert r.returncode == 0 and r.stdout.strip() == str(PY312)
    r = bootstrap({**env, "LLMTAP_PYTHON": str(tmp_path / "bin" / "sh")}, "--print-python")
    assert r.returncode == 2 and "LLMTAP_PYTHON" in r.stderr


def test_no_suitable_python_is_one_clear_line(tmp_path: Path) -> None:
    env = machine(tmp_path, {"python3.12": SHIM, "python3": fake_311(tmp_path)})
    r = bootstrap(env, "--print-python")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "no Python >= 3.12 found" in line and "LLMTAP_PYTHON" in line
    r = bootstrap(env, "bogus")
    assert r.returncode == 2 and "usage" in r.stderr


@pytest.mark.slow
@pytest.mark.e2e  # installs every dependency into a new venv: with the e2e suite, not in `-m "not e2e"`
def test_bootstrap_builds_a_working_venv_on_this_kind_of_machine(tmp_path: Path) -> None:
    """The whole script, on a copy of the repository's files, where python3.12 is a failing pyenv shim."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    repo = tmp_path / "repo"
    for rel in files:
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    env = machine(tmp_path, {"python3.12": SHIM, "python3": fake_311(tmp_path)}, {"3.12.1": PY312})
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_COMPILE"] = "1"  # the same files installed, without byte-compiling every dependency (~1/3 of the CPU)
    for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE", "XDG_CACHE_HOME"):
        if k in os.environ:
            env[k] = os.environ[k]
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))  # reuse pip's cache
    r = bootstrap(env, cwd=repo)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "bootstrap: .venv ready (Python 3.12" in r.stderr
    v = subprocess.run([str(repo / ".venv/bin/llmtap"), "--version"], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and v.stdout.startswith("llmtap "), v.stderr
    # run again: the environment is reused, not rebuilt
    r = bootstrap(env, cwd=repo)
    assert r.returncode == 0 and "recreating" not in r.stderr
