"""Soak: a moderate, steady load through one sidecar for N minutes; RSS, tasks and queues must stay flat.

    .venv/bin/python bench/soak.py --minutes 10 --rate 20
    .venv/bin/python bench/soak.py --store chhttp --out bench/results/soak-clickhouse.json

Starts the mock provider and `llmtap run` (embedded store; ``--store URL`` for a ClickHouse
server, ``--store chhttp`` for the test ClickHouse-HTTP endpoint over chDB, ``--store none`` for the
collector route: spans to a local OTLP receiver that accepts and drops them), sends `--rate` calls/s
(half streamed chat, half embeddings; 1 in 20 a client cancel, 1 in 20 an upstream disconnect),
and samples the sidecar's RSS, CPU (cores used since the last sample), event-loop task count,
in-flight calls and store queue every 10 s (docs/kubernetes.md sizes its resources from these).
Writes bench/results/soak.json and prints a table. Not a test: a measurement. Binds 127.0.0.1 only;
stops everything it started.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai

from clients import cpu_seconds, rss_mb  # the sidecar's whole process tree
from llmtap.testing.harness import start_chhttp, start_mock, start_sidecar, stop


def otlp_sink() -> ThreadingHTTPServer:
    """An OTLP/HTTP endpoint that accepts every export and keeps nothing (the collector, for --store none)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=float, default=20, help="calls per second")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "soak.json"))
    ap.add_argument(
        "--store",
        default="",
        help="store URL for the sidecar, or 'chhttp': llmtap.testing.chhttp (default: the embedded chDB store)",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-soak-"))
    store, label, endpoint = args.store, "embedded chDB", None
    extra: list[str] = []
    sink: ThreadingHTTPServer | None = None
    if store == "none":
        sink = otlp_sink()
        extra = ["--otlp-endpoint", f"http://127.0.0.1:{sink.server_address[1]}"]
        label = "none (OTLP spans to a collector)"
    elif store == "chhttp":
        endpoint = start_chhttp(tmp / "ch")
        store = f"clickhouse://default:@127.0.0.1:{endpoint.port}/llmtap"
        label = "ClickHouse HTTP (llmtap.testing.chhttp over chDB)"
    elif store:
        label = "ClickHouse server"
    mock = start_mock(tmp / "mock")
    sc = start_sidecar(tmp / "data", mock, *(["--store", store] if store else []), *extra)
    client = openai.OpenAI(
        api_key="sk-soak",
        max_retries=0,
        timeout=30,
        http_client=openai.DefaultHttpxClient(
            proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(sc.bundle))
        ),
    )
    stop_at = time.monotonic() + args.minutes * 60
    samples: list[dict[str, Any]] = []
    counts = {"ok": 0, "error": 0, "cancelled": 0}
    lock = threading.Lock()

    def call(i: int) -> None:
        kind = "ok"
        try:
            if i % 20 == 7:
                s = client.chat.completions.create(
                    model="gpt-4o", messages=[], stream=True, extra_headers={"x-mock-scenario": "slow"}
                )
                next(iter(s))
                s.close()
                kind = "cancelled"
            elif i % 20 == 13:
                kind = "error"
                list(
                    client.chat.completions.create(
                        model="gpt-4o", messages=[], stream=True, extra_headers={"x-mock-scenario": "disconnect"}
                    )
                )
            elif i % 2:
                list(
                    client.chat.completions.create(
                        model="gpt-4o", messages=[], stream=True, stream_options={"include_usage": True}
                    )
                )
            else:
                client.embeddings.create(model="text-embedding-3-small", input="soak")
        except Exception:
            kind = "error"
        with lock:
            counts[kind] += 1

    def sampler() -> None:
        t0 = time.monotonic()
        last = (t0, cpu_seconds(sc.proc.pid))
        while time.monotonic() < stop_at + 5:
            _, body = sc.admin_request("GET", "/healthz")
            h = json.loads(body)
            now, cpu = time.monotonic(), cpu_seconds(sc.proc.pid)
            cores = (cpu - last[1]) / max(now - last[0], 1e-9)
            last = (now, cpu)
            samples.append(
                {
                    "t_s": round(now - t0),
                    "rss_mb": round(rss_mb(sc.proc.pid), 1),
                    "cpu_cores": round(cores, 3),
                    "tasks": h.get("event_loop_tasks"),
                    "inflight": h.get("inflight_calls"),
                    "store_queue": h.get("store_queue"),
                    "written": h.get("records_written"),
                }
            )
            time.sleep(10)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            i = 0
            next_t = time.monotonic()
            while time.monotonic() < stop_at:
                pool.submit(call, i)
                i += 1
                next_t += 1 / args.rate
                time.sleep(max(0.0, next_t - time.monotonic()))
        th.join()
    finally:
        stop(sc.proc)
        stop(mock.proc)
        if endpoint is not None:
            endpoint.stop()
        if sink is not None:
            sink.shutdown()
    result = {
        "store": label,
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "calls": i,
        "client_outcomes": counts,
        "samples": samples,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'t (s)':>6} {'RSS MB':>8} {'cores':>6} {'tasks':>6} {'inflight':>9} {'queue':>6} {'written':>8}")
    for s in samples:
        print(
            f"{s['t_s']:>6} {s['rss_mb']:>8} {s.get('cpu_cores', '-')!s:>6} {s['tasks']!s:>6} {s['inflight']!s:>9} "
            f"{s['store_queue']!s:>6} {s['written']!s:>8}"
        )
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))


if __name__ == "__main__":
    main()
