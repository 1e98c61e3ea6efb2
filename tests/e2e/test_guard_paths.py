"""Issue #26, finding 1 (High): ``SELECT * APPLY(file) FROM (SELECT '<data-dir>/ca/…' AS x)`` returned the CA private
key (and the install secret, the admin token, ``/proc/self/environ``) through every read path, on both stores.

Every read path is tried — ``POST /api/sql`` with the token, the same with the viewer's session cookie, ``llmtap sql``
through the sidecar and ``llmtap sql`` on the store itself — on the embedded store and on a ClickHouse server store
(``llmtap.testing.chhttp``), with the shapes that name a function without calling it in the syntax tree: an
``APPLY`` transformer (bare, in ``COLUMNS``, qualified), a function reference (``arrayMap(file, …)``) and a bare
identifier (``SELECT user``). A harmless ``APPLY`` runs on each path, so a refusal is the guard's, not the path's.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import LLMTAP, ClickHouseHTTP, Mock, Sidecar, free_port, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
PLANTED = "sk-proj-PlantedApplySecret0123456789abcdefXYZ"


@dataclass
class Target:
    sc: Sidecar
    store: str  # the clickhouse:// URL of a server store, '' for the embedded one


@pytest.fixture(scope="module", params=["embedded", "clickhouse"])
def target(request: pytest.FixtureRequest, mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp(f"apply-{request.param}")
    ch = None
    extra: tuple[str, ...] = ()
    if request.param == "clickhouse":
        ch = ClickHouseHTTP(root / "ch", free_port()).start()
        extra = ("--store", ch.url)
    sc = start_sidecar(root / "data", mock, *extra, env={"OPENAI_API_KEY": PLANTED})
    yield Target(sc, ch.url if ch else "")
    stop(sc.proc)
    if ch is not None:
        ch.stop()


def secrets_of(sc: Sidecar) -> list[bytes]:
    ca_key = (sc.data_dir / "ca" / "mitmproxy-ca.pem").read_text()
    key_line = next(line for line in ca_key.splitlines() if line and "-----" not in line)
    return [
        key_line.encode(),
        (sc.data_dir / "install-secret").read_bytes()[:16],
        (sc.data_dir / "admin-token").read_text().strip().encode(),
        PLANTED.encode(),
    ]


def attacks(sc: Sidecar) -> list[str]:
    d = sc.data_dir
    paths = [f"{d}/ca/mitmproxy-ca.pem", f"{d}/install-secret", f"{d}/admin-token", "/proc/self/environ"]
    out = []
    for p in paths:
        out += [
            f"SELECT * APPLY(file) FROM (SELECT '{p}' AS x)",
            f"SELECT * APPLY file FROM (SELECT '{p}' AS x)",
            f"SELECT COLUMNS('x') APPLY(file) FROM (SELECT '{p}' AS x)",
            f"SELECT t.* APPLY(`file`) FROM (SELECT '{p}' AS x) AS t",
            f"SELECT arrayMap(file, ['{p}'])",
        ]
    return [*out, "SELECT user", "SELECT * APPLY(toString) APPLY(getSetting) FROM (SELECT 'readonly' AS x)"]


HARMLESS = "SELECT * APPLY(toString) FROM (SELECT 41 + 1 AS x)"


def _post(sc: Sidecar, query: str, headers: dict[str, str]) -> tuple[int, bytes]:
    body = json.dumps({"query": query, "format": "TSV"}).encode()
    return sc.admin_request("POST", "/api/sql", body, {"Content-Type": "application/json", **headers})


def _cookie(sc: Sidecar) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", sc.admin, timeout=10)
    conn.request("POST", "/api/login", json.dumps({"token": sc.token}), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    cookie = (resp.getheader("Set-Cookie") or "").split(";", 1)[0]
    conn.close()
    assert resp.status == 204 and cookie
    return cookie


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*LLMTAP, "sql", *args, "--format", "TSV"], capture_output=True, timeout=120, env=_env())


# ``llmtap sql`` once per probe, all in one process: what ``python -m llmtap sql …`` runs (``llmtap.cli.main`` with
# the argv, the environment read by it), each probe with its own exit code and its own stdout and stderr, taken at
# the file descriptors (what the engine or a library writes there is seen too). A process per probe spent ~1 CPU-s
# on imports and start-up each; the probes are what is under test, and each still takes the whole command path.
_PROBES = """
import json, os, sys, tempfile, traceback
from llmtap.cli import main
out, probes = sys.argv[1], json.loads(sys.stdin.read())
results = []
for argv in probes:
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(o.fileno(), 1); os.dup2(e.fileno(), 2)
        try:
            rc = main(argv)
        except SystemExit as x:
            rc = x.code if isinstance(x.code, int) else 1
        except BaseException:
            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
        o.seek(0); e.seek(0)
        results.append([rc, o.read().decode("latin-1"), e.read().decode("latin-1")])
with open(out, "w") as f:
    json.dump(results, f)
"""


@dataclass
class Probe:
    returncode: int
    stdout: bytes
    stderr: bytes


def _cli_each(queries: list[str], *args: str, tmp: Path) -> list[Probe]:
    """``llmtap sql QUERY *args --format TSV`` for each query, in one process (:data:`_PROBES`)."""
    argv = [["sql", q, *args, "--format", "TSV"] for q in queries]
    out = tmp / "probes.json"
    run = subprocess.run(
        [sys.executable, "-c", _PROBES, str(out)], input=json.dumps(argv).encode(), capture_output=True, timeout=300,
        env=_env(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    results = json.loads(out.read_text())
    assert len(results) == len(queries)
    return [Probe(rc, o.encode("latin-1"), e.encode("latin-1")) for rc, o, e in results]


def test_apply_reads_no_secret_through_the_api_with_the_token(target: Target) -> None:
    sc = target.sc
    bearer = {"Authorization": f"Bearer {sc.token}"}
    status, out = _post(sc, HARMLESS, bearer)
    assert status == 200 and out.strip() == b"42", out
    secrets = secrets_of(sc)
    for q in attacks(sc):
        status, out = _post(sc, q, bearer)
        assert status == 403 and b"not allowed" in out, (q, status, out[:300])
        assert not any(s in out for s in secrets), q


def test_apply_reads_no_secret_with_the_viewer_cookie(target: Target) -> None:
    sc = target.sc
    cookie = {"Cookie": _cookie(sc)}
    status, out = _post(sc, HARMLESS, cookie)
    assert status == 200 and out.strip() == b"42", out
    secrets = secrets_of(sc)
    for q in attacks(sc):
        status, out = _post(sc, q, cookie)
        assert status == 403, (q, status, out[:300])
        assert not any(s in out for s in secrets), q


def test_apply_reads_no_secret_through_llmtap_sql(target: Target, tmp_path: Path) -> None:
    """``llmtap sql`` through the sidecar, and — on the server store — on the store itself (``--admin ''``)."""
    sc = target.sc
    routes = [("--admin", f"127.0.0.1:{sc.admin}", "--admin-token", sc.token)]
    if target.store:
        routes.append(("--store", target.store, "--admin", ""))
    secrets = secrets_of(sc)
    for route in routes:
        ok = _cli(HARMLESS, *route)  # the command as a process of its own
        assert ok.returncode == 0 and ok.stdout.strip() == b"42", (route, ok.stderr)
        queries = [HARMLESS, *attacks(sc)]
        harmless, *results = _cli_each(queries, *route, tmp=tmp_path)
        assert harmless.returncode == 0 and harmless.stdout.strip() == b"42", (route, harmless.stderr)
        for q, r in zip(queries[1:], results, strict=True):
            assert r.returncode != 0 and b"not allowed" in r.stderr, (route, q, r.stdout[:300], r.stderr[:300])
            assert not any(s in r.stdout + r.stderr for s in secrets), (route, q)


def test_apply_reads_no_secret_from_the_embedded_store_opened_by_llmtap_sql(mock: Mock, tmp_path: Path) -> None:
    """``llmtap sql --data-dir`` with no sidecar running opens the embedded store itself: the same guard."""
    sc = start_sidecar(tmp_path / "data", mock)
    stop(sc.proc)
    route = ("--data-dir", str(sc.data_dir))
    ok = _cli(HARMLESS, *route)  # the command as a process of its own
    assert ok.returncode == 0 and ok.stdout.strip() == b"42", ok.stderr
    secrets = [s for s in secrets_of(sc) if s != PLANTED.encode()]
    queries = [HARMLESS, *attacks(sc)]
    harmless, *results = _cli_each(queries, *route, tmp=tmp_path)
    assert harmless.returncode == 0 and harmless.stdout.strip() == b"42", harmless.stderr
    for q, r in zip(queries[1:], results, strict=True):
        assert r.returncode != 0 and b"not allowed" in r.stderr, (q, r.stdout[:300], r.stderr[:300])
        assert not any(s in r.stdout for s in secrets), q
