"""The kept-alive suite in transparent mode, beside the regular mode in the same run (``bench/run.py --transparent``).

As root, in a pod built in network namespaces (:mod:`llmtap.testing.netns`: the client and two sidecars in
one namespace, the mock provider on port 443 in another, across a veth pair), two identical sidecars but
for ``--mode``: one the client reaches with CONNECT (``HTTPS_PROXY``, the regular mode), one that the
client's connections to ``api.openai.com:443`` are redirected to by ``llmtap netfilter apply`` (transparent
mode). The same kept-alive throughput rounds and stream suite as the main run, alternating between the two;
the ratio transparent / regular is the number (both cross the same veth to the same origin). Skipped, with
the reason, where a pod cannot be built (not root, no ``ip netns`` or ``nft``).
"""

from __future__ import annotations

import socket
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clients import HOST, Path_, close_pool
from llmtap.testing import netns
from llmtap.testing.harness import stop
from llmtap.testing.rawclient import tls_socket

REGULAR = "llmtap regular mode (CONNECT), in the pod"
TRANSPARENT = "llmtap transparent mode (redirected), in the pod"


def _regular(sc: netns.PodSidecar) -> Path_:
    ca = sc.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    p = Path_(REGULAR, ("127.0.0.1", sc.listen), ca, sc.proc.pid)
    p.opener = lambda: netns.in_netns(sc.ns, lambda: tls_socket(HOST, 443, ca, ("127.0.0.1", sc.listen)))
    return p


def _transparent(sc: netns.PodSidecar) -> Path_:
    ca = sc.data_dir / "ca" / "mitmproxy-ca-cert.pem"

    def connect() -> socket.socket:  # to the origin's address, as the app would: the rules send it to llmtap
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx.wrap_socket(socket.create_connection((netns.ORIGIN_IP, 443), timeout=60), server_hostname=HOST)

    p = Path_(TRANSPARENT, None, ca, sc.proc.pid)
    p.opener = lambda: netns.in_netns(sc.ns, connect)
    return p


def transparent_suite(
    tmp: Path, quick: bool, throughput_rounds: Callable[..., Any], stream_suite: Callable[..., Any], kept: Any
) -> dict[str, Any]:
    why = netns.unavailable()
    if why:
        print(f"transparent suite skipped: {why}", file=sys.stderr)
        return {"skipped": why}
    out: dict[str, Any] = {"throughput": []}
    with netns.pod(tmp / "pod-mock") as pod:
        regular = netns.start_pod_sidecar(pod, tmp / "pod-regular", mode="regular")
        transparent = netns.start_pod_sidecar(pod, tmp / "pod-transparent", mode="transparent")
        try:
            paths = [_regular(regular), _transparent(transparent)]
            print("transparent suite: streams…", file=sys.stderr)
            out["streams"] = stream_suite(paths, 2 if quick else 25, 8 if quick else 64)
            for conc in (32, 128):
                c = min(conc, 8) if quick else conc
                per_round = 8 if quick else max(conc * 2, 256)
                for name, (rate, cpu) in throughput_rounds(paths, kept, c, per_round, 2 if quick else 5).items():
                    out["throughput"].append([name, conc, rate, cpu])
            for p in paths:
                close_pool(p)
        finally:
            pod.netfilter("remove")
            stop(transparent.proc)
            stop(regular.proc)
    return out


def section(r: dict[str, Any]) -> list[str]:
    """The report's section (empty when the suite did not run)."""
    t = r.get("transparent")
    if not t:
        return []
    out = ["", "## Transparent mode beside the regular mode (kept-alive connections, in a pod)", ""]
    if "skipped" in t:
        return [*out, f"Not measured in this run: {t['skipped']}."]
    out += [
        "Two identical sidecars in one network namespace but for `--mode`; the client reaches one with CONNECT "
        "and the other through `llmtap netfilter apply`'s redirect, the mock provider across a veth pair in "
        "another namespace (`bench/transparent.py`). Alternating rounds; ratio = transparent / regular.",
        "",
        "| concurrency | regular streams/s | transparent streams/s | ratio | regular CPU s / 100 | "
        "transparent CPU s / 100 | CPU ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {(name, conc): (rate, cpu) for name, conc, rate, cpu in t["throughput"]}
    for conc in sorted({conc for _, conc, _, _ in t["throughput"]}):
        (rr, rc), (tr, tc) = by[(REGULAR, conc)], by[(TRANSPARENT, conc)]
        cpu_ratio = f"{tc / rc:.2f}" if rc and tc else "-"
        out.append(f"| {conc} | {rr:.1f} | {tr:.1f} | {tr / rr:.2f} | {rc or 0:.2f} | {tc or 0:.2f} | {cpu_ratio} |")
    s = t.get("streams", {})
    if REGULAR in s and TRANSPARENT in s:
        reg, tra = s[REGULAR], s[TRANSPARENT]
        out += [
            "",
            "| stream suite | TTFT p50 (ms) | TTFT p99 | per-delta delay p50 (ms) | p99 |",
            "|---|---|---|---|---|",
            *(
                f"| {name} | {x['ttft_p50']:.1f} | {x['ttft_p99']:.1f} | {x['delta_p50']:.2f} | {x['delta_p99']:.2f} |"
                for name, x in ((REGULAR, reg), (TRANSPARENT, tra))
            ),
        ]
    return out
