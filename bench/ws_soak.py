"""WebSocket soak: long-lived sockets through one sidecar for N minutes; RSS, tasks and sockets must stay flat.

    .venv/bin/python bench/ws_soak.py --minutes 30

Starts the mock provider and `llmtap run` (embedded store) and keeps ``--realtime`` Realtime
sockets and ``--responses`` Responses WebSocket-mode sockets open for the whole run, through the
official openai SDK's WebSocket clients over HTTPS_PROXY. Every Realtime turn appends
``--appends`` audio chunks (4 KiB of base64 each) then asks for a response (transcript + audio
deltas, ~20 server messages), one turn every ``--turn-interval`` seconds; every Responses
socket asks for a response every ``--interval`` seconds. Once a minute one socket of each kind
is closed and a new one opened (no socket, task or call may leak). Every 10 s it samples the
sidecar's RSS, event-loop tasks, open WebSockets, calls in flight and records written.

Writes bench/results/ws-soak.json and prints a table: RSS must not grow with the number of
messages (mitmproxy keeps every message of a socket unless they are dropped once observed), the
task count must return to its level, rows = responses. Not a test: a measurement. Binds
127.0.0.1 only; stops everything it started.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

from clients import rss_mb  # the sidecar's whole process tree
from llmtap.testing.harness import start_mock, start_sidecar, stop

AUDIO = base64.b64encode(os.urandom(3072)).decode()  # 4 KiB of base64 per append
# A handshake slower than websockets' 10 s default (a loaded 2-core machine) is an error, not a stall.
OPTIONS: Any = {"open_timeout": 30}


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.c: dict[str, int] = {"responses": 0, "messages_sent": 0, "messages_received": 0, "errors": 0, "sockets": 0}
        self.errors: list[str] = []

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.c[key] += n


def realtime_socket(
    client: openai.OpenAI, stop_at: float, counts: Counts, appends: int, interval: float, life_s: float
) -> None:
    end = min(stop_at, time.monotonic() + life_s)
    with client.realtime.connect(model="gpt-realtime", websocket_connection_options=OPTIONS) as conn:
        counts.add("sockets")
        conn.recv_bytes()  # session.created
        counts.add("messages_received")
        while time.monotonic() < end:
            t0 = time.monotonic()
            for _ in range(appends):
                conn.send_raw(json.dumps({"type": "input_audio_buffer.append", "audio": AUDIO}))
            conn.send_raw(json.dumps({"type": "input_audio_buffer.commit"}))
            conn.send_raw(json.dumps({"type": "response.create", "response": {"output_modalities": ["audio"]}}))
            counts.add("messages_sent", appends + 2)
            while True:
                ev = json.loads(conn.recv_bytes())
                counts.add("messages_received")
                if ev["type"] == "rate_limits.updated":
                    counts.add("responses")
                    break
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))


def responses_socket(client: openai.OpenAI, stop_at: float, counts: Counts, interval: float, life_s: float) -> None:
    end = min(stop_at, time.monotonic() + life_s)
    with client.responses.connect(websocket_connection_options=OPTIONS) as conn:
        counts.add("sockets")
        while time.monotonic() < end:
            t0 = time.monotonic()
            conn.send_raw(json.dumps({"type": "response.create", "model": "gpt-4.1", "input": "soak"}))
            counts.add("messages_sent")
            while True:
                ev = json.loads(conn.recv_bytes())
                counts.add("messages_received")
                if ev["type"] == "response.completed":
                    counts.add("responses")
                    break
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))


def keep(kind: Any, stop_at: float, counts: Counts, life_s: float, *args: Any) -> None:
    """One slot: a socket of ``kind``, replaced when its life ends, until the run ends."""
    client = openai.OpenAI(api_key="sk-ws-soak", max_retries=0)
    while time.monotonic() < stop_at:
        try:
            kind(client, stop_at, counts, *args, life_s)
        except Exception as e:
            counts.add("errors")
            with counts.lock:
                counts.errors.append(f"{time.strftime('%H:%M:%S')} {type(e).__name__}: {e}"[:300])
            time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--realtime", type=int, default=4, help="Realtime sockets kept open")
    ap.add_argument("--responses", type=int, default=4, help="Responses WebSocket-mode sockets kept open")
    ap.add_argument("--appends", type=int, default=20, help="audio appends per Realtime turn")
    ap.add_argument("--turn-interval", type=float, default=1.0, help="seconds between turns on a Realtime socket")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between responses on a Responses socket")
    ap.add_argument("--churn", type=float, default=60.0, help="seconds a churning socket lives")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ws-soak.json"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-ws-soak-"))
    mock = start_mock(tmp / "mock")
    sc = start_sidecar(tmp / "data", mock)
    os.environ.update(HTTPS_PROXY=sc.proxy_url, SSL_CERT_FILE=str(sc.bundle))
    stop_at = time.monotonic() + args.minutes * 60
    counts = Counts()
    samples: list[dict[str, Any]] = []
    whole_run = args.minutes * 60 + 60
    slots: list[threading.Thread] = []
    for i in range(args.realtime):  # slot 0 of each kind churns once a minute, the others live for the run
        life = args.churn if i == 0 else whole_run
        rt_args = (realtime_socket, stop_at, counts, life, args.appends, args.turn_interval)
        slots.append(threading.Thread(target=keep, args=rt_args))
    for i in range(args.responses):
        life = args.churn if i == 0 else whole_run
        slots.append(threading.Thread(target=keep, args=(responses_socket, stop_at, counts, life, args.interval)))
    t0 = time.monotonic()
    for th in slots:
        th.daemon = True
        th.start()
    try:
        while True:
            _, body = sc.admin_request("GET", "/healthz")
            h = json.loads(body)
            with counts.lock:
                c = dict(counts.c)
            samples.append(
                {
                    "t_s": round(time.monotonic() - t0),
                    "rss_mb": round(rss_mb(sc.proc.pid), 1),
                    "tasks": h.get("event_loop_tasks"),
                    "open_websockets": h.get("open_websockets"),
                    "inflight": h.get("inflight_calls"),
                    "written": h.get("records_written"),
                    "messages": c["messages_sent"] + c["messages_received"],
                    "responses": c["responses"],
                }
            )
            if time.monotonic() > stop_at:
                break
            time.sleep(10)
        for th in slots:
            th.join(120)
        time.sleep(3)
        _, body = sc.admin_request("GET", "/healthz")
        after = json.loads(body)
        rows = sc.sql("SELECT api, outcome, count() AS n FROM llm_calls GROUP BY api, outcome ORDER BY api, outcome")
    finally:
        stop(sc.proc)
        stop(mock.proc)
    half = [s for s in samples if s["t_s"] >= samples[-1]["t_s"] / 2]
    slope = 0.0
    if len(half) >= 2 and half[-1]["t_s"] > half[0]["t_s"]:
        slope = (half[-1]["rss_mb"] - half[0]["rss_mb"]) / (half[-1]["t_s"] - half[0]["t_s"]) * 3600
    result = {
        "minutes": args.minutes,
        "sockets_open": {"realtime": args.realtime, "responses": args.responses},
        "appends_per_turn": args.appends,
        "turn_interval_s": args.turn_interval,
        "responses_interval_s": args.interval,
        "client": dict(counts.c),
        "client_errors": counts.errors[:20],
        "rows": rows,
        "after": {
            k: after.get(k) for k in ("event_loop_tasks", "open_websockets", "inflight_calls", "records_written")
        },
        "rss_mb": {
            "first": samples[0]["rss_mb"],
            "max": max(s["rss_mb"] for s in samples),
            "last": samples[-1]["rss_mb"],
        },
        "rss_slope_mb_per_hour_second_half": round(slope, 1),
        "samples": samples,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'t (s)':>6} {'RSS MB':>8} {'tasks':>6} {'sockets':>8} {'inflight':>9} {'written':>8} {'messages':>9}")
    for s in samples:
        print(
            f"{s['t_s']:>6} {s['rss_mb']:>8} {s['tasks']!s:>6} {s['open_websockets']!s:>8} {s['inflight']!s:>9} "
            f"{s['written']!s:>8} {s['messages']:>9}"
        )
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))


if __name__ == "__main__":
    main()
