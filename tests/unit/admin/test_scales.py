"""The viewer's axes and label placement (static/js/scales.js), run in Node over a grid of data shapes: value ticks
ascend, are distinct once formatted, are whole numbers for counts, stop at 100% for shares and cover the data;
time ticks are distinct and inside the range; placed labels never overlap and stay inside the chart."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # it starts a process (node)
JS = Path(__file__).resolve().parents[3] / "proxy" / "llmtap" / "admin" / "static" / "js"
NODE = shutil.which("node")

SCRIPT = Path(__file__).with_name("scales_check.mjs")  # @JS@: the viewer's js folder


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_axes_and_labels(tmp_path: Path) -> None:
    script = tmp_path / "scales.mjs"
    script.write_text(SCRIPT.read_text().replace("@JS@", JS.as_posix()))
    r = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
