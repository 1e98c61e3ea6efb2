"""``llmtap netfilter``: the rules it writes (nft's own syntax, checked by nft where it is installed), its
refusals as one line, and ``--mode``'s reading."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from llmtap.cli import main
from llmtap.cli.netfilter import Rules, remove_script
from llmtap.config import Environment
from llmtap.errors import UsageError
from llmtap.options import ProxyMode, proxy_mode


def test_rules_redirect_https_of_everyone_but_llmtap() -> None:
    script = Rules(15001, uid=1337).script()
    assert script.startswith(remove_script())  # replaces an earlier table: a second apply is the same as one
    lines = [line.strip() for line in script.splitlines()]
    assert "meta skuid 1337 return" in lines and not any("skgid" in line for line in lines)
    assert "ip daddr 127.0.0.0/8 return" in lines
    assert lines.index("meta skuid 1337 return") < lines.index("meta l4proto tcp tcp dport 443 redirect to :15001")
    assert "meta l4proto tcp tcp dport { 80, 443 } redirect to :15001" in Rules(15001, gid=7, http=True).script()


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft not installed")
def test_nft_parses_the_rules() -> None:
    # --check parses and validates the whole transaction against the kernel without committing it
    r = subprocess.run(["nft", "--check", "-f", "-"], input=Rules(15001, 1, 2, True).script(), capture_output=True,
                       text=True)  # fmt: skip
    if r.returncode != 0 and "Operation not permitted" in r.stderr:
        pytest.skip("nft --check needs CAP_NET_ADMIN")
    assert r.returncode == 0, r.stderr


def one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv), Environment.of({})) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_refusals_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert "needs --uid or --gid" in one_line(capsys, "netfilter", "apply", "--port", "15001")
    assert "--uid takes a number" in one_line(capsys, "netfilter", "apply", "--uid", "root")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "nft not found" in one_line(capsys, "netfilter", "remove")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/sbin/nft")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr("llmtap.cli.netfilter.may_admin_network", lambda: False)
    assert "needs root or CAP_NET_ADMIN" in one_line(capsys, "netfilter", "remove")


def test_dry_run_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["netfilter", "apply", "--port", "9", "--gid", "5", "--dry-run"], Environment.of({})) == 0
    assert capsys.readouterr().out == Rules(9, gid=5).script()


def test_mode_reads() -> None:
    assert proxy_mode("transparent") == ProxyMode("transparent")
    assert proxy_mode("local") == ProxyMode("local")
    assert proxy_mode("local:curl,python3") == ProxyMode("local", "curl,python3")
    assert str(ProxyMode("local", "curl")) == "local:curl"
    for bad in ("reverse:https://x", "transparent:x", "local:", "wireguard"):
        with pytest.raises(ValueError, match="regular, transparent or local"):
            proxy_mode(bad)
    err = ""
    try:
        from llmtap.cli.parser import build_parser
        from llmtap.config import RunConfig

        RunConfig.from_flags(build_parser(Environment.of({})).parse_args(["run", "--mode", "tun"]), Environment.of({}))
    except UsageError as e:
        err = str(e)
    assert err.startswith("--mode takes regular, transparent or local")
