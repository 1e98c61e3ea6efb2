from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dashboards"))  # the dashboard generator

from helpers import Mock, Sidecar, start_mock, start_sidecar, stop

# Markers are declared in the test files (``pytestmark``); the layout's rule is checked here: tests/e2e
# start real processes (e2e), and slow and browser tests run with the e2e suite.
_E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = []
    rank: dict[str, int] = {}  # per file: 0 holds a slow or browser test, 1 an e2e one, 2 neither
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        if (_E2E in Path(str(item.fspath)).parents or marks & {"slow", "browser"}) and "e2e" not in marks:
            unmarked.append(item.nodeid)
        here = 0 if marks & {"slow", "browser"} else 1 if "e2e" in marks else 2
        rank[str(item.fspath)] = min(rank.get(str(item.fspath), 2), here)
    if unmarked:
        raise pytest.UsageError(f"mark these e2e (pytestmark = pytest.mark.e2e in the file): {', '.join(unmarked[:5])}")
    # The parallel run hands each file to one worker (--dist loadfile) in this order: the long files first, so
    # none is left to run alone at the end. The order within a file is kept. xdist would otherwise reorder the
    # files by their number of tests (most first), which sent the one-test demo (2.5 min) and the benchmark
    # smoke run to the end of the run: --no-loadscope-reorder (addopts) keeps this order.
    items.sort(key=lambda item: rank[str(item.fspath)])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report ends with the last lines of the log of every sidecar it was handed: what the
    process said when it went wrong is what a flake on a busy machine needs to be explained."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or call.when == "teardown":
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, Sidecar) and value.log.exists():
            tail = value.log.read_text(errors="replace").splitlines()[-60:]
            rep.sections.append((f"log of the sidecar `{name}` (last {len(tail)} lines)", "\n".join(tail)))


@pytest.fixture(scope="session")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    corpus = Path(__file__).parent / "corpus"  # recorded real responses, served for x-mock-replay
    m = start_mock(tmp_path_factory.mktemp("mock"), env={"LLMTAP_MOCK_REPLAY_DIR": str(corpus)})
    yield m
    stop(m.proc)


@pytest.fixture(scope="session")
def sidecar(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = start_sidecar(tmp_path_factory.mktemp("sidecar") / "data", mock)
    yield sc
    stop(sc.proc)


@pytest.fixture
def proxied(sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch) -> Sidecar:
    """Point unmodified SDK clients at the sidecar the way a user would: env vars only."""
    for k in list(os.environ):
        if k.upper() in ("NO_PROXY", "ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", sidecar.proxy_url)
    monkeypatch.setenv("SSL_CERT_FILE", str(sidecar.bundle))
    return sidecar


@pytest.fixture(scope="session")
def inproc_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one embedded store of the test process (chDB allows a single path per process)."""
    from llmtap.store.embedded import ChdbBackend

    b = ChdbBackend(tmp_path_factory.mktemp("inproc") / "store")
    yield b
    b.close()
