"""``llmtap demo``: filled dashboards in under a minute, no API key.

Seeds a week of synthetic history (with a cost regression on one feature in the last hour),
starts the mock provider and a sidecar that dials it for api.openai.com and api.anthropic.com,
then sends live traffic through the proxy the way an app would (HTTPS_PROXY + the CA bundle, the SDKs'
user agents, each call its own ids, a user's calls grouped in sessions like the history's):
OpenAI and Anthropic streams and non-streams, embeddings, Responses, rate limits, a quota
error, overloads, mid-stream errors, cancellations. Ctrl-C (or --duration) stops everything.

The live traffic keeps the history's pace (its rate at this time of day) and its call sizes (prompt
and output tokens drawn like the history's, the regressed feature's dearer), so the charts continue
instead of spiking, and the regression the demo announces is what ``check-cost`` finds.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import random
import shlex
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
HISTORY_CALLS = 60_000  # over HISTORY_DAYS: ~0.09 calls/s on average (0.05-0.15 over the day), the live rate too
HISTORY_DAYS = 8
WINDOW_CALLS = 1000  # steady calls in the last hour and the same hour of each earlier day: check-cost's windows
REGRESSION = synthetic.Regression("summarize", 1.6)  # planted in the last hour, and carried on by live traffic
# The live calls' sizes follow the history's (tokens → cost): input ~ lognormal around 1200 tokens.
MEAN_OUTPUT = {m[2]: m[5] for m in synthetic.MODELS}
MAX_EVENTS = 300  # a live stream's content events (= its output tokens), 5 ms apart
USER_AGENTS = {"api.openai.com": "OpenAI/Python 1.109.1", "api.anthropic.com": "Anthropic/Python 0.69.0"}


def _opener(proxy: str, bundle: Path) -> urllib.request.OpenerDirector:
    ctx = ssl.create_default_context(cafile=str(bundle))
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": proxy}), urllib.request.HTTPSHandler(context=ctx)
    )


def one_call(opener: urllib.request.OpenerDirector, rnd: random.Random) -> None:
    host, path, body, scenario, _ = rnd.choices(SCENARIOS, [s[4] for s in SCENARIOS])[0]
    feature = rnd.choice(synthetic.FEATURES)
    payload = {**body, "messages": [{"role": "user", "content": f"Help me {feature} this text, please."}]}
    user = rnd.randint(1, 40)
    headers = {
        "Content-Type": "application/json",
        "Authorization": "Bearer sk-demo",
        "x-api-key": "sk-ant-demo",
        "anthropic-version": "2023-06-01",
        "User-Agent": USER_AGENTS[host],  # the official SDKs' own: the viewer names the client
        "x-llmtap-feature": feature,
        "x-llmtap-service": rnd.choice(synthetic.SERVICES),
        "x-llmtap-user": f"user-{user}",
        "x-llmtap-session": synthetic.session_of(user, time.time(), rnd.randint(1, 500)),
        "x-llmtap-tenant": rnd.choice(["acme", "globex", "initech"]),
        "x-mock-id": f"{rnd.getrandbits(48):012x}",  # each call its own request and response ids
    }
    if not scenario:  # an ordinary call: as large as the history's, and dearer for the regressed feature
        factor = REGRESSION.factor if feature == REGRESSION.feature else 1.0
        prompt = int(rnd.lognormvariate(math.log(1200), 0.8) * factor)
        headers["x-mock-prompt-tokens"] = str(prompt)
        mean_out = MEAN_OUTPUT.get(str(body["model"]), 250)
        if mean_out:  # embeddings have no output
            out = max(1, int(rnd.lognormvariate(math.log(mean_out), 0.5) * factor))
            headers["x-mock-events"] = str(min(out, MAX_EVENTS))
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


def live_rate(calls: int, days: float, now: float) -> float:
    """Calls per second of the seeded history at this time of day: the live traffic keeps its pace."""
    return calls / (days * 86400) * synthetic.daily_weight(now)


def traffic(proxy: str, bundle: Path, stop_at: float, stopping: threading.Event, rate: float) -> None:
    """Calls arrive at ``rate`` per second (Poisson), however long each takes: a slow stream does not
    hold back the next arrival (up to 32 calls in flight)."""
    rnd = random.Random()
    opener = _opener(proxy, bundle)
    with concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="llmtap-demo") as pool:
        stopping.wait(rnd.expovariate(rate))
        while time.time() < stop_at and not stopping.is_set():
            pool.submit(one_call, opener, random.Random(rnd.random()))
            stopping.wait(rnd.expovariate(rate))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="llmtap demo")
    add_arguments(ap)
    return run(ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from ..cli.parser import number

    ap.add_argument("--data-dir", default="./llmtap-demo")
    ap.add_argument("--listen", default="127.0.0.1:8080")
    ap.add_argument("--admin", default="127.0.0.1:9464")
    ap.add_argument(
        "--duration",
        type=number("--duration", float, 0),
        default=0,
        help="stop after this many seconds (default: Ctrl-C)",
    )
    ap.add_argument(
        "--rate",
        type=number("--rate", float, 0.001),
        default=None,
        help="live calls per second (default: the seeded history's rate at this time of day, ~0.05-0.15)",
    )
    ap.add_argument("--no-history", action="store_true", help="skip the week of synthetic history")


def _llmtap() -> str:
    """How this process was started, so that the commands it prints run as they are."""
    if Path(sys.argv[0]).name == "llmtap":
        return shlex.quote(sys.argv[0])
    return f"{shlex.quote(sys.executable)} -m llmtap"


def seed_history(data: Path, windows_only: bool = False) -> None:
    """The demo's week of history (and this hour's baseline windows) in ``data``'s store: the viewer's tests
    seed the same."""
    synthetic.run(
        argparse.Namespace(
            data_dir=str(data),
            store="",
            calls=0 if windows_only else HISTORY_CALLS,
            days=HISTORY_DAYS,
            windows=WINDOW_CALLS,
            regression=f"{REGRESSION.feature}:{REGRESSION.factor}",
        )
    )


def run(args: argparse.Namespace) -> int:
    data = Path(args.data_dir).resolve()
    seeded = (data / "store").exists()
    if not args.no_history:
        print(f"llmtap demo: seeding {'baseline windows' if seeded else 'a week of synthetic history'}…", flush=True)
        seed_history(data, windows_only=seeded)  # a re-run adds only this hour's baseline windows
    mock = start_mock(data.parent / f"{data.name}-mock")
    listen_port = int(args.listen.rsplit(":", 1)[1])
    admin_port = int(args.admin.rsplit(":", 1)[1])
    sc = start_sidecar(data, mock, listen_port=listen_port, admin_port=admin_port, service="demo-app")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    rate = args.rate or live_rate(HISTORY_CALLS, HISTORY_DAYS, time.time())
    llmtap = _llmtap()
    print(
        f"llmtap demo: open http://127.0.0.1:{admin_port}/#token={sc.token} — live traffic is flowing "
        f"(proxy {sc.proxy_url}, "
        f"{rate * 60:.1f} calls/min: the seeded history's rate at this hour); Ctrl-C stops it\n"
        f'llmtap demo: point your own code at it: eval "$({llmtap} env --data-dir {shlex.quote(str(data))} '
        f'--listen 127.0.0.1:{listen_port})"',
        flush=True,
    )
    stop_at = time.time() + (args.duration or 10**9)
    workers = [threading.Thread(target=traffic, args=(sc.proxy_url, sc.bundle, stop_at, stopping, rate), daemon=True)]
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
            w.join(35)  # the calls in flight end (their timeout is 30 s)
        stop(sc.proc)
        stop(mock.proc)
    print(
        f"llmtap demo: stopped. `{llmtap} check-cost --data-dir {shlex.quote(str(data))} --by feature` shows the "
        f"planted regression ({REGRESSION.feature}: cost per call x{REGRESSION.factor} in the last hour).",
        file=sys.stderr,
    )
    return 0
