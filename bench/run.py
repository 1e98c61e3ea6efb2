"""llmtap benchmark: side by side against direct, bare mitmproxy and (when installed) the LiteLLM proxy.

    .venv/bin/python bench/run.py                      # full run, writes docs/benchmarks.md
    .venv/bin/python bench/run.py --quick --out /tmp/b.md   # seconds: the CI smoke run

Paths, all on 127.0.0.1 against the same local TLS origin (llmtap's mock provider, OpenAI SSE):
  (a) direct; (b) bare mitmproxy (an addon that only sets ``stream``); (c) llmtap, embedded store;
  (d) llmtap with an OTLP exporter and a ClickHouse-HTTP store; (e) LiteLLM proxy (``--litellm BIN``).
Latency and throughput rounds alternate between paths (throughput: five rounds of max(2 x concurrency,
256) streams per path) so machine drift cancels out; results are ratios and differences within one run.
Client, origin and proxies share the machine's cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import http.client
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from llmtap.adapters.timing import percentile
from llmtap.testing import synthetic
from llmtap.testing.harness import Mock, free_port, start_chhttp, start_mock, start_sidecar, stop
from llmtap.testing.rawclient import request

ROOT = Path(__file__).resolve().parents[1]
BODY = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "messages": []}
HOST = "api.openai.com"
CHAT = "/v1/chat/completions"
LITELLM_KEY = "sk-llmtap-bench-" + "0123456789abcdef" * 2
LITELLM_PATH = "LiteLLM proxy (plain HTTP, keep-alive)"
BASE_URL_PATH = "llmtap base-URL mode (plain HTTP, keep-alive)"


class Path_:
    """One way to reach the origin: direct, through a proxy (CONNECT + TLS), or a plain-HTTP gateway."""

    def __init__(
        self,
        name: str,
        proxy: tuple[str, int] | None,
        cafile: Path,
        pid: int | None,
        plain_port: int | None = None,
        plain_path: str = CHAT,
    ) -> None:
        self.name, self.proxy, self.cafile, self.pid = name, proxy, cafile, pid
        self.plain_port, self.plain_path = plain_port, plain_path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stream(p: Path_, mock: Mock, events: int, delay_ms: int, stamp: bool) -> tuple[float, list[float]]:
    """(time to first content event, one-way delays of stamped events), both in ms."""
    headers = {"x-mock-events": str(events), "x-mock-delay-ms": str(delay_ms)}
    if stamp:
        headers["x-mock-stamp"] = "1"
    t0 = time.time()
    if p.plain_port is not None:  # a base-URL gateway over plain HTTP (LiteLLM, llmtap's base-URL mode)
        return _plain_stream(p.plain_port, p.plain_path, headers, t0), []
    if p.proxy is None:
        r = request(HOST, mock.port, CHAT, BODY, headers, p.cafile, connect_host="127.0.0.1")
    else:
        r = request(HOST, 443, CHAT, BODY, headers, p.cafile, proxy=p.proxy)
    first = next((t for t, data in r.chunks if b'"content":"' in data and b'"content":""' not in data), r.chunks[-1][0])
    delays = [(t - float(m.group(1))) * 1000 for t, data in r.chunks for m in re.finditer(rb"sent_at=(\d+\.\d+)", data)]
    return (first - t0) * 1000, delays


_KEEPALIVE: dict[int, http.client.HTTPConnection] = {}


def _plain_stream(port: int, path: str, headers: dict[str, str], t0: float) -> float:
    """One streamed call on a kept-alive connection, as SDKs do against a base-URL gateway."""
    for attempt in (1, 2):
        conn = _KEEPALIVE.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        _KEEPALIVE[port] = conn
        try:
            conn.request(
                "POST",
                path,
                json.dumps(BODY),
                {"Content-Type": "application/json", "Authorization": f"Bearer {LITELLM_KEY}", **headers},
            )
            resp = conn.getresponse()
            first = None
            while chunk := resp.read1(65536):
                if first is None and b'"content":"' in chunk and b'"content":""' not in chunk:
                    first = time.time()
            return ((first or time.time()) - t0) * 1000
        except (OSError, http.client.HTTPException):
            conn.close()
            _KEEPALIVE.pop(port, None)
            if attempt == 2:
                raise
            t0 = time.time()
    raise AssertionError("unreachable")


class OtlpSink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a: Any) -> None:
        pass


def start_paths(tmp: Path, mock: Mock, litellm: str) -> tuple[list[Path_], list[Any]]:
    procs: list[Any] = []
    paths = [Path_("direct", None, mock.ca, None)]
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
    procs.append(bare)
    for _ in range(100):
        if (bare_dir / "mitmproxy-ca-cert.pem").exists():
            break
        time.sleep(0.1)
    time.sleep(1.0)
    paths.append(Path_("bare mitmproxy", ("127.0.0.1", bare_port), bare_dir / "mitmproxy-ca-cert.pem", bare.pid))
    sc = start_sidecar(tmp / "llmtap", mock)
    procs.append(sc.proc)
    paths.append(
        Path_(
            "llmtap (embedded store)", ("127.0.0.1", sc.listen), sc.data_dir / "ca/mitmproxy-ca-cert.pem", sc.proc.pid
        )
    )
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
    )
    procs.append(sc2.proc)
    paths.append(
        Path_(
            "llmtap (OTLP + ClickHouse-HTTP)",
            ("127.0.0.1", sc2.listen),
            sc2.data_dir / "ca/mitmproxy-ca-cert.pem",
            sc2.proc.pid,
        )
    )
    if litellm:
        port = free_port()
        cfg = tmp / "litellm.yaml"
        cfg.write_text(f"""model_list:
  - model_name: gpt-4o
    litellm_params: {{model: openai/gpt-4o, api_base: "https://localhost:{mock.port}/v1", api_key: sk-x}}
litellm_settings: {{drop_params: true, telemetry: false}}
""")
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


def latency(paths: list[Path_], mock: Mock, rounds: int) -> dict[str, dict[str, float]]:
    ttfe: dict[str, list[float]] = {p.name: [] for p in paths}
    delays: dict[str, list[float]] = {p.name: [] for p in paths}
    for p in paths:  # warm-up: connections, certificates
        stream(p, mock, 3, 1, False)
    for r in range(rounds):
        order = paths if r % 2 == 0 else list(reversed(paths))
        for p in order:
            t, d = stream(p, mock, 20, 20, True)
            ttfe[p.name].append(t)
            delays[p.name].extend(d)
    out = {}
    for p in paths:
        tt, dd = sorted(ttfe[p.name]), sorted(delays[p.name])
        out[p.name] = {
            "ttfe_p50": percentile(tt, 0.5),
            "ttfe_p99": percentile(tt, 0.99),
            "delay_p50": percentile(dd, 0.5) if dd else float("nan"),
            "delay_p99": percentile(dd, 0.99) if dd else float("nan"),
        }
    return out


def throughput(p: Path_, mock: Mock, conc: int, n: int) -> tuple[float, float | None]:
    """(streams/s, proxy CPU seconds per 100 streams) for ``n`` streams, ``conc`` at a time."""
    cpu0 = cpu_seconds(p.pid) if p.pid else None
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as pool:
        list(pool.map(lambda _: stream(p, mock, 5, 0, False), range(n)))
    wall = time.perf_counter() - t0
    cpu = (cpu_seconds(p.pid) - cpu0) / n * 100 if p.pid and cpu0 is not None else None
    return n / wall, cpu


def throughput_rounds(
    paths: list[Path_], mock: Mock, conc: int, n: int, rounds: int
) -> dict[str, tuple[float, float | None]]:
    """``rounds`` rounds of ``n`` streams per path, the order alternating: totals over all rounds."""
    wall: dict[str, float] = {p.name: 0.0 for p in paths}
    cpu: dict[str, float | None] = {p.name: 0.0 if p.pid else None for p in paths}
    for r in range(rounds):
        for p in paths if r % 2 == 0 else list(reversed(paths)):
            print(f"throughput {conc} round {r + 1}/{rounds} {p.name}…", file=sys.stderr)
            rate, c = throughput(p, mock, conc, n)
            wall[p.name] += n / rate
            if c is not None and cpu[p.name] is not None:
                cpu[p.name] = (cpu[p.name] or 0.0) + c * n / 100
    total = n * rounds
    return {
        name: (total / wall[name], None if cpu[name] is None else (cpu[name] or 0.0) / total * 100) for name in wall
    }


def peak_rss(p: Path_, mock: Mock, conc: int) -> float:
    assert p.pid
    peak = rss_mb(p.pid)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb(p.pid or 0))
            time.sleep(0.05)

    th = threading.Thread(target=sample)
    th.start()
    with concurrent.futures.ThreadPoolExecutor(conc) as pool:
        list(pool.map(lambda _: stream(p, mock, 20, 50, False), range(conc)))
    done.set()
    th.join()
    return peak


def ingest(tmp: Path, rows: int) -> dict[str, float]:
    from llmtap.store import rowbinary
    from llmtap.store.clickhouse import ClickHouseBackend
    from llmtap.store.embedded import ChdbBackend
    from llmtap.store.writer import StoreWriter

    # Rows as the spool holds them: in the order calls finished, each encoded once at submit; sent in
    # blocks of the writer's batch size, as while it catches up after an outage.
    spool_order = sorted(synthetic.rows(rows, 7), key=lambda r: float(str(r["Timestamp"])))
    lines = [rowbinary.encode(r) for r in spool_order]
    block = StoreWriter.__init__.__kwdefaults__["batch_size"]
    out = {}
    chdb_backend = ChdbBackend(tmp / "ingest-chdb")
    t0 = time.perf_counter()
    for i in range(0, len(lines), block):
        chdb_backend.insert_rows(lines[i : i + block], f"bench-{i}")
    out["chDB (embedded)"] = len(lines) / (time.perf_counter() - t0)
    ch = start_chhttp(tmp / "ingest-ch")
    try:
        b = ClickHouseBackend(f"clickhouse://default:@127.0.0.1:{ch.port}/llmtap")
        t0 = time.perf_counter()
        for i in range(0, len(lines), block):
            b.insert_rows(lines[i : i + block], f"bench-{i}")
        out["ClickHouse HTTP (over chDB)"] = len(lines) / (time.perf_counter() - t0)
        b.close()
    finally:
        ch.stop()
    return out, chdb_backend  # type: ignore[return-value]


SYNTH_SQL = """INSERT INTO llm_calls (timestamp, trace_id, span_id, service, provider, api, operation, request_model,
    response_model, stream, status_code, outcome, error_type, mid_stream_error, finish_reason, input_tokens,
    output_tokens, cache_read_tokens, usage_source, cost_usd, ttfb_ms, ttft_ms, duration_ms, decode_ms, itl_p50_ms,
    itl_p95_ms, output_tokens_per_s, user_id, feature, api_key_id, request_hash, retry_after_s)
SELECT now64(6) - toIntervalMillisecond(rand() % (30 * 86400000)) AS ts, hex(rand64()), hex(rand()),
    ['checkout-api', 'support-bot', 'search-svc'][rand() % 3 + 1],
    ['openai', 'anthropic', 'gcp.gemini'][rand() % 3 + 1], 'openai.chat_completions', 'chat',
    ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5', 'gemini-2.0-flash', 'o3-mini'][rand() % 5 + 1], '', rand() % 5 > 0,
    [200, 200, 200, 200, 200, 200, 200, 429, 500, 529][rand() % 10 + 1], if(rand() % 20 = 0, 'error', 'ok'),
    if(rand() % 20 = 0, ['rate_limited', 'quota_exhausted', 'overloaded', 'server_error'][rand() % 4 + 1], ''),
    rand() % 100 = 0, ['stop', 'stop', 'stop', 'length', 'tool_calls'][rand() % 5 + 1], rand() % 4000,
    rand() % 800, rand() % 2000, 'provider', (rand() % 10000) / 1e6, 50 + rand() % 200, 200 + rand() % 3000,
    500 + rand() % 20000, rand() % 10000, 5 + rand() % 30, 20 + rand() % 60, 20 + rand() % 100,
    concat('user-', toString(rand() % 500)), ['search', 'summarize', 'chat', 'extract', 'classify'][rand() % 5 + 1],
    hex(rand() % 8), hex(rand() % 100000), if(rand() % 50 = 0, 1.5, NULL)
FROM numbers({n})"""


def _defaults(board: dict[str, Any]) -> dict[str, list[str]]:
    """Each of the board's variables at its default, as a dashboard opens (All where it may be All)."""
    from llmtap.admin.macros import ALL

    out: dict[str, list[str]] = {}
    for v in board.get("templating", {}).get("list", []):
        value = v.get("current", {}).get("value", "")
        values = value if isinstance(value, list) else [value]
        out[v["name"]] = [ALL] if v.get("includeAll") else [str(x) for x in values]
    return out


def panels(store: Any, rows: int) -> list[tuple[str, str, float]]:
    sys.path.insert(0, str(ROOT / "dashboards"))
    from generate import build

    from llmtap.admin.macros import QueryContext, expand

    t0 = time.perf_counter()
    store.query("TRUNCATE TABLE llm_calls", "CSV")
    for _ in range(max(rows // 1_000_000, 1)):
        store.query(SYNTH_SQL.format(n=min(rows, 1_000_000)), "CSV")
    print(f"  generated {rows:,} rows in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    # Time the panels on settled data, as a dashboard reads a month of rows: the bulk insert above leaves
    # background merges running for a while, and they share the cores with the queries.
    settle = time.monotonic() + 120
    while time.monotonic() < settle and store.query("SELECT count() FROM system.merges", "CSV").strip() != b"0":
        time.sleep(0.5)
    print(f"  merges settled after {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    now = time.time()
    out = []
    for board in build().values():
        if board["uid"] == "llmtap-trace":
            continue
        ctx = QueryContext(now - 30 * 86400, now, 6 * 3600, _defaults(board))
        for panel in board["panels"]:
            sql = expand(panel["targets"][0]["rawSql"], ctx)
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                store.query(sql, "Null")
                best = min(best, time.perf_counter() - t)
            out.append((board["title"], panel["title"], best * 1000))
    return out


def profile(p: Path_, mock: Mock, out: Path) -> list[tuple[str, float]]:
    """py-spy samples of llmtap (all threads) during 32-way throughput: the share of samples per function."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    rec = subprocess.Popen(
        [spy, "record", "-p", str(p.pid), "-r", "250", "-d", "25", "--format", "raw", "-o", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    deadline = time.time() + 22
    while time.time() < deadline:
        throughput(p, mock, 32, 64)
    rec.wait(60)
    return summarize_profile(out)


# Frames every busy sample passes through (interpreter start-up, the event loop's and threads' own
# loops): listing them says nothing about where the time goes.
_ROOT_FRAMES = re.compile(
    r"^(<module>|_run_code|_run_module_as_main|main|cmd_run|run|Runner\.run|BaseEventLoop\.\w+|Handle\._run"
    r"|Thread\.(run|_bootstrap|_bootstrap_inner)) \((<frozen runpy>|asyncio/.*|threading\.py|cli\.py|sidecar\.py"
    r"|__main__\.py)\)$"
)


def summarize_profile(out: Path) -> list[tuple[str, float]]:
    """Inclusive share of busy samples per function (idle threads and the root frames left out)."""
    inclusive: dict[str, float] = {}
    total = 0.0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = float(count)
        frames = stack.split(";")
        if any("epoll_wait" in f or "select (selectors" in f or "wait (threading" in f for f in frames[-2:]):
            continue  # idle threads
        total += n
        for name in {re.sub(r" \(.*?:\d+\)$", "", f).strip() + " (" + _module(f) + ")" for f in frames}:
            inclusive[name] = inclusive.get(name, 0.0) + n
    shown = ((k, v) for k, v in inclusive.items() if not _ROOT_FRAMES.match(k) and not k.startswith(" ("))
    top = sorted(shown, key=lambda kv: -kv[1])
    return [(k, 100 * v / total) for k, v in top if v / total > 0.03][:30]


def _module(frame: str) -> str:
    m = re.search(r"\((.*?):\d+\)", frame)
    if not m:
        return "?"
    path = m.group(1)
    for marker in ("site-packages/", "llmtap/", "lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="seconds: small counts, for CI")
    ap.add_argument("--litellm", default="", help="path of the `litellm` executable (pip install 'litellm[proxy]')")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks.md"))
    ap.add_argument("--profile", default="", help="py-spy the llmtap process during a throughput run into this file")
    ap.add_argument("--results", default=str(ROOT / "bench/results/bench.json"), help="raw results (JSON)")
    ap.add_argument("--render-only", action="store_true", help="re-render --out from --results without measuring")
    args = ap.parse_args()
    q = args.quick
    if args.render_only:
        Path(args.out).write_text(render(json.loads(Path(args.results).read_text())))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-bench-"))
    # The latency test's pacing is also the mock's default, for gateways that do not forward x-mock-* headers.
    mock = start_mock(tmp / "mock", env={"LLMTAP_MOCK_EVENTS": "20", "LLMTAP_MOCK_DELAY_MS": "20"})
    paths, procs = start_paths(tmp, mock, "" if q else args.litellm)
    results: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    try:
        print("latency…", file=sys.stderr)
        results["latency"] = latency(paths, mock, 3 if q else 40)
        proxies = [p for p in paths if p.plain_port is None]
        results["throughput"] = {}
        for conc in (32, 128):
            c = min(conc, 8) if q else conc
            per_round = 8 if q else max(conc * 2, 256)  # ~2 s per round: shorter ones were mostly noise
            for name, res in throughput_rounds(proxies, mock, c, per_round, 2 if q else 5).items():
                results["throughput"][(name, conc)] = res
        results["rss"] = {p.name: peak_rss(p, mock, 20 if q else 200) for p in paths if p.pid and p.plain_port is None}
        if args.profile:
            target = next(p for p in paths if p.name.startswith("llmtap (OTLP"))
            results["profile"] = profile(target, mock, Path(args.profile))
    finally:
        for proc in procs:
            if isinstance(proc, ThreadingHTTPServer):
                proc.shutdown()
            else:
                stop(proc)
        stop(mock.proc)
    print("ingest…", file=sys.stderr)
    ingest_rates, store = ingest(tmp, 20_000 if q else 200_000)
    results["ingest"] = ingest_rates
    print("panels…", file=sys.stderr)
    results["panels"] = panels(store, 100_000 if q else 10_000_000)
    store.close()
    results["paths"] = [p.name for p in paths]
    results["throughput"] = [[name, conc, rate, cpu] for (name, conc), (rate, cpu) in results["throughput"].items()]
    if not q:
        Path(args.results).write_text(json.dumps(results, indent=1))
    report = render(results)
    Path(args.out).write_text(report)
    print(report)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _measured(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _ms(x: float | None, sign: str = "") -> str:
    """A table cell in ms; "n/a" for what a path does not measure (never "nan")."""
    return f"{x:{sign}.2f}" if _measured(x) else "n/a"


def render(r: dict[str, Any]) -> str:
    lat = r["latency"]
    direct, bare = lat["direct"], lat["bare mitmproxy"]
    cpu = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.*)", cpu)
    lines = [
        "# Benchmarks",
        "",
        f"Run {r['date']} on {platform.machine()} ({model.group(1) if model else '?'}), {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; produced by `python bench/run.py` (see its docstring for the method). "
        "Client, origin and proxies share the cores: compare paths with each other, not with other machines.",
        "",
        "## Latency: 20 events, 20 ms apart, over TLS (alternating paths)",
        "",
        "| path | first event p50 (ms) | p99 | added vs direct p50 | per-event delay p50 (ms) | p99 "
        "| added vs direct p50 | added vs bare p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    unmeasured = False
    for name in r["paths"]:
        x = lat[name]
        unmeasured = unmeasured or not _measured(x["delay_p50"])
        lines.append(
            f"| {name} | {_ms(x['ttfe_p50'])} | {_ms(x['ttfe_p99'])} | "
            f"{_ms(x['ttfe_p50'] - direct['ttfe_p50'], '+')} | "
            f"{_ms(x['delay_p50'])} | {_ms(x['delay_p99'])} | {_ms(x['delay_p50'] - direct['delay_p50'], '+')} | "
            f"{_ms(x['delay_p50'] - bare['delay_p50'], '+')} |"
        )
    if unmeasured:
        lines += [
            "",
            "n/a: not measured. The per-event delay is read from send-time stamps the mock puts in SSE comments, "
            "taken on the raw TLS client; the plain-HTTP gateway paths are timed with a kept-alive HTTP client "
            "that measures the first event only.",
        ]
    lines += [
        "",
        "## Throughput and CPU (5-event streams, no pacing; five alternating rounds of 256 streams per path)",
        "",
        "| path | concurrency | streams/s | ratio to direct | ratio to bare | proxy CPU s / 100 streams "
        "| CPU ratio to bare |",
        "|---|---|---|---|---|---|---|",
    ]
    tp = {(name, conc): (rate, cpu) for name, conc, rate, cpu in r["throughput"]}
    for (name, conc), (rate, cpu_s) in tp.items():
        d, b = tp[("direct", conc)][0], tp[("bare mitmproxy", conc)]
        lines.append(
            f"| {name} | {conc} | {rate:.1f} | {rate / d:.2f} | {rate / b[0]:.2f} | "
            f"{'-' if cpu_s is None else f'{cpu_s:.2f}'} | "
            f"{'-' if cpu_s is None or not b[1] else f'{cpu_s / b[1]:.2f}'} |"
        )
    lines += ["", "## Peak RSS with 200 concurrent streams", "", "| path | peak RSS (MB) |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in r["rss"].items()]
    lines += ["", "## Store ingest", "", "| store | rows/s |", "|---|---|"]
    lines += [f"| {k} | {v:,.0f} |" for k, v in r["ingest"].items()]
    if r.get("profile"):
        lines += [
            "",
            "## Where llmtap's CPU goes (py-spy, busy samples of all threads, 32-way throughput)",
            "",
            "| function (module) | share of busy samples (inclusive) |",
            "|---|---|",
        ]
        lines += [f"| `{name}` | {share:.0f}% |" for name, share in r["profile"]]
    lines += [
        "",
        "## Dashboard panels on synthetic `llm_calls` rows (chDB, 30-day range, best of 3 after merges settle)",
        "",
        "| dashboard | panel | ms |",
        "|---|---|---|",
    ]
    lines += [f"| {b} | {p} | {ms:.0f} |" for b, p, ms in r["panels"]]
    return "\n".join(budget(r) + lines[1:] + soak_section() + ws_soak_section()) + "\n"


def budget(r: dict[str, Any]) -> list[str]:
    """The performance budget of issue #7, checked against this run."""
    lat = r["latency"]
    tp = {(name, conc): (rate, cpu) for name, conc, rate, cpu in r["throughput"]}
    ours = [n for n in r["paths"] if n.startswith("llmtap (")]
    server = "llmtap (OTLP + ClickHouse-HTTP)"
    rows = []
    for n in ours:
        added = lat[n]["delay_p50"] - lat["bare mitmproxy"]["delay_p50"]
        rows.append((f"{n}: added p50 per-event delay ≤ bare + 0.2 ms", f"{added:+.2f} ms", added <= 0.2))
        for conc in (32, 128):
            ratio = tp[(n, conc)][0] / tp[("bare mitmproxy", conc)][0]
            rows.append((f"{n}: streams/s ≥ 0.9 x bare at {conc}", f"{ratio:.2f} x", ratio >= 0.9))
            ours_cpu, bare_cpu = tp[(n, conc)][1], tp[("bare mitmproxy", conc)][1]
            if ours_cpu and bare_cpu:
                rows.append(
                    (
                        f"{n}: CPU per stream ≤ 1.15 x bare at {conc}",
                        f"{ours_cpu / bare_cpu:.2f} x",
                        ours_cpu / bare_cpu <= 1.15,
                    )
                )
    if LITELLM_PATH in lat and BASE_URL_PATH in lat:  # like for like: two base-URL gateways, kept-alive clients
        ll = lat[LITELLM_PATH]["ttfe_p50"] - lat["direct"]["ttfe_p50"]
        added = lat[BASE_URL_PATH]["ttfe_p50"] - lat["direct"]["ttfe_p50"]
        rows.append(
            (
                f"{BASE_URL_PATH}: added time to first event p50 below LiteLLM's ({ll:+.1f} ms)",
                f"{added:+.1f} ms",
                added < ll,
            )
        )
    if server in r["rss"]:
        rows.append(
            ("RSS ≤ 150 MB at 200 streams, server store", f"{r['rss'][server]:.0f} MB", r["rss"][server] <= 150)
        )
    for store, rate in r["ingest"].items():
        rows.append((f"ingest ≥ 50k rows/s: {store}", f"{rate:,.0f}/s", rate >= 50_000))
    worst = max(r["panels"], key=lambda x: x[2])
    rows.append(
        ("every dashboard panel ≤ 500 ms on 10M rows", f"slowest {worst[2]:.0f} ms ({worst[1]})", worst[2] <= 500)
    )
    out = ["# Benchmarks", "", "## Budget", "", "| budget line | this run | met |", "|---|---|---|"]
    out += [f"| {line} | {value} | {'yes' if ok else '**no**'} |" for line, value, ok in rows]
    out += [
        "",
        "Where a line is not met, [performance.md](performance.md) shows where the time goes and what would fix it.",
    ]
    return out


def soak_section() -> list[str]:
    out = []
    for f in sorted((ROOT / "bench/results").glob("soak*.json")):
        s = json.loads(f.read_text())
        smp = s["samples"]
        after2 = [x for x in smp if x["t_s"] >= 120]
        out += [
            "",
            f"## Soak: {s['minutes']:.0f} min at {s['rate_per_s']:.0f} calls/s, store: "
            f"{s.get('store', 'embedded chDB')} (`bench/soak.py`, {f.name})",
            "",
            f"{s['calls']:,} calls ({s['client_outcomes']}); RSS {smp[0]['rss_mb']:.0f} MB at start, "
            f"{after2[0]['rss_mb']:.0f} MB after 2 min, {smp[-1]['rss_mb']:.0f} MB at the end "
            f"(min {min(x['rss_mb'] for x in after2):.0f}, max {max(x['rss_mb'] for x in after2):.0f} after 2 min); "
            f"event-loop tasks {smp[0]['tasks']} at start, {smp[-1]['tasks']} at the end "
            f"(max {max(x['tasks'] for x in smp)} under load); in-flight calls {smp[-1]['inflight']} at the end; "
            f"store queue at most {max(x['store_queue'] for x in smp)}.",
            "",
            "| t (s) | RSS MB | tasks | in flight | store queue | written |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {x['t_s']} | {x['rss_mb']} | {x['tasks']} | {x['inflight']} | {x['store_queue']} | {x['written']} |"
            for x in smp[::6]
        ]
    return out


def ws_soak_section() -> list[str]:
    """The WebSocket soak (`bench/ws_soak.py`, ws-soak.json), when it has been run."""
    f = ROOT / "bench/results/ws-soak.json"
    if not f.exists():
        return []
    s = json.loads(f.read_text())
    smp, c, rss = s["samples"], s["client"], s["rss_mb"]
    rows = sum(r["n"] for r in s["rows"])
    by_api = ", ".join(f"{r['api']} {r['outcome']}: {r['n']:,}" for r in s["rows"])
    after2 = [x for x in smp if x["t_s"] >= 120] or smp
    out = [
        "",
        f"## WebSocket soak: {s['minutes']:.0f} min, {s['sockets_open']['realtime']} Realtime + "
        f"{s['sockets_open']['responses']} Responses WebSocket-mode sockets (`bench/ws_soak.py`, ws-soak.json)",
        "",
        f"{c['messages_sent'] + c['messages_received']:,} messages, {c['responses']:,} responses, {rows:,} rows "
        f"({by_api}), {c['sockets']} sockets opened, "
        f"{c['errors']} client errors. RSS {rss['first']:.0f} MB at start, {after2[0]['rss_mb']:.0f} MB after 2 min, "
        f"{rss['last']:.0f} MB at the end (max {rss['max']:.0f}; second-half slope "
        f"{s['rss_slope_mb_per_hour_second_half']:+.1f} MB/h). After the run: "
        f"{s['after']['event_loop_tasks']} event-loop tasks, {s['after']['open_websockets']} open WebSockets, "
        f"{s['after']['inflight_calls']} calls in flight, {s['after']['records_written']:,} records written.",
        "",
        "| t (s) | RSS MB | tasks | open sockets | written | messages |",
        "|---|---|---|---|---|---|",
    ]
    step = max(1, len(smp) // 16)
    out += [
        f"| {x['t_s']} | {x['rss_mb']} | {x['tasks']} | {x['open_websockets']} | {x['written']} | {x['messages']:,} |"
        for x in [*smp[::step], *([smp[-1]] if (len(smp) - 1) % step else [])]
    ]
    ab = ROOT / "bench/results/ws-soak-ab.json"
    if ab.exists():  # the same load with mitmproxy's default (every message kept), vs llmtap (dropped once observed)
        r = json.loads(ab.read_text())
        out += [
            "",
            f"Why messages are dropped once observed: the same load for {r['minutes']:.0f} min with mitmproxy's "
            f"default (every message of a socket kept in `flow.websocket.messages`) grew the sidecar's RSS by "
            f"{r['keep']['growth_mb']:.0f} MB over {r['keep']['messages']:,} messages "
            f"({r['keep']['first_mb']:.0f} → {r['keep']['last_mb']:.0f} MB); with llmtap's hook dropping them, "
            f"by {r['drop']['growth_mb']:.0f} MB over {r['drop']['messages']:,} messages "
            f"({r['drop']['first_mb']:.0f} → {r['drop']['last_mb']:.0f} MB; `ws-soak-ab.json`).",
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
