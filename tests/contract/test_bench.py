"""The benchmark's smoke run (`bench/run.py --quick`): every path and section runs; no thresholds."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # slow: runs with the e2e suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench/run.py"), "--quick", "--transparent", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = out.read_text()
    for section in (
        "## Stream suite",
        "## Throughput and CPU, kept-alive",
        "## Throughput and CPU, a new connection",
        "## Latency",
        "## Peak RSS",
        "## Store ingest",
        "## Bytes per call",
        "## Dashboard panels",
        "## Transparent mode beside the regular mode",  # measured as root, else "Not measured…: why"
    ):
        assert section in report
    for path in (
        "| direct |",
        "| bare mitmproxy |",
        "| llmtap (embedded store) |",
        "| llmtap (OTLP + ClickHouse-HTTP) |",
    ):
        assert path in report
    assert report.count("| LLM ") >= 30  # one timing per dashboard panel


def test_benchmark_tables_have_no_nan_cells() -> None:
    """A path that does not measure a number shows "n/a" and says why, in the generator and the committed page."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench/run.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = json.loads((ROOT / "bench/results/bench.json").read_text())
    page = bench.render(results)
    assert not re.search(r"\|\s*[+-]?nan\s*\|", page, re.I)
    assert "| n/a |" not in page or "n/a: not measured" in page
    committed = (ROOT / "docs/benchmarks.md").read_text()
    assert not re.search(r"\|\s*[+-]?nan\s*\|", committed, re.I)
