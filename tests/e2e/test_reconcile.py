"""``llmtap reconcile`` against a real ``llmtap run``: calls made with the official SDKs, then the
provider's cost report (a file in the documented shape, or fetched page by page with an admin key
from the mock's cost-report routes) compared per day and model."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anthropic
import pytest
from genai_prices import Usage, calc_price
from helpers import LLMTAP, Mock, Sidecar, openai_client, session_id, start_sidecar, stop

from llmtap.testing.mock.billing import OPENAI_PAGES

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def rec(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = start_sidecar(tmp_path_factory.mktemp("reconcile") / "data", mock)
    yield sc
    stop(sc.proc)


def reconcile(sc: Sidecar, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *LLMTAP,
            "reconcile",
            "--admin",
            f"127.0.0.1:{sc.admin}",
            "--data-dir",
            str(sc.data_dir),
            "--format",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_anthropic_cost_file_tracked_vs_billed_and_min_capture(rec: Sidecar, tmp_path: Path) -> None:
    sid = session_id()
    import ssl

    client = anthropic.Anthropic(
        api_key="sk-ant-test-reconcile",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(
            proxy=rec.proxy_url, verify=ssl.create_default_context(cafile=str(rec.bundle))
        ),
        default_headers={"x-llmtap-session": sid},
    )
    expected = 0.0
    for _ in range(2):
        u = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
        ).usage
        cr, cw = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
        usage = Usage(
            input_tokens=u.input_tokens + cr + cw,
            cache_read_tokens=cr,
            cache_write_tokens=cw,
            output_tokens=u.output_tokens,
        )
        expected += float(calc_price(usage, "claude-sonnet-4-5", provider_id="anthropic").total_price)
    rec.rows(f"session_id = '{sid}'", 2, timeout=10)
    # The documented cost_report shape (tests/unit/cli/fixtures/billing/anthropic_cost_report.json) for today,
    # billing what the two calls cost at list price divided by 0.95: llmtap saw 95% of the spend.
    doc = json.loads((Path(__file__).parents[1] / "unit/cli/fixtures/billing/anthropic_cost_report.json").read_text())
    day = int(time.time()) // 86400 * 86400
    bucket = doc["data"][0]
    bucket["starting_at"] = datetime.fromtimestamp(day, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    bucket["ending_at"] = datetime.fromtimestamp(day + 86400, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    bucket["results"][0].update(model="claude-sonnet-4-5-20250929", amount=f"{expected / 0.95 * 100:.8f}")
    costs = tmp_path / "cost_report.json"
    costs.write_text(json.dumps(doc))

    ok = reconcile(rec, "--provider", "anthropic", "--costs", str(costs), "--min-capture", "0.9")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    (row,) = [r for r in out["rows"] if r["model"] == "claude-sonnet-4-5"]
    assert row["billed_usd"] == pytest.approx(expected / 0.95) and row["tracked_usd"] >= expected * 0.999
    assert out["capture"] == pytest.approx(row["tracked_usd"] / (expected / 0.95))

    low = reconcile(rec, "--provider", "anthropic", "--costs", str(costs), "--min-capture", "0.99")
    assert low.returncode == 1 and "below --min-capture" in low.stderr

    text = subprocess.run(
        [
            *LLMTAP,
            "reconcile",
            "--admin",
            f"127.0.0.1:{rec.admin}",
            "--data-dir",
            str(rec.data_dir),
            "--provider",
            "anthropic",
            "--costs",
            str(costs),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "claude-sonnet-4-5" in text.stdout and "tracked_usd" in text.stdout and "capture" in text.stdout


def test_openai_admin_key_fetches_every_page(rec: Sidecar, tmp_path: Path) -> None:
    """With an admin key (--admin-key-file: never on the command line), llmtap fetches the organization costs
    itself (through the sidecar, as any client would: HTTPS_PROXY and its CA bundle), following next_page; the
    mock bills yesterday and today (llmtap.testing.mock.billing) while llmtap only saw today's gpt-4o call."""
    sid = session_id()
    openai_client(rec).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-llmtap-session": sid}
    )
    rec.rows(f"session_id = '{sid}'", 1, timeout=10)
    env = {"HTTPS_PROXY": rec.proxy_url, "SSL_CERT_FILE": str(rec.bundle)}
    key = tmp_path / "admin-key"
    key.write_text("sk-admin-test\n")
    res = reconcile(rec, "--provider", "openai", "--admin-key-file", str(key), "--since", "2d", env=env)
    assert res.returncode == 1, res.stderr  # yesterday's spend was never seen: capture far below 0.9
    out = json.loads(res.stdout)
    billed = {r["model"]: r["billed_usd"] for r in out["rows"] if r["billed_usd"]}
    assert billed == {
        "gpt-4o-mini": pytest.approx(sum(v for _, v in OPENAI_PAGES[0])),
        "gpt-4o": pytest.approx(sum(v for _, v in OPENAI_PAGES[1])),
    }
    today = [r for r in out["rows"] if r["model"] == "gpt-4o"]
    assert today and today[0]["calls"] >= 1 and today[0]["tracked_usd"] > 0


def test_no_cost_data_has_its_own_exit_code(rec: Sidecar, tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"object": "page", "data": [], "has_more": False, "next_page": None}))
    res = reconcile(rec, "--provider", "openai", "--costs", str(empty))
    assert res.returncode == 3 and "no costs" in res.stderr
    bad = reconcile(rec, "--provider", "openai", "--costs", str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "cannot read" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
