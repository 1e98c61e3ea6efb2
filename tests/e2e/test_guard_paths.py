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


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    return subprocess.run([*LLMTAP, "sql", *args, "--format", "TSV"], capture_output=True, timeout=120, env=env)


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


def test_apply_reads_no_secret_through_llmtap_sql(target: Target) -> None:
    """``llmtap sql`` through the sidecar, and — on the server store — on the store itself (``--admin ''``)."""
    sc = target.sc
    routes = [("--admin", f"127.0.0.1:{sc.admin}", "--admin-token", sc.token)]
    if target.store:
        routes.append(("--store", target.store, "--admin", ""))
    secrets = secrets_of(sc)
    for route in routes:
        ok = _cli(HARMLESS, *route)
        assert ok.returncode == 0 and ok.stdout.strip() == b"42", (route, ok.stderr)
        for q in attacks(sc):
            r = _cli(q, *route)
            assert r.returncode != 0 and b"not allowed" in r.stderr, (route, q, r.stdout[:300], r.stderr[:300])
            assert not any(s in r.stdout + r.stderr for s in secrets), (route, q)


def test_apply_reads_no_secret_from_the_embedded_store_opened_by_llmtap_sql(mock: Mock, tmp_path: Path) -> None:
    """``llmtap sql --data-dir`` with no sidecar running opens the embedded store itself: the same guard."""
    sc = start_sidecar(tmp_path / "data", mock)
    stop(sc.proc)
    route = ("--data-dir", str(sc.data_dir))
    ok = _cli(HARMLESS, *route)
    assert ok.returncode == 0 and ok.stdout.strip() == b"42", ok.stderr
    secrets = [s for s in secrets_of(sc) if s != PLANTED.encode()]
    for q in attacks(sc):
        r = _cli(q, *route)
        assert r.returncode != 0 and b"not allowed" in r.stderr, (q, r.stdout[:300], r.stderr[:300])
        assert not any(s in r.stdout for s in secrets), q
