"""`llmtap explain-cost` / `explain-latency` as a user runs them, on `llmtap seed --scenario explain`: from the
data dir, through a running sidecar's admin API, and from a ClickHouse server store.

The expected drivers and their sizes come from the scenario's planted changes (llmtap.testing.scenarios), computed
here from the seeded calls themselves, not from llmtap's output.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, ClickHouseHTTP, Sidecar, free_port, start_sidecar, stop

from llmtap.testing import scenarios

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    data = tmp_path_factory.mktemp("explain") / "data"
    before = time.time()
    r = cli("seed", "--data-dir", str(data), "--calls", "0", "--scenario", "explain")
    assert r.returncode == 0, r.stderr
    return data, (before + time.time()) / 2


def expected(end: float) -> tuple[float, dict[tuple[str, str], float]]:
    """Per (driver, feature) of the planted changes: what the change costs, from the seeded calls' own costs."""
    recs = list(scenarios.explain_records(end))
    day = 86400

    def cost(feature: str, window: bool, first_attempts: bool) -> float:
        lo, hi = (end - day, end) if window else (end - 8 * day, end - day)
        total = sum(
            r.cost_usd or 0
            for r in recs
            if r.feature == feature and lo <= r.timestamp < hi and (r.attempt == 1 or not first_attempts)
        )
        return total if window else total / 7

    # a "new" feature's driver is the cost of its first attempts (its retries are the "retries" driver)
    out = {(d, f): cost(f, True, d == "new") - cost(f, False, d == "new") for d, f in scenarios.EXPECTED_ORDER}
    total = (
        sum(r.cost_usd or 0 for r in recs if r.timestamp >= end - day)
        - sum(r.cost_usd or 0 for r in recs if r.timestamp < end - day) / 7
    )
    return total, out


def check_cost_json(res: dict[str, Any], end: float) -> None:
    total, want = expected(end)
    assert res["delta_usd"] == pytest.approx(total, rel=0.01)
    drivers = res["drivers"]
    assert sum(d["delta_usd"] for d in drivers) == pytest.approx(res["delta_usd"], rel=0.01)
    top = [(d["driver"], d["key"]["feature"]) for d in drivers[: len(want)]]
    assert top == scenarios.EXPECTED_ORDER  # the right drivers, in the right order
    for d in drivers[: len(want)]:
        assert d["delta_usd"] == pytest.approx(want[(d["driver"], d["key"]["feature"])], rel=0.01)
    assert all(abs(d["delta_usd"]) < 0.01 * abs(total) for d in drivers[len(want) :])  # nothing else moved
    otpc = drivers[0]
    assert (otpc["before"], otpc["after"]) == (400, 1000) and otpc["detail"] == "since prompt_version v7"
    assert res["window"]["seconds"] == 86400 and res["baseline"]["averaged_over"] == 7


def test_explain_cost_from_the_data_dir(seeded: tuple[Path, float]) -> None:
    data, end = seeded
    r = cli("explain-cost", "--window", "24h", "--baseline", "7d", "--format", "json", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    check_cost_json(json.loads(r.stdout), end)
    text = cli("explain-cost", "--window", "24h", "--baseline", "7d", "--data-dir", str(data))
    assert text.returncode == 0, text.stderr
    head = text.stdout.splitlines()[1]
    total, want = expected(end)
    res = json.loads(r.stdout)
    assert head.startswith(f"+${total:.2f} ({total / res['baseline_cost_usd'] * 100:+.0f}%): ")
    for phrase in (
        "summarize output tokens per call ×2.5 (400 → 1,000) since prompt_version v7 +$4.50",
        "chat volume +30% (1,000 → 1,300 calls) +$1.65",
        "search cache hit ratio 80% → 5% +$0.81",
        # issue #27: an audio-share change and a tool-fee change, each named as its own driver
        f"voice modality mix: audio/image cost factor ×2.04 → ×4.92 +${want[('modality_mix', 'voice')]:.2f}",
        f"research server tool fees per call $0.01 → $0.03 +${want[('tool_calls', 'research')]:.2f}",
    ):
        assert phrase in head, (phrase, head)
    assert f"agent new +${want[('new', 'agent')]:.2f}" not in head  # the sixth: in the table, not the summary
    assert any(line.startswith("new ") and "/agent" in line for line in text.stdout.splitlines())


def test_explain_latency_names_ttfb_not_decode(seeded: tuple[Path, float]) -> None:
    data, end = seeded
    r = cli("explain-latency", "--format", "json", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    openai = [f for f in res["findings"] if f["server_address"] == "api.openai.com"]
    assert [f["component"] for f in openai] == ["ttfb"]
    hour = scenarios.regression_hour(end)
    assert openai[0]["from"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(hour))
    text = cli("explain-latency", "--data-dir", str(data)).stdout
    line = next(x for x in text.splitlines() if "api.openai.com" in x)
    assert "TTFB p95 ×" in line and time.strftime("%H:00–", time.gmtime(hour)) in line
    assert line.endswith("decode unchanged") and "decode length" not in line


@pytest.fixture(scope="module")
def sidecar_on_seed(seeded: tuple[Path, float]) -> Iterator[Sidecar]:
    sc = start_sidecar(seeded[0], None)
    yield sc
    stop(sc.proc)


def test_explain_through_the_admin_api(seeded: tuple[Path, float], sidecar_on_seed: Sidecar) -> None:
    admin = ("--admin", f"127.0.0.1:{sidecar_on_seed.admin}")
    r = cli("explain-cost", "--format", "json", *admin, "--data-dir", str(seeded[0]))  # the install's token
    assert r.returncode == 0, r.stderr
    check_cost_json(json.loads(r.stdout), seeded[1])
    r = cli("explain-latency", "--metric", "ttft", "--quantile", "p95", *admin, "--admin-token", sidecar_on_seed.token)
    assert r.returncode == 0, r.stderr
    assert "TTFT p95" in r.stdout and "api.openai.com" in r.stdout
    r = cli("explain-cost", *admin, "--admin-token", "wrong")  # without the token: one line saying where it is
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "admin token" in r.stderr and "--data-dir" in r.stderr and "--admin-token" in r.stderr


def test_explain_from_a_clickhouse_server_store(tmp_path: Path) -> None:
    ch = ClickHouseHTTP(tmp_path / "ch", free_port()).start()
    try:
        before = time.time()
        r = cli("seed", "--store", ch.url, "--calls", "0", "--scenario", "explain")
        assert r.returncode == 0, r.stderr
        end = (before + time.time()) / 2
        r = cli("explain-cost", "--format", "json", "--store", ch.url, "--admin", "")
        assert r.returncode == 0, r.stderr
        check_cost_json(json.loads(r.stdout), end)
        r = cli("explain-latency", "--store", ch.url, "--admin", "")
        assert r.returncode == 0, r.stderr
        assert "TTFB p95" in r.stdout
    finally:
        ch.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "abc"], "--window"),
        (["--baseline", "weekly"], "--baseline takes 'previous' or a number of days"),
        (["--window", "2d", "--baseline", "7d"], "--window must be ≤ 1d"),
        (["--by", "color"], "--by takes"),
        (["--end", "yesterday"], "--end takes unix seconds or an ISO time"),
    ],
)
def test_bad_input_is_one_line(seeded: tuple[Path, float], args: list[str], message: str) -> None:
    r = cli("explain-cost", "--data-dir", str(seeded[0]), *args)
    assert r.returncode != 0 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
