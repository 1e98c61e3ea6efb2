"""docs/kubernetes.md's manifest fits the image and the CLI (no cluster here: checked statically, like compose)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmtap.durations import parse_duration

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "kubernetes.md").read_text()
DOCS = list(yaml.safe_load_all(DOC.split("```yaml\n", 1)[1].split("```", 1)[0]))
POD: dict[str, Any] = next(d for d in DOCS if d["kind"] == "Deployment")["spec"]["template"]["spec"]
SIDECAR = POD["initContainers"][0]
APP = POD["containers"][0]


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<secret>") for e in container["env"]}


def test_the_sidecar_is_a_native_sidecar_started_before_the_app_and_drained_in_the_grace_period() -> None:
    assert SIDECAR["restartPolicy"] == "Always" and SIDECAR["startupProbe"]["httpGet"]["path"] == "/healthz"
    drain = parse_duration(env(SIDECAR)["LLMTAP_DRAIN_TIMEOUT"])
    assert POD["terminationGracePeriodSeconds"] >= drain + 15  # the drain, then the final flush (up to 15 s)
    admin_port = int(env(SIDECAR)["LLMTAP_ADMIN"].rsplit(":", 1)[1])
    assert SIDECAR["ports"][0]["containerPort"] == admin_port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert SIDECAR[probe]["httpGet"]["port"] == SIDECAR["ports"][0]["name"]


def test_the_sidecar_flags_are_ones_llmtap_reads_and_it_would_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmtap.app import RunConfig, check_exposure
    from llmtap.cli import parser
    from llmtap.config import Environment

    values = env(SIDECAR)
    pw = "s3cret"
    for k, v in values.items():
        monkeypatch.setenv(k, v.replace("$(CLICKHOUSE_PASSWORD)", pw))
    environment = Environment.read()
    built = parser.build_parser(environment)
    args = built.parse_args(SIDECAR["args"])
    read = set(built.env_vars)
    assert {k for k in values if k.startswith("LLMTAP_")} <= read
    cfg = RunConfig.from_flags(args, environment)
    check_exposure(cfg)  # loopback proxy; the admin port beyond loopback has its token
    assert cfg.listen == ("127.0.0.1", 8080)
    from llmtap.store.clickhouse import parse_url

    assert parse_url(cfg.store)["password"] == pw and parse_url(cfg.store)["database"] == "llmtap"
    names = [e["name"] for e in SIDECAR["env"]]
    assert names.index("CLICKHOUSE_PASSWORD") < names.index("LLMTAP_STORE")  # $(VAR) needs it defined first


def test_the_app_gets_the_proxy_and_the_bundle_the_sidecar_writes(tmp_path: Path) -> None:
    from llmtap.clientenv import CA_BUNDLE_VARS
    from llmtap.intercept.ca import client_bundle

    bundle = client_bundle(tmp_path).name
    sidecar_mounts = {m["name"]: m["mountPath"] for m in SIDECAR["volumeMounts"]}
    app_mounts = {m["name"]: m["mountPath"] for m in APP["volumeMounts"]}
    assert sidecar_mounts["llmtap-data"] == "/data" and APP["volumeMounts"][0]["readOnly"] is True
    app = env(APP)
    assert app["HTTPS_PROXY"] == "http://127.0.0.1:8080"
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert name in (*CA_BUNDLE_VARS, "NODE_EXTRA_CA_CERTS")
        assert app[name] == f"{app_mounts['llmtap-data']}/{bundle}"
    assert not re.search(r"openai|anthropic|googleapis|amazonaws", app["NO_PROXY"])
    volumes = {v["name"] for v in POD["volumes"]}
    assert set(sidecar_mounts) <= volumes and set(app_mounts) <= volumes


def test_the_resources_are_the_measured_recommendation_for_the_server_store() -> None:
    table = DOC.split("Recommended, from these numbers:", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| ClickHouse server |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    res = SIDECAR["resources"]
    assert f"`{res['requests']['cpu']}`" in cells[-2] and f"`{res['requests']['memory']}`" in cells[-2]
    assert f"`{res['limits']['memory']}`" in cells[-1]
