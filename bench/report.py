"""The benchmark's page (docs/benchmarks.md) from its raw results (bench/results/bench.json): budget first."""

from __future__ import annotations

import json
import math
import os
import platform
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DIRECT, BARE = "direct", "bare mitmproxy"
EMBEDDED, SERVER = "llmtap (embedded store)", "llmtap (OTLP + ClickHouse-HTTP)"
SERVER_ONLY = "llmtap (ClickHouse-HTTP store, no OTLP)"
BASE_URL_PATH, LITELLM_PATH = "llmtap base-URL mode (plain HTTP)", "LiteLLM proxy (plain HTTP)"
OURS = (EMBEDDED, SERVER)
STREAM_EVENTS, STREAM_GAP_MS = 64, 20  # the stream suite: 64 deltas 20 ms apart


def _measured(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _ms(x: float | None, sign: str = "") -> str:
    """A table cell in ms; "n/a" for what a path does not measure (never "nan")."""
    return f"{x:{sign}.2f}" if _measured(x) else "n/a"


def _mb(x: float | None) -> str:
    return f"{x:.0f}" if _measured(x) else "n/a"


def _tp(r: dict[str, Any]) -> dict[tuple[str, int, str], tuple[float, float | None]]:
    return {(name, conc, mode): (rate, cpu) for name, conc, mode, rate, cpu in r["throughput"]}


def render(r: dict[str, Any]) -> str:
    cpu = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.*)", cpu)
    lines = [
        "",
        f"Run {r['date']} on {platform.machine()} ({model.group(1) if model else '?'}), {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, llmtap's event loop: {r.get('loop', 'asyncio')}; produced by "
        "`python bench/run.py` (see its docstring for the method). Client, origin and proxies share the cores: "
        "compare paths with each other, not with other machines.",
    ]
    lines += _streams(r) + _throughput(r) + _fresh_latency(r)
    from transparent import section as transparent_section  # bench/ is on sys.path (run.py puts it there)

    lines += transparent_section(r)
    if any("| n/a |" in line for line in lines):
        lines += ["", "n/a: not measured (a path that did not return the stamped events this number is read from)."]
    lines += ["", "## Peak RSS with 200 concurrent streams (each path's processes, all counted)", ""]
    anon = r.get("rss_anon", {})
    lines += [
        "RSS counts the file-backed pages of the code that ran (chDB's engine is a 530 MB shared library) as well "
        "as anonymous memory (heaps, stacks, caches), which is what a memory limit cannot reclaim.",
        "",
        "| path | peak RSS (MB) | of which anonymous (MB) |",
        "|---|---|---|",
    ]
    up = r.get("rss_engine_up", {})
    lines += [f"| {k} | {v:.0f} | {_mb(anon.get(k))} |" for k, v in r["rss"].items()]
    we = r.get("rss_with_engine")
    if we:
        lines += [
            f"| {EMBEDDED}, a read during the streams (the engine process up) | {we['rss']:.0f} | "
            f"{_mb(we.get('anon'))} |",
            "",
            "The embedded store's engine runs in its own process only while it ingests the spool (every 5 minutes "
            "or 50,000 rows) or answers a read, and stops after 30 s idle. "
            f"During the 200-stream sample above it was {'up' if up.get(EMBEDDED) else 'not running'}; the last row "
            "is the same load with a read (`SELECT count() FROM llm_calls`, which ingests first) beside it.",
        ]
    lines += ["", "## Store ingest", "", "| store | rows/s |", "|---|---|"]
    lines += [f"| {k} | {v:,.0f} |" for k, v in r["ingest"].items()]
    if r.get("bytes_per_row"):
        lines += [
            "",
            "## Bytes per call on disk (chDB, the ingest's 200k synthetic calls, after compression)",
            "",
            "| table | rows | compressed bytes/row | uncompressed bytes/row |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{t}` | {x['rows']:,} | {x['compressed'] / max(x['rows'], 1):.0f} | "
            f"{x['uncompressed'] / max(x['rows'], 1):.0f} |"
            for t, x in r["bytes_per_row"].items()
        ]
    lines += _own_cost(r) + _scale(r)
    for key, who in (("profile", "the supervisor (recorder, pipeline, store)"), ("profile_worker", "a proxy worker")):
        if r.get(key):
            lines += [
                "",
                f"## Where llmtap's CPU goes: {who} (py-spy, busy samples of all threads, 32-way kept-alive "
                "throughput, embedded store)",
                "",
                "| function (module) | share of busy samples (inclusive) |",
                "|---|---|",
            ]
            lines += [f"| `{name}` | {share:.0f}% |" for name, share in r[key]]
    lines += [
        "",
        "## Dashboard panels on synthetic `llm_calls` rows (chDB, 30-day range, best of 3 after merges settle)",
        "",
        "| dashboard | panel | ms |",
        "|---|---|---|",
    ]
    lines += [f"| {b} | {p} | {ms:.0f} |" for b, p, ms in r["panels"]]
    if r.get("explain"):
        lines += [
            "",
            "## Explain analyses on the same rows, as the CLI runs them (best of 3)",
            "",
            "| analysis | periods | ms |",
            "|---|---|---|",
        ]
        lines += [f"| `{a}` | `{p}` | {ms:.0f} |" for a, p, ms in r["explain"]]
    return "\n".join(budget(r) + lines + soak_section() + ws_soak_section()) + "\n"


def _streams(r: dict[str, Any]) -> list[str]:
    s = r["streams"]
    d = s[DIRECT]
    out = [
        "",
        f"## Stream suite: {STREAM_EVENTS} deltas {STREAM_GAP_MS} ms apart, kept-alive connections (alternating paths)",
        "",
        "How public gateway boards measure: each client keeps its connection (CONNECT and TLS once, as the SDKs "
        "do); the proxies are reached with HTTPS_PROXY, the gateways by base URL over plain HTTP. The per-delta "
        "delay is each delta's arrival minus its send time (the mock starts each delta's text with it), so it "
        "survives a gateway that re-encodes the stream.",
        "",
        "| path | TTFT p50 (ms) | p99 | added TTFT p50 | added p99 | per-delta delay p50 (ms) | p99 "
        "| added per-delta p50 | added p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in r["paths"]:
        if name not in s:
            continue
        x = s[name]
        out.append(
            f"| {name} | {_ms(x['ttft_p50'])} | {_ms(x['ttft_p99'])} | {_ms(x['ttft_p50'] - d['ttft_p50'], '+')} | "
            f"{_ms(x['ttft_p99'] - d['ttft_p99'], '+')} | {_ms(x['delta_p50'])} | {_ms(x['delta_p99'])} | "
            f"{_ms(x['delta_p50'] - d['delta_p50'], '+')} | {_ms(x['delta_p99'] - d['delta_p99'], '+')} |"
        )
    return out


def _throughput(r: dict[str, Any]) -> list[str]:
    tp = _tp(r)
    out = []
    for mode, title in (
        ("kept", "kept-alive connections (the budget's mode)"),
        ("fresh", "a new connection per stream (CONNECT + two TLS handshakes each)"),
    ):
        out += [
            "",
            f"## Throughput and CPU, {title}",
            "",
            "5-event streams, no pacing; five alternating rounds of max(2 x concurrency, 256) streams per path. "
            "CPU is the path's processes' (user + system).",
            "",
            "| path | concurrency | streams/s | ratio to direct | ratio to bare | proxy CPU s / 100 streams "
            "| CPU ratio to bare |",
            "|---|---|---|---|---|---|---|",
        ]
        for (name, conc, m), (rate, cpu_s) in tp.items():
            if m != mode:
                continue
            d, b = tp[(DIRECT, conc, mode)][0], tp[(BARE, conc, mode)]
            out.append(
                f"| {name} | {conc} | {rate:.1f} | {rate / d:.2f} | {rate / b[0]:.2f} | "
                f"{'-' if cpu_s is None else f'{cpu_s:.2f}'} | "
                f"{'-' if cpu_s is None or not b[1] else f'{cpu_s / b[1]:.2f}'} |"
            )
    return out


def _fresh_latency(r: dict[str, Any]) -> list[str]:
    lat = r["latency"]
    direct, bare = lat[DIRECT], lat[BARE]
    out = [
        "",
        "## Latency with a new connection per stream: 20 events, 20 ms apart, over TLS (alternating paths)",
        "",
        "| path | first event p50 (ms) | p99 | added vs direct p50 | per-event delay p50 (ms) | p99 "
        "| added vs direct p50 | added vs bare p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in r["paths"]:
        if name not in lat:
            continue
        x = lat[name]
        out.append(
            f"| {name} | {_ms(x['ttfe_p50'])} | {_ms(x['ttfe_p99'])} | "
            f"{_ms(x['ttfe_p50'] - direct['ttfe_p50'], '+')} | "
            f"{_ms(x['delay_p50'])} | {_ms(x['delay_p99'])} | {_ms(x['delay_p50'] - direct['delay_p50'], '+')} | "
            f"{_ms(x['delay_p50'] - bare['delay_p50'], '+')} |"
        )
    return out


def _own_cost(r: dict[str, Any]) -> list[str]:
    oc = r.get("overhead") or {}
    if not oc:
        return []
    out = [
        "",
        "## llmtap's own cost per call in this run (`llmtap_overhead_seconds` on each sidecar's /metrics)",
        "",
        "Time llmtap's own code spent per call, over every call of the run: its hooks and tees on the proxy "
        "worker's event loop, the recorder's replay of the call's bytes through the parsers, the record's "
        "build, enrichers and pricing, and the sinks' mean time per record (store row and spool, metrics, "
        "span). The store's inserts run on their own thread (or in the engine process) and are not counted.",
        "",
        "| sidecar | calls | mean (ms) | calls under 1 ms |",
        "|---|---|---|---|",
    ]
    for name, x in oc.items():
        n = x["overhead_count"]
        mean = x["overhead_sum_s"] / n * 1000 if n else float("nan")
        share = f"{x['le_0.001'] / n:.1%}" if n else "n/a"
        out.append(f"| {name} | {x['calls']:,.0f} | {_ms(mean)} | {share} |")
    return out


SCALE_RATES = (1_000, 10_000, 100_000)
BATCH = 10_000  # spans per collector batch → one insert per table


def _scale(r: dict[str, Any]) -> list[str]:
    """Fleet sizing from this run's numbers: CPU per call, bytes per call on disk and on the wire, insert rate."""
    tp, bpr = _tp(r), r.get("bytes_per_row") or {}
    if "otel_traces" not in bpr:
        return []
    calls = bpr["otel_traces"]["rows"]
    disk = sum(bpr[t]["compressed"] for t in ("otel_traces", "llm_calls", "llm_calls_hourly") if t in bpr) / calls
    per_core = {n: 100 / tp[(n, 128, "kept")][1] for n in OURS if (tp.get((n, 128, "kept")) or (0, 0))[1]}
    server_calls = (r.get("overhead") or {}).get(SERVER, {}).get("calls", 0)
    span = r["otlp"]["bytes"] / server_calls if r.get("otlp") and server_calls else float("nan")
    ingest = r["ingest"].get("chDB (embedded)", float("nan"))
    out = [
        "",
        "## Scale, computed from this run",
        "",
        "Per core: 100 / (the sidecar's CPU seconds per 100 kept-alive 5-event streams at 128 concurrent). "
        f"Per call on disk: {disk:,.0f} bytes compressed (`otel_traces` + `llm_calls` + the hourly rollup, "
        f"{calls:,} synthetic calls after merges). On the wire to a collector: {span:,.0f} bytes of OTLP/protobuf "
        f"per span. One insert stream of the engine here: {ingest:,.0f} rows/s (batches of 10,000, all views).",
        "",
        "| store | calls/s per core |",
        "|---|---|",
    ]
    out += [f"| {n} | {v:,.0f} |" for n, v in per_core.items()]
    sc = per_core.get(SERVER, float("nan"))
    out += [
        "",
        "| fleet calls/s | sidecar cores (server route) | OTLP MB/s into collectors | collector batches/s "
        f"({BATCH:,} spans) | insert streams at this run's rate | disk GB/day (compressed) |",
        "|---|---|---|---|---|---|",
    ]
    for rate in SCALE_RATES:
        out.append(
            f"| {rate:,} | {rate / sc:,.1f} | {rate * span / 1e6:,.1f} | {rate / BATCH:,.1f} | "
            f"{rate / ingest:,.2f} | {rate * 86400 * disk / 1e9:,.0f} |"
        )
    return out


def budget(r: dict[str, Any]) -> list[str]:
    """The performance budget of issue #25 (kept-alive clients, one alternating run), checked against this run."""
    s, tp = r["streams"], _tp(r)
    rows = []
    for n in OURS:
        for conc in (32, 128):
            ratio = tp[(n, conc, "kept")][0] / tp[(BARE, conc, "kept")][0]
            rows.append((f"{n}: streams/s ≥ 1.2 x bare at {conc}", f"{ratio:.2f} x", ratio >= 1.2))
            ours_cpu, bare_cpu = tp[(n, conc, "kept")][1], tp[(BARE, conc, "kept")][1]
            if ours_cpu and bare_cpu:
                c = ours_cpu / bare_cpu
                rows.append((f"{n}: CPU per stream ≤ 0.85 x bare at {conc}", f"{c:.2f} x", c <= 0.85))
        for key, what in (("delta_p50", "per-delta delay"), ("ttft_p50", "TTFT")):
            ours = s[n][key] - s[DIRECT][key]
            bare = s[BARE][key] - s[DIRECT][key]
            rows.append((f"{n}: added {what} p50 ≤ bare's ({bare:+.2f} ms)", f"{ours:+.2f} ms", ours <= bare))
    if LITELLM_PATH in s and BASE_URL_PATH in s:  # like for like: two base-URL gateways
        for key, what in (("ttft_p50", "TTFT"), ("delta_p50", "per-delta delay")):
            ll = s[LITELLM_PATH][key] - s[DIRECT][key]
            ours = s[BASE_URL_PATH][key] - s[DIRECT][key]
            rows.append(
                (f"{BASE_URL_PATH}: added {what} p50 below LiteLLM's ({ll:+.2f} ms)", f"{ours:+.2f} ms", ours < ll)
            )
    for name, limit in ((EMBEDDED, 250), (SERVER_ONLY, 120), (SERVER, 120)):
        if name in r["rss"]:
            mb = r["rss"][name]
            rows.append((f"{name}: RSS ≤ {limit} MB at 200 streams", f"{mb:.0f} MB", mb <= limit))
    for store, rate in r["ingest"].items():
        rows.append((f"ingest ≥ 60k rows/s: {store}", f"{rate:,.0f}/s", rate >= 60_000))
    worst = max(r["panels"], key=lambda x: x[2])
    rows.append(
        ("every dashboard panel ≤ 1 s on 10M rows", f"slowest {worst[2]:.0f} ms ({worst[1]})", worst[2] <= 1000)
    )
    for analysis, periods, ms in r.get("explain", []):
        rows.append((f"`{analysis} {periods}` ≤ 1 s on 10M rows", f"{ms:.0f} ms", ms <= 1000))
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
