"""The image builds from exactly what the Dockerfile copies, and docker-compose.yml fits that image and the CLI.

No Docker engine runs here, so the build is replayed: the Dockerfile's COPY lines (sources minus
.dockerignore) are copied into a directory laid out like the image's WORKDIR, and the wheel is built
there (``pip wheel --no-deps``, the step ``pip install .`` runs first). Then every llmtap service of the
compose file is checked against that image and against llmtap's own parser.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
LLMTAP_SERVICES = {n: s for n, s in COMPOSE["services"].items() if s.get("build") == "."}


def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for op, rest in instructions():
        if op == "ENV":
            for part in rest.split():
                k, _, v = part.partition("=")
                env[k] = v
    return env


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith("#")]


def _glob_regex(pattern: str) -> str:
    """Docker's patterns (Go's filepath.Match plus ``**``): ``*`` and ``?`` stay within a path segment."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out


def ignored(rel: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins (``!`` re-includes); a pattern also covers what is below."""
    out = False
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pat in patterns:
        neg = pat.startswith("!")
        regex = _glob_regex(pat[1:] if neg else pat)
        if any(re.fullmatch(regex, pre) for pre in prefixes):
            out = not neg
    return out


def copied_files() -> dict[str, Path]:
    """Image path (relative to WORKDIR) → source file, for every COPY line before ``pip install``."""
    patterns = dockerignore()
    out: dict[str, Path] = {}
    for op, rest in instructions():
        if op == "RUN" and "pip install" in rest:
            break
        if op != "COPY":
            continue
        *srcs, dest = rest.split()
        assert not any(s.startswith("--") for s in srcs), "COPY flags are not replayed here"
        for src in srcs:
            path = ROOT / src
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            assert files, f"COPY {src}: nothing to copy"
            for f in files:
                rel = f.relative_to(ROOT).as_posix()
                if ignored(rel, patterns):
                    continue
                target = Path(dest) / (f.name if path.is_file() else f.relative_to(path))
                out[target.as_posix().removeprefix("./")] = f
    return out


def test_dockerignore_rules_as_docker_reads_them() -> None:
    pats = dockerignore()
    assert ignored("proxy/llmtap/__pycache__/x.pyc", pats) and ignored(".venv/bin/python", pats)
    assert ignored("bench/results/bench.json", pats) and not ignored("proxy/llmtap/app.py", pats)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    work = tmp_path_factory.mktemp("image") / "opt-llmtap"
    for rel, src in copied_files().items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, work / rel)
    out = work.parent / "dist"
    r = subprocess.run(  # hatchling, the build backend, is a test dependency: no download
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), "."],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (whl,) = out.glob("llmtap-*.whl")
    return zipfile.ZipFile(whl)


def test_the_image_wheel_holds_the_schema_dashboards_and_viewer(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "llmtap/schema.sql" in names
    assert wheel.read("llmtap/schema.sql") == (ROOT / "collector/schema.sql").read_bytes()
    boards = {p.name for p in (ROOT / "dashboards/json").glob("*.json")}
    assert boards and {n.rsplit("/", 1)[1] for n in names if n.startswith("llmtap/dashboards_json/")} == boards
    for static in ("index.html", "viewer.css", "js/main.js", "js/pages/call.js"):
        assert f"llmtap/admin/static/{static}" in names
    modules = {
        p.relative_to(ROOT / "proxy/llmtap/admin/static").as_posix()
        for p in (ROOT / "proxy/llmtap/admin/static/js").rglob("*.js")
    }
    assert modules and {f"llmtap/admin/static/{m}" for m in modules} <= names  # every viewer module ships
    assert "llmtap/clients/node-proxy-preload.cjs" in names  # what `llmtap env` points Node < 24 at
    assert "llmtap/__main__.py" in names and not any("__pycache__" in n for n in names)
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "llmtap = llmtap.cli:main" in wheel.read(entry).decode()


def _env_names_the_cli_reads(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    from llmtap.cli import parser

    return set(parser.build_parser().env_vars)


def _substitute(value: Any) -> Any:
    """Compose variable substitution with made-up values (${X:-d} → d, ${X:?msg} / ${X} → a value)."""
    if isinstance(value, list):
        return [_substitute(v) for v in value]
    if not isinstance(value, str):
        return value
    value = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{\w+(:\?[^}]*)?\}", "x", value)


def test_compose_services_run_the_image_with_flags_and_env_the_cli_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmtap.app import RunConfig, check_exposure
    from llmtap.cli.parser import build_parser
    from llmtap.config import Environment

    read = _env_names_the_cli_reads(monkeypatch)
    image = image_env()
    assert {k for k in image if k.startswith("LLMTAP_")} <= read
    assert set(LLMTAP_SERVICES) >= {"llmtap", "schema", "mock-provider"}
    for name, svc in LLMTAP_SERVICES.items():
        assert svc["image"] == "llmtap:local"
        env = {k: str(_substitute(v)) for k, v in (svc.get("environment") or {}).items()}
        unknown = {k for k in env if k.startswith("LLMTAP_")} - read
        assert not unknown, f"{name}: llmtap reads no {unknown}"
        for k, v in {**image, **env}.items():
            monkeypatch.setenv(k, v)
        environment = Environment.read()
        args = build_parser(environment).parse_args(_substitute(svc["command"]))  # the image's ENTRYPOINT is llmtap
        for k in {**image, **env}:
            monkeypatch.delenv(k)
        if args.command == "run":
            secret, args.admin_token_file = args.admin_token_file, None  # a container secret: not on this machine
            cfg = RunConfig.from_flags(args, environment)
            if secret:
                cfg.admin_token = "from-file"
            check_exposure(cfg)  # the service would start (a public admin port has its token)
            assert str(cfg.data_dir) == "/data" and any(v.split(":")[1] == "/data" for v in svc["volumes"])
            ports = {p.rsplit(":", 1)[1] for p in svc.get("ports", [])}
            assert ports <= {str(cfg.listen[1]), str(cfg.admin[1])}
            if secret:
                secret = secret.removeprefix("/run/secrets/")
                assert secret in svc["secrets"] and secret in COMPOSE["secrets"]
        if args.command == "schema":
            from llmtap.store.clickhouse import parse_url

            assert parse_url(args.store)["host"] == "clickhouse"
            assert "clickhouse" in svc["depends_on"]
    health = re.search(r"urlopen\('http://127.0.0.1:(\d+)/healthz'", DOCKERFILE)
    assert health and health.group(1) == image["LLMTAP_ADMIN"].rsplit(":", 1)[1]


def test_compose_apps_find_the_ca_bundle_and_the_mock_ca_where_llmtap_writes_them(tmp_path: Path) -> None:
    from llmtap.intercept.ca import client_bundle
    from llmtap.testing.mock.certs import ensure_certs

    bundle = client_bundle(tmp_path / "data")
    app = COMPOSE["services"]["example-app"]
    mount = next(v for v in app["volumes"] if v.startswith("llmtap-data:"))
    assert app["environment"]["SSL_CERT_FILE"] == f"{mount.split(':')[1]}/{bundle.name}"
    ca, _, _ = ensure_certs(tmp_path / "mock")
    mock = LLMTAP_SERVICES["mock-provider"]
    cert_dir = mock["command"][mock["command"].index("--cert-dir") + 1]
    assert any(v == f"mock-certs:{cert_dir}" for v in mock["volumes"])
    sidecar_mounts = {v.split(":")[0]: v.split(":")[1] for v in LLMTAP_SERVICES["llmtap"]["volumes"]}
    hint = re.search(r"LLMTAP_UPSTREAM_CA=(\S+)", (ROOT / "docker-compose.yml").read_text())
    assert hint and hint.group(1) == f"{sidecar_mounts['mock-certs']}/{ca.name}"


def test_the_documented_docker_run_starts_in_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/deploy.md's `docker run … llmtap run …`: the image's ENV plus its -e flags, parsed by llmtap."""
    import shlex

    from llmtap.app import RunConfig, check_exposure
    from llmtap.cli.parser import build_parser
    from llmtap.config import Environment

    doc = (ROOT / "docs" / "deploy.md").read_text()
    block = doc.split("## `docker run`", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    run = next(line for line in block.splitlines() if line.startswith("docker run "))
    argv = shlex.split(run.replace('"$(openssl rand -hex 16)"', "tok"))
    image_at = next(i for i, a in enumerate(argv) if a == "llmtap" and argv[i + 1 : i + 2] == ["run"])
    flags, command = argv[2:image_at], argv[image_at + 1 :]
    env = dict(image_env())
    for i, flag in enumerate(flags):
        if flag == "-e":
            k, _, v = flags[i + 1].partition("=")
            env[k] = v
    volumes = [flags[i + 1] for i, f in enumerate(flags) if f == "-v"]
    assert any(v.endswith(":" + env["LLMTAP_DATA_DIR"]) for v in volumes)  # the data dir is the volume
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    environment = Environment.read()
    cfg = RunConfig.from_flags(build_parser(environment).parse_args(command), environment)
    check_exposure(cfg)
    published = {p.rsplit(":", 1)[1] for i, f in enumerate(flags) if f == "-p" for p in [flags[i + 1]]}
    assert published == {str(cfg.listen[1]), str(cfg.admin[1])}
    assert "docker cp llmtap:/data/ca-bundle.pem" in block
