"""``llmtap demo``: filled dashboards in under a minute, no API key.

Seeds a week of synthetic history (with a cost regression on one feature in the last hour),
starts the mock provider and a sidecar that dials it for api.openai.com and api.anthropic.com,
then sends live traffic through the proxy the way an app would (HTTPS_PROXY + the CA bundle):
OpenAI and Anthropic streams and non-streams, embeddings, Responses, rate limits, a quota
error, overloads, mid-stream errors, cancellations. Ctrl-C (or --duration) stops everything.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import ssl
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from . import synthetic
from .harness import start_mock, start_sidecar, stop

SCENARIOS: list[tuple[str, str, dict[str, Any], str, int]] = [
    # (host, path, body, x-mock-scenario, weight)
    (
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}},
        "",
        30,
    ),
    (
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}},
        "cached_reasoning",
        12,
    ),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o"}, "tool_calls", 6),
    ("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "stream": True}, "", 6),
    ("api.openai.com", "/v1/embeddings", {"model": "text-embedding-3-small", "input": ["a", "b"]}, "", 10),
    ("api.anthropic.com", "/v1/messages", {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 512}, "", 20),
    ("api.anthropic.com", "/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 256}, "", 6),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o"}, "rate_limit_429", 3),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o-mini"}, "quota_429", 1),
    ("api.anthropic.com", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64}, "overloaded_529", 2),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "mid_stream_error", 2),
    (
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 64},
        "overloaded_mid_stream",
        2,
    ),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "slow:cancel", 2),
]
FEATURES = ["search", "summarize", "chat", "extract", "classify"]


def _opener(proxy: str, bundle: Path) -> urllib.request.OpenerDirector:
    ctx = ssl.create_default_context(cafile=str(bundle))
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": proxy}), urllib.request.HTTPSHandler(context=ctx)
    )


def one_call(opener: urllib.request.OpenerDirector, rnd: random.Random) -> None:
    host, path, body, scenario, _ = rnd.choices(SCENARIOS, [s[4] for s in SCENARIOS])[0]
    feature = rnd.choice(FEATURES)
    if feature == "summarize" and rnd.random() < 0.7:  # the planted regression: a costlier prompt for one feature
        host, path, body, scenario = SCENARIOS[1][:4]
    payload = {**body, "messages": [{"role": "user", "content": f"Help me {feature} this text, please."}]}
    headers = {
        "Content-Type": "application/json",
        "Authorization": "Bearer sk-demo",
        "x-api-key": "sk-ant-demo",
        "anthropic-version": "2023-06-01",
        "x-llmtap-feature": feature,
        "x-llmtap-service": rnd.choice(synthetic.SERVICES),
        "x-llmtap-user": f"user-{rnd.randint(1, 12)}",
    }
    cancel = scenario.endswith(":cancel")
    if scenario:
        headers["x-mock-scenario"] = scenario.split(":")[0]
    req = urllib.request.Request(f"https://{host}{path}", data=json.dumps(payload).encode(), headers=headers)
    try:
        with opener.open(req, timeout=30) as resp:
            if cancel:
                resp.read(200)  # read a little, then hang up
                return
            while resp.read(4096):
                pass
    except Exception:
        pass  # errors are part of the demo


def traffic(proxy: str, bundle: Path, stop_at: float, stopping: threading.Event, rate: float) -> None:
    rnd = random.Random()
    opener = _opener(proxy, bundle)
    while time.time() < stop_at and not stopping.is_set():
        one_call(opener, rnd)
        stopping.wait(rnd.expovariate(rate))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="llmtap demo")
    add_arguments(ap)
    return run(ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data-dir", default="./llmtap-demo")
    ap.add_argument("--listen", default="127.0.0.1:8080")
    ap.add_argument("--admin", default="127.0.0.1:9464")
    ap.add_argument("--duration", type=float, default=0, help="stop after this many seconds (default: Ctrl-C)")
    ap.add_argument("--rate", type=float, default=4.0, help="live calls per second per worker (default 4)")
    ap.add_argument("--no-history", action="store_true", help="skip the week of synthetic history")


def run(args: argparse.Namespace) -> int:
    data = Path(args.data_dir).resolve()
    fresh = not (data / "store").exists()
    if fresh and not args.no_history:
        print("llmtap demo: seeding a week of synthetic history…", flush=True)
        synthetic.run(
            argparse.Namespace(
                data_dir=str(data), store="", calls=20000, days=8, windows=200, regression="summarize:1.6"
            )
        )
    mock = start_mock(data.parent / f"{data.name}-mock")
    listen_port = int(args.listen.rsplit(":", 1)[1])
    admin_port = int(args.admin.rsplit(":", 1)[1])
    sc = start_sidecar(data, mock, listen_port=listen_port, admin_port=admin_port, service="demo-app")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    print(
        f"llmtap demo: open http://127.0.0.1:{admin_port}/#token={sc.token} — live traffic is flowing "
        f"(proxy {sc.proxy_url}); Ctrl-C stops it",
        flush=True,
    )
    stop_at = time.time() + (args.duration or 10**9)
    workers = [
        threading.Thread(target=traffic, args=(sc.proxy_url, sc.bundle, stop_at, stopping, args.rate), daemon=True)
        for _ in range(3)
    ]
    for w in workers:
        w.start()
    try:
        while time.time() < stop_at and not stopping.is_set():
            stopping.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stopping.set()
        for w in workers:
            w.join(5)
        stop(sc.proc)
        stop(mock.proc)
    print(
        "llmtap demo: stopped. `llmtap check-cost --data-dir " + str(data) + "` shows the planted regression.",
        file=sys.stderr,
    )
    return 0
