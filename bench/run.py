"""llmtap benchmark: side by side against direct, bare mitmproxy and (when installed) the LiteLLM proxy.

    .venv/bin/python bench/run.py --litellm bench/.litellm-venv/bin/litellm   # full run, writes docs/benchmarks.md
    .venv/bin/python bench/run.py --quick --out /tmp/b.md                     # seconds: the CI smoke run

Paths, all on 127.0.0.1 against the same local TLS origin (llmtap's mock provider, OpenAI SSE):
  (a) direct; (b) bare mitmproxy (mitmdump with an addon that only sets ``stream``); (c) llmtap, embedded
  store; (d) llmtap with an OTLP exporter and a ClickHouse-HTTP store; (e) llmtap's base-URL mode and
  (f) the LiteLLM proxy (``--litellm BIN``), both gateways reached by base URL over plain HTTP.
Suites: the stream suite (64 deltas 20 ms apart, kept-alive connections, every path); throughput and CPU
with kept-alive connections (the budget's mode) and with a new connection per stream (five alternating
rounds of max(2 x concurrency, 256) streams per path); latency with a new connection per stream; peak RSS
at 200 concurrent streams (each path's processes summed); store ingest, bytes per call, dashboard panels.
Rounds alternate between paths so machine drift cancels out; results are ratios and differences within
one run. Client, origin and proxies share the machine's cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import HOST, LITELLM_KEY, Path_, close_pool, cpu_seconds, fresh, kept, rss_mb
from llmtap.adapters.timing import percentile
from llmtap.testing.harness import Mock, free_port, start_chhttp, start_mock, start_sidecar, stop
from profiling import profile, py_spy
from report import (
    BARE,
    BASE_URL_PATH,
    DIRECT,
    EMBEDDED,
    LITELLM_PATH,
    SERVER,
    SERVER_ONLY,
    STREAM_EVENTS,
    STREAM_GAP_MS,
    render,
)
from stores import bytes_per_row, explains, ingest, panels
from transparent import section as transparent_section
from transparent import transparent_suite

ROOT = Path(__file__).resolve().parents[1]
__all__ = ["render"]
Stream = Callable[[Path_, int, int, str], tuple[float, list[float]]]


class OtlpSink(BaseHTTPRequestHandler):
    received = [0, 0]  # bytes, requests: the OTLP export's size on the wire

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        OtlpSink.received[0] += n
        OtlpSink.received[1] += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a: Any) -> None:
        pass


def start_bare(tmp: Path, mock: Mock) -> tuple[subprocess.Popen[bytes], Path_]:
    """Bare mitmproxy: mitmdump with an addon that only streams, verifying the origin as llmtap does."""
    bare_port = free_port()
    bare_dir = tmp / "bare"
    # Both proxies verify the origin against the same bundle (public roots + the origin's CA), as llmtap
    # does with --upstream-ca; each client trusts only its proxy's CA.
    from llmtap.intercept.ca import upstream_bundle

    (tmp / "shared").mkdir()
    trust = upstream_bundle(tmp / "shared", mock.ca)
    env = {**os.environ, "BENCH_CONNECT_TO": f"{HOST}:443:127.0.0.1:{mock.port}"}
    bare = subprocess.Popen(
        [
            shutil.which("mitmdump") or str(Path(sys.executable).with_name("mitmdump")),
            "-q",
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(bare_port),
            "-s",
            str(ROOT / "bench/bare_addon.py"),
            "--set",
            f"confdir={bare_dir}",
            "--set",
            f"ssl_verify_upstream_trusted_ca={trust}",
            "--set",
            "connection_strategy=lazy",
            "--allow-hosts",
            r"^api\.openai\.com:443$",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        if (bare_dir / "mitmproxy-ca-cert.pem").exists():
            break
        time.sleep(0.1)
    time.sleep(1.0)
    return bare, Path_(BARE, ("127.0.0.1", bare_port), bare_dir / "mitmproxy-ca-cert.pem", bare.pid)


def start_paths(
    tmp: Path, mock: Mock, litellm: str, sidecar_env: dict[str, str] | None = None
) -> tuple[list[Path_], list[Any]]:
    procs: list[Any] = []
    paths = [Path_(DIRECT, None, mock.ca, None, origin_port=mock.port)]
    bare, bare_path = start_bare(tmp, mock)
    procs.append(bare)
    paths.append(bare_path)
    sc = start_sidecar(tmp / "llmtap", mock, env=sidecar_env)
    procs.append(sc.proc)
    paths.append(Path_(EMBEDDED, ("127.0.0.1", sc.listen), sc.data_dir / "ca/mitmproxy-ca-cert.pem", sc.proc.pid))
    paths[-1].sidecar = sc
    paths.append(
        Path_(BASE_URL_PATH, None, mock.ca, sc.proc.pid, plain_port=sc.listen, plain_path="/openai/v1/chat/completions")
    )
    ch = start_chhttp(tmp / "ch")
    ch_port = ch.port
    assert ch.proc is not None
    procs.append(ch.proc)
    sink = ThreadingHTTPServer(("127.0.0.1", 0), OtlpSink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    procs.append(sink)
    sc2 = start_sidecar(
        tmp / "llmtap2",
        mock,
        "--store",
        f"clickhouse://default:@127.0.0.1:{ch_port}/llmtap",
        "--otlp-endpoint",
        f"http://127.0.0.1:{sink.server_address[1]}",
        env=sidecar_env,
    )
    procs.append(sc2.proc)
    paths.append(
        Path_(
            SERVER,
            ("127.0.0.1", sc2.listen),
            sc2.data_dir / "ca/mitmproxy-ca-cert.pem",
            sc2.proc.pid,
        )
    )
    paths[-1].sidecar = sc2
    # The server store alone (no OTLP exporter), for the footprint: the store and the exporter are separate options.
    sc3 = start_sidecar(
        tmp / "llmtap3", mock, "--store", f"clickhouse://default:@127.0.0.1:{ch_port}/llmtap", env=sidecar_env
    )
    procs.append(sc3.proc)
    store_only = Path_(SERVER_ONLY, ("127.0.0.1", sc3.listen), sc3.data_dir / "ca/mitmproxy-ca-cert.pem", sc3.proc.pid)
    store_only.rss_only, store_only.sidecar = True, sc3
    paths.append(store_only)
    if litellm:
        port = free_port()
        cfg = tmp / "litellm.yaml"
        cfg.write_text(f"""model_list:
  - model_name: gpt-4o
    litellm_params: {{model: openai/gpt-4o, api_base: "https://localhost:{mock.port}/v1", api_key: sk-x}}
litellm_settings: {{drop_params: true, telemetry: false}}
general_settings: {{forward_client_headers_to_llm_api: true}}
""")  # x-* headers reach the origin: the mock's pacing and send stamps, as for the other paths
        lenv = {
            **os.environ,
            "SSL_CERT_FILE": str(mock.ca),
            "REQUESTS_CA_BUNDLE": str(mock.ca),
            "LITELLM_LOG": "ERROR",
            "NO_DOCKER": "1",
            "LITELLM_MASTER_KEY": LITELLM_KEY,
        }
        ll = subprocess.Popen(
            [litellm, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
            env=lenv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(ll)
        for _ in range(600):
            if ll.poll() is not None:
                raise RuntimeError(f"the LiteLLM proxy exited with {ll.returncode} at start")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health/liveliness")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.25)
        paths.append(Path_(LITELLM_PATH, None, mock.ca, ll.pid, plain_port=port))
    return paths, procs


def _alternating(paths: list[Path_], r: int) -> list[Path_]:
    return paths if r % 2 == 0 else list(reversed(paths))


def stream_suite(paths: list[Path_], rounds: int, events: int = STREAM_EVENTS) -> dict[str, dict[str, float]]:
    """Kept-alive connections, ``events`` deltas 20 ms apart, each stamped with its send time in its text."""
    ttft: dict[str, list[float]] = {p.name: [] for p in paths}
    delays: dict[str, list[float]] = {p.name: [] for p in paths}
    for p in paths:  # warm-up: the kept connection, certificates, the gateways' first-call set-up
        kept(p, 3, 1, "")
    for r in range(rounds):
        for p in _alternating(paths, r):
            t, d = kept(p, events, STREAM_GAP_MS, "content")
            ttft[p.name].append(t)
            delays[p.name].extend(d)
    return {p.name: _quantiles(ttft[p.name], delays[p.name], "ttft", "delta") for p in paths}


def fresh_latency(paths: list[Path_], rounds: int) -> dict[str, dict[str, float]]:
    """A new connection (CONNECT + TLS) per stream: 20 events 20 ms apart, send times in SSE comments."""
    ttfe: dict[str, list[float]] = {p.name: [] for p in paths}
    delays: dict[str, list[float]] = {p.name: [] for p in paths}
    for p in paths:
        fresh(p, 3, 1)
    for r in range(rounds):
        for p in _alternating(paths, r):
            t, d = fresh(p, 20, 20, "1")
            ttfe[p.name].append(t)
            delays[p.name].extend(d)
    return {p.name: _quantiles(ttfe[p.name], delays[p.name], "ttfe", "delay") for p in paths}


def _quantiles(first: list[float], delays: list[float], a: str, b: str) -> dict[str, float]:
    tt, dd = sorted(first), sorted(delays)
    nan = float("nan")
    return {
        f"{a}_p50": percentile(tt, 0.5),
        f"{a}_p99": percentile(tt, 0.99),
        f"{b}_p50": percentile(dd, 0.5) if dd else nan,
        f"{b}_p99": percentile(dd, 0.99) if dd else nan,
    }


def throughput(p: Path_, call: Stream, conc: int, n: int) -> tuple[float, float | None]:
    """(streams/s, the path's CPU seconds per 100 streams) for ``n`` streams, ``conc`` at a time."""
    cpu0 = cpu_seconds(p.pid) if p.pid else None
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as pool:
        list(pool.map(lambda _: call(p, 5, 0, ""), range(n)))
    wall = time.perf_counter() - t0
    cpu = (cpu_seconds(p.pid) - cpu0) / n * 100 if p.pid and cpu0 is not None else None
    return n / wall, cpu


def throughput_rounds(
    paths: list[Path_], call: Stream, conc: int, n: int, rounds: int
) -> dict[str, tuple[float, float | None]]:
    """``rounds`` rounds of ``n`` streams per path, the order alternating: totals over all rounds."""
    wall: dict[str, float] = {p.name: 0.0 for p in paths}
    cpu: dict[str, float | None] = {p.name: 0.0 if p.pid else None for p in paths}
    if call is kept:  # open the kept connections first: the rounds measure calls, not handshakes
        for p in paths:
            with concurrent.futures.ThreadPoolExecutor(conc) as pool:
                list(pool.map(lambda _, p=p: kept(p, 1, 0, ""), range(conc)))
    for r in range(rounds):
        for p in _alternating(paths, r):
            print(f"throughput {call.__name__} {conc} round {r + 1}/{rounds} {p.name}…", file=sys.stderr)
            rate, c = throughput(p, call, conc, n)
            wall[p.name] += n / rate
            if c is not None and cpu[p.name] is not None:
                cpu[p.name] = (cpu[p.name] or 0.0) + c * n / 100
    total = n * rounds
    return {
        name: (total / wall[name], None if cpu[name] is None else (cpu[name] or 0.0) / total * 100) for name in wall
    }


def peak_rss(p: Path_, conc: int, during: Callable[[], object] | None = None) -> tuple[float, float, bool]:
    """(peak RSS, peak anonymous RSS) in MB of the path's processes while ``conc`` streams run at once (and
    ``during`` runs beside them), and whether the embedded store's engine process was up at any sample."""
    assert p.pid
    pid = p.pid
    peak, anon = rss_mb(pid), rss_mb(pid, "RssAnon")
    engine = False
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, anon, engine
        while not done.is_set():
            peak, anon = max(peak, rss_mb(pid)), max(anon, rss_mb(pid, "RssAnon"))
            engine = engine or engine_up(pid)
            time.sleep(0.05)

    th = threading.Thread(target=sample)
    th.start()
    with concurrent.futures.ThreadPoolExecutor(conc + 1) as pool:
        streams = [pool.submit(fresh, p, 20, 50) for _ in range(conc)]
        if during is not None:
            time.sleep(0.3)  # the streams are open
            pool.submit(during).result()
        for f in streams:
            f.result()
    done.set()
    th.join()
    return peak, anon, engine


def engine_up(pid: int) -> bool:
    """Whether the sidecar's embedded engine process (``llmtap.store.engine``) is running now."""
    from clients import descendants

    for kid in descendants(pid):
        try:
            if b"llmtap.store.engine" in Path(f"/proc/{kid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def descendants_named(pid: int, module: str) -> list[int]:
    from clients import descendants

    return [k for k in descendants(pid) if module.encode() in Path(f"/proc/{k}/cmdline").read_bytes()]


def own_cost(sc: Any) -> dict[str, float]:
    """Calls served and llmtap's own event-loop time per call (``llmtap_overhead_seconds``), from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    _, body = sc.admin_request("GET", "/metrics")
    got: dict[str, float] = {"calls": 0.0, "overhead_count": 0.0, "overhead_sum_s": 0.0, "le_0.001": 0.0}
    for fam in text_string_to_metric_families(body.decode()):
        for smp in fam.samples:
            if smp.name == "llmtap_requests_total":
                got["calls"] += smp.value
            elif smp.name == "llmtap_overhead_seconds_count":
                got["overhead_count"] += smp.value
            elif smp.name == "llmtap_overhead_seconds_sum":
                got["overhead_sum_s"] += smp.value
            elif smp.name == "llmtap_overhead_seconds_bucket" and smp.labels.get("le") == "0.001":
                got["le_0.001"] += smp.value
    return got


def measure(paths: list[Path_], q: bool, profile_to: str) -> dict[str, Any]:
    results: dict[str, Any] = {"throughput": []}
    print("stream suite…", file=sys.stderr)
    measured = [p for p in paths if not p.rss_only]
    results["streams"] = stream_suite(measured, 2 if q else 25, 8 if q else STREAM_EVENTS)
    proxies = [p for p in measured if not p.gateway]
    for call in (kept, fresh):
        for conc in (32, 128):
            c = min(conc, 8) if q else conc
            per_round = 8 if q else max(conc * 2, 256)  # ~1-2 s per round: shorter ones were mostly noise
            for name, (rate, cpu) in throughput_rounds(proxies, call, c, per_round, 2 if q else 5).items():
                results["throughput"].append([name, conc, "kept" if call is kept else "fresh", rate, cpu])
    for p in paths:
        close_pool(p)
    print("latency (a new connection per stream)…", file=sys.stderr)
    results["latency"] = fresh_latency(proxies, 3 if q else 40)
    for p in paths:
        if p.rss_only:  # the load the other paths have seen by now (RSS keeps its high-water mark)
            throughput(p, kept, 8 if q else 128, 16 if q else 512)
            close_pool(p)
    rss = {p.name: peak_rss(p, 20 if q else 200) for p in paths if p.pid and not p.gateway}
    results["rss"] = {name: mb for name, (mb, _, _) in rss.items()}
    results["rss_anon"] = {name: anon for name, (_, anon, _) in rss.items()}
    results["rss_engine_up"] = {name: up for name, (_, _, up) in rss.items()}
    embedded = next(p for p in paths if p.name == EMBEDDED)
    # The same streams while a read runs (it ingests the spool first): the embedded store's engine is up.
    mb, anon, up = peak_rss(embedded, 20 if q else 200, lambda: embedded.sidecar.sql("SELECT count() FROM llm_calls"))
    results["rss_with_engine"] = {"rss": mb, "anon": anon, "engine_up": up}
    results["overhead"] = {p.name: own_cost(p.sidecar) for p in paths if p.sidecar is not None}
    results["otlp"] = {"bytes": OtlpSink.received[0], "requests": OtlpSink.received[1]}
    if profile_to:
        target = next(p for p in paths if p.name == EMBEDDED)
        load = lambda: [throughput(target, kept, 32, 64)]  # noqa: E731
        results["profile"] = profile(target.pid or 0, load, Path(profile_to))  # the supervisor: the recorder
        worker = descendants_named(target.pid or 0, "llmtap.intercept.worker")[0]
        results["profile_worker"] = profile(worker, load, Path(profile_to).with_suffix(".worker.raw"))
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="seconds: small counts, for CI")
    ap.add_argument("--litellm", default="", help="the `litellm` executable (bench/.litellm-venv, see README)")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks.md"))
    ap.add_argument("--profile", default="", help="py-spy the llmtap process during a throughput run into this file")
    ap.add_argument("--results", default=str(ROOT / "bench/results/bench.json"), help="raw results (JSON)")
    ap.add_argument("--render-only", action="store_true", help="re-render --out from --results without measuring")
    ap.add_argument(
        "--transparent", action="store_true", help="also the kept-alive suite in transparent mode (root: netns, nft)"
    )
    ap.add_argument("--transparent-only", action="store_true", help="only that suite (with --quick: seconds)")
    args = ap.parse_args()
    q = args.quick
    # what the run needs, checked before it starts rather than after twenty minutes of measuring
    if args.profile and not args.render_only and not py_spy():
        ap.error("--profile needs py-spy: .venv/bin/pip install -e '.[bench]' (the README's benchmark command)")
    if args.litellm and not q and not Path(args.litellm).is_file():
        ap.error(f"--litellm {args.litellm}: no such file (the README's benchmark command creates bench/.litellm-venv)")
    if args.render_only:
        Path(args.out).write_text(render(json.loads(Path(args.results).read_text())))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-bench-"))
    if args.transparent_only:
        t = {"transparent": transparent_suite(tmp, q, throughput_rounds, stream_suite, kept)}
        print("\n".join(transparent_section(t)))
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    mock = start_mock(tmp / "mock")
    paths, procs = start_paths(tmp, mock, "" if q else args.litellm)
    results: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    from llmtap.config import Environment
    from llmtap.intercept.mitm import event_loop_factory

    loop = event_loop_factory(Environment.read().event_loop)
    results["loop"] = "uvloop" if loop is not None else "asyncio"  # what the sidecars run on
    try:
        results |= measure(paths, q, args.profile)
        if args.transparent:
            results["transparent"] = transparent_suite(tmp, q, throughput_rounds, stream_suite, kept)
    finally:
        for proc in procs:
            if isinstance(proc, ThreadingHTTPServer):
                proc.shutdown()
            else:
                stop(proc)
        stop(mock.proc)
    print("ingest…", file=sys.stderr)
    ingest_rates, store = ingest(tmp, 2_000 if q else 200_000)  # --quick: that it runs, not its rate
    results["ingest"] = ingest_rates
    results["bytes_per_row"] = bytes_per_row(store)
    print("panels…", file=sys.stderr)
    results["panels"] = panels(store, 100_000 if q else 10_000_000)
    print("explain analyses…", file=sys.stderr)
    results["explain"] = explains(store)
    store.close()
    results["paths"] = [p.name for p in paths]
    if not q:
        Path(args.results).write_text(json.dumps(results, indent=1))
    report = render(results)
    Path(args.out).write_text(report)
    print(report)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
