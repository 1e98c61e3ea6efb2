"""Static checks of the deployment: docker-compose, the collector, Prometheus, Grafana provisioning, Dockerfile.

No Docker engine, collector, Prometheus or Grafana binary can run here, so these check that every
file is well-formed, internally consistent and consistent with the code's contracts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmtap.store import DEFAULT_DB, cluster_statements, schema_statements
from llmtap.telemetry.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]


def load(rel: str) -> Any:
    return yaml.safe_load((ROOT / rel).read_text())


COMPOSE = load("docker-compose.yml")
SERVICES = COMPOSE["services"]


def test_compose_has_the_stack() -> None:
    assert {"clickhouse", "otel-collector", "grafana", "llmtap", "prometheus", "example-app", "schema"} <= set(SERVICES)


def test_images_are_pinned() -> None:
    for name, svc in SERVICES.items():
        if "build" in svc:
            continue
        image = svc["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"


def test_long_running_services_have_healthchecks() -> None:
    for name in ("clickhouse", "otel-collector", "prometheus", "grafana"):
        assert "healthcheck" in SERVICES[name], name
    assert "HEALTHCHECK" in (ROOT / "Dockerfile").read_text()  # llmtap's own, in its image


def test_mounted_files_exist() -> None:
    for name, svc in SERVICES.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (ROOT / src).exists(), f"{name} mounts missing {src}"
            else:
                assert src in COMPOSE["volumes"], f"{name} uses undeclared volume {src}"
    assert (ROOT / "deploy/secrets/README.md").exists()


def test_no_secrets_in_compose() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for m in re.finditer(r"(PASSWORD|TOKEN|API_KEY)\w*:\s*(\S+)", text):
        value = m.group(2)
        assert value.startswith("${") or value.startswith("*"), f"literal secret: {m.group(0)}"
    assert "sk-" not in text.replace("sk-demo-not-a-real-key", "")


def test_ports_bind_loopback_on_the_host() -> None:
    for name, svc in SERVICES.items():
        for p in svc.get("ports", []):
            assert p.startswith("127.0.0.1:"), f"{name} publishes {p} beyond loopback"


def test_llmtap_service_exports_to_the_collector_and_the_collector_waits_for_the_schema() -> None:
    cmd = " ".join(SERVICES["llmtap"]["command"])
    assert "--otlp-endpoint http://otel-collector:4318" in cmd and "--store none" in cmd
    assert SERVICES["otel-collector"]["depends_on"]["schema"]["condition"] == "service_completed_successfully"
    assert SERVICES["schema"]["command"][:2] == ["schema", "--apply"]
    # the app gets the CA bundle from the sidecar's volume
    assert any(v.startswith("llmtap-data:") for v in SERVICES["example-app"]["volumes"])
    assert SERVICES["example-app"]["environment"]["HTTPS_PROXY"] == "http://llmtap:8080"


def test_collector_pipelines_reference_defined_components() -> None:
    cfg = load("collector/otelcol.yaml")
    for kind in ("receivers", "processors", "exporters"):
        for pipe in cfg["service"]["pipelines"].values():
            for comp in pipe.get(kind, []):
                assert comp in cfg[kind], f"{comp} not defined under {kind}"
    for ext in cfg["service"].get("extensions", []):
        assert ext in cfg["extensions"]
    ch = cfg["exporters"]["clickhouse"]
    assert ch["create_schema"] is False and ch["traces_table_name"] == "otel_traces"
    assert ch["database"] == DEFAULT_DB
    assert ch["password"] == "${env:CLICKHOUSE_PASSWORD}"
    assert SERVICES["otel-collector"]["volumes"][0].startswith("./collector/otelcol.yaml:")


def test_prometheus_scrapes_llmtap_and_rules_use_contract_metrics() -> None:
    prom = load("deploy/prometheus/prometheus.yml")
    job = prom["scrape_configs"][0]
    assert job["static_configs"][0]["targets"] == ["llmtap:9464"]
    assert job["authorization"]["credentials_file"] == "/run/secrets/admin-token"
    rules = load("deploy/prometheus/alerts.yml")
    exposed = {m.name for m in Metrics().registry.collect()}
    exposed |= {n + s for n in exposed for s in ("_total", "_bucket", "_count", "_sum")}
    names = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["alert"] and rule["expr"] and rule["annotations"]["summary"]
            names |= set(re.findall(r"\bllmtap_[a-z_]+", rule["expr"]))
    assert names and names <= exposed, names - exposed


def test_grafana_provisioning_points_at_the_pinned_datasource() -> None:
    ds = load("dashboards/provisioning/datasources/clickhouse.yaml")["datasources"][0]
    assert (ds["uid"], ds["type"]) == ("clickhouse", "grafana-clickhouse-datasource")
    assert ds["jsonData"]["defaultDatabase"] == DEFAULT_DB
    assert ds["secureJsonData"]["password"].startswith("$")
    prov = load("dashboards/provisioning/dashboards/llmtap.yaml")["providers"][0]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in SERVICES["grafana"]["volumes"] if v.startswith("./")}
    assert mounts[prov["options"]["path"]] == "./dashboards/json"
    for path in (ROOT / "dashboards/json").glob("*.json"):
        text = path.read_text()
        uids = set(re.findall(r'"uid":\s*"([^"]+)"', text))
        dash = json.loads(text)
        for panel in dash.get("panels", []):
            if "datasource" in panel:
                assert panel["datasource"]["uid"] in ("clickhouse", "${datasource}"), path.name
        assert uids


def test_dockerfile_builds_the_project_on_python_312() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.12" in text and "pip install --no-cache-dir ." in text
    assert "USER llmtap" in text and 'ENTRYPOINT ["llmtap"]' in text


@pytest.mark.e2e  # the ClickHouse engine (chDB) parses it
@pytest.mark.parametrize("db", ["llmtap", "otel"])
def test_cluster_ddl_parses_in_clickhouse(db: str, inproc_store: Any) -> None:
    stmts = cluster_statements(db, "prod")
    single = schema_statements(db)
    tables = [s for s in single if s.startswith("CREATE TABLE")]
    assert len(stmts) == len(single) + len(tables)  # each table gets a local and a Distributed one
    for stmt in stmts:
        assert "ON CLUSTER 'prod'" in stmt
        inproc_store.query("EXPLAIN AST " + stmt, "TSVRaw")  # the real ClickHouse parser accepts it
    assert any("ReplicatedMergeTree('/clickhouse/tables/{shard}/" in s for s in stmts)
    assert any("Distributed('prod', " + db + ", otel_traces_local, cityHash64(TraceId))" in s for s in stmts)
    views = [s for s in stmts if "MATERIALIZED VIEW" in s]
    assert views and all(re.search(r"TO \w+\.\w+_local AS", v) and "_local" in v.split("FROM")[1] for v in views)
