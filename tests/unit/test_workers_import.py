"""A proxy worker loads mitmproxy and the routing tables, nothing of the recording: each worker costs
the proxy's own memory only (the recorder's libraries and the engine live in the supervisor's
processes, once)."""

from __future__ import annotations

import json
import subprocess
import sys

RECORDING = ("chdb", "genai_prices", "prometheus_client", "opentelemetry", "clickhouse_connect", "tiktoken", "pydantic")


def test_a_worker_imports_nothing_of_the_recording() -> None:
    code = (
        "import sys, json\n"
        "from llmtap.intercept import worker, addon, outbox, limits, mitm\n"
        "mitm.proxy_addons(True)\n"  # every addon a worker may load (proxy auth included)
        "from mitmproxy.master import Master\n"
        "from mitmproxy.options import Options\n"
        "from llmtap.telemetry.logs import setup_logging\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert "mitmproxy" in loaded and "llmtap" in loaded
    assert not loaded & set(RECORDING), sorted(loaded & set(RECORDING))
