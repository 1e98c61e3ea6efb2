"""``llmtap netfilter apply|remove``: the rules that send a pod's (or a host's) outbound HTTPS to the sidecar.

``apply`` writes one nftables table, ``ip llmtap``: in the ``output`` NAT hook, every TCP connection to
port 443 (and 80 with ``--http``) that a process opens is redirected to ``llmtap run --mode transparent``'s
port on this machine, except connections of llmtap's own user or group (``--uid`` / ``--gid``, matched on
the socket's owner: llmtap's upstream connections must leave, not come back to it) and connections to
loopback. ``remove`` deletes the table. Both are idempotent and atomic (one ``nft -f`` transaction each:
the table is created, deleted and written again, so a second ``apply`` replaces the first).

What happens while the rules are present and llmtap is not listening (stopped, killed, restarting): the
redirected connections are refused at once (the kernel answers the SYN with a reset: clients fail fast,
nothing hangs), and the rest of the traffic is untouched. nftables has no "redirect only while this port
listens": restoring direct traffic is ``llmtap netfilter remove`` (or the pod's end: the rules live in its
network namespace and go with it). docs/kubernetes.md says how a pod is set up.

IPv4 only: IPv6 connections are not redirected (not captured, not broken).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from ..config import Environment
from ..errors import LlmtapError
from .parser import Commands

TABLE = "llmtap"
CAP_NET_ADMIN = 12


class NetfilterError(LlmtapError):
    """The rules could not be written or removed (not root, no ``nft``, the kernel refused)."""


@dataclass(frozen=True)
class Rules:
    """What ``apply`` redirects: outbound TCP 443 (and 80) to ``port``, but llmtap's own uid/gid."""

    port: int
    uid: int | None = None
    gid: int | None = None
    http: bool = False

    def ports(self) -> str:
        return "{ 80, 443 }" if self.http else "443"

    def script(self) -> str:
        """The ``nft -f`` transaction that (re)writes the table."""
        own = [f"meta skuid {self.uid} return"] if self.uid is not None else []
        own += [f"meta skgid {self.gid} return"] if self.gid is not None else []
        body = "\n".join(
            [
                "    type nat hook output priority -100; policy accept;",
                *(f"    {rule}" for rule in own),
                "    ip daddr 127.0.0.0/8 return",
                f"    meta l4proto tcp tcp dport {self.ports()} redirect to :{self.port}",
            ]
        )
        return f"{remove_script()}table ip {TABLE} {{\n  chain output {{\n{body}\n  }}\n}}\n"


def remove_script() -> str:
    """Deleting a table that may not exist: create it (a no-op if it does), then delete it."""
    return f"add table ip {TABLE}\ndelete table ip {TABLE}\n"


def may_admin_network() -> bool:
    """Root, or CAP_NET_ADMIN in the effective set (an init container given only that capability)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            caps = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
        return bool(int(caps, 16) >> CAP_NET_ADMIN & 1)
    except (OSError, ValueError):
        return False


def run_nft(script: str) -> None:
    nft = shutil.which("nft")
    if nft is None:
        raise NetfilterError("nft not found: install nftables (apt-get install nftables) or use the llmtap image")
    if not may_admin_network():
        raise NetfilterError("needs root or CAP_NET_ADMIN to change the netfilter rules (run it as root)")
    r = subprocess.run([nft, "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        why = " ".join((r.stderr or r.stdout).split())[:300]
        raise NetfilterError(f"nft refused the rules: {why or f'exit {r.returncode}'}")


def register(commands: Commands) -> None:
    nf = commands.add(
        "netfilter",
        cmd_netfilter,
        "apply or remove the nftables rules redirecting outbound HTTPS to `llmtap run --mode transparent`",
    )
    nf.add_argument("action", choices=("apply", "remove"))
    commands.flag(nf, "--port", "8080", help="the port `llmtap run --mode transparent --listen` listens on")
    commands.flag(nf, "--uid", "", help="llmtap's user id: its own connections are not redirected")
    commands.flag(nf, "--gid", "", help="llmtap's group id: its own connections are not redirected")
    nf.add_argument("--http", action="store_true", help="also redirect outbound TCP 80")
    nf.add_argument("--dry-run", action="store_true", help="print the nft script instead of running it")


def _number(text: str, flag: str, top: int) -> int | None:
    if text == "":
        return None
    if not text.isdigit() or int(text) > top:
        raise NetfilterError(f"{flag} takes a number from 0 to {top}, got {text!r}")
    return int(text)


def cmd_netfilter(args: argparse.Namespace, env: Environment) -> int:
    if args.action == "remove":
        script = remove_script()
    else:
        port = _number(str(args.port), "--port", 65535)
        uid, gid = _number(str(args.uid), "--uid", 2**32 - 2), _number(str(args.gid), "--gid", 2**32 - 2)
        if not port:
            raise NetfilterError("--port takes the port llmtap listens on (1-65535)")
        if uid is None and gid is None:
            raise NetfilterError(
                "needs --uid or --gid (llmtap's own user or group): its upstream connections must not be "
                "redirected back to it"
            )
        script = Rules(port, uid, gid, args.http).script()
    if args.dry_run:
        sys.stdout.write(script)
        return 0
    run_nft(script)
    print(f"llmtap netfilter: {'rules applied' if args.action == 'apply' else 'rules removed'} (table ip {TABLE})")
    return 0
