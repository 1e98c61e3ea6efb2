"""Peak RSS only: issue #25's memory lines in a minute, each process of each path shown at the peak.

    .venv/bin/python bench/rss.py                          # bare mitmproxy, server store, embedded store
    .venv/bin/python bench/rss.py --paths bare,server --rounds 3
    .venv/bin/python bench/rss.py --paths server --variant arena2=MALLOC_ARENA_MAX=2   # an A/B in one run

The paths are bench/run.py's (bare mitmdump with its stream-only addon; llmtap with ``--store`` at a
ClickHouse-HTTP endpoint over chDB, no OTLP; llmtap with its embedded store), against the same mock
origin, and the load is its ``peak_rss``: ``--conc`` streams at once, each on a new connection (CONNECT +
TLS), 20 events 50 ms apart. ``--variant NAME=VAR=VALUE[,VAR=VALUE…]`` adds a server-store sidecar whose
processes see those variables (a variant of the embedded path with ``--variant-store embedded``); rounds
alternate between the paths so drift cancels out. Each path's idle RSS, its peak, and the processes at
that peak (RSS, anonymous part, threads) are printed; ``--json FILE`` keeps them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import Path_, descendants, fresh
from llmtap.testing.harness import start_chhttp, start_mock, start_sidecar, stop
from run import start_bare

FIELDS = ("VmRSS", "RssAnon", "RssFile", "Threads")


def process_table(pid: int) -> dict[int, dict[str, Any]]:
    """``pid`` and its descendants: their role (the module they run) and :data:`FIELDS` (KB; threads)."""
    out: dict[int, dict[str, Any]] = {}
    for p in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text().splitlines()
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        row: dict[str, Any] = {"role": role(argv)}
        for line in status:
            key, _, value = line.partition(":")
            if key in FIELDS:
                row[key] = int(value.split()[0])
        out[p] = row
    return out


def role(argv: list[bytes]) -> str:
    words = [a.decode(errors="replace") for a in argv]
    if "-m" in words:
        module = words[words.index("-m") + 1]
        return {"llmtap": "supervisor"}.get(module, module.rsplit(".", 1)[-1])
    return Path(words[0]).name if words and words[0] else "?"


def total(table: dict[int, dict[str, Any]], key: str = "VmRSS") -> int:
    return sum(int(r.get(key, 0)) for r in table.values())


def peak(p: Path_, conc: int) -> dict[str, Any]:
    """bench/run.py's ``peak_rss`` load, sampled every 50 ms; the process table at the highest total."""
    assert p.pid
    pid = p.pid
    idle = process_table(pid)
    best = idle
    done = threading.Event()

    def sample() -> None:
        nonlocal best
        while not done.is_set():
            now = process_table(pid)
            if total(now) > total(best):
                best = now
            time.sleep(0.05)

    th = threading.Thread(target=sample)
    th.start()
    with concurrent.futures.ThreadPoolExecutor(conc) as pool:
        for f in [pool.submit(fresh, p, 20, 50) for _ in range(conc)]:
            f.result()
    done.set()
    th.join()
    return {"idle": idle, "peak": best, "after": process_table(pid)}


def mb(kb: float) -> str:
    return f"{kb / 1024:6.1f}"


def show(name: str, rounds: list[dict[str, Any]], conc: int) -> None:
    peaks = [total(r["peak"]) for r in rounds]
    best = max(rounds, key=lambda r: total(r["peak"]))
    shown = ", ".join(mb(x).strip() for x in peaks)
    anon, median = mb(total(best["peak"], "RssAnon")).strip(), mb(statistics.median(peaks)).strip()
    print(f"\n== {name}: peak RSS {mb(max(peaks))} MB (rounds: {shown}; median {median}), anonymous {anon}")
    print(f"   {'process':<12} {'idle':>6} {'peak':>6} {'anon':>6} {'file':>6} {'after':>6} thr  KB/stream")
    idle0, after = rounds[0]["idle"], best["after"]
    for pid, row in sorted(best["peak"].items(), key=lambda kv: kv[1]["role"]):
        i = idle0.get(pid, {}).get("VmRSS", 0)
        a = after.get(pid, {}).get("VmRSS", 0)
        per = (row["VmRSS"] - i) / conc if i else float("nan")
        print(f"   {row['role']:<12} {mb(i)} {mb(row['VmRSS'])} {mb(row.get('RssAnon', 0))} "
              f"{mb(row.get('RssFile', 0))} {mb(a)} {row.get('Threads', 0):>3}  {per:8.1f}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", default="bare,server,embedded", help="comma-separated: bare, server, embedded")
    ap.add_argument("--variant", action="append", default=[], help="NAME=VAR=VALUE[,VAR=VALUE…] (repeatable)")
    ap.add_argument("--variant-store", default="server", choices=("server", "embedded"))
    ap.add_argument("--conc", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", default="", help="llmtap run --workers (default: the sidecar's own)")
    ap.add_argument("--json", default="", help="write every round's process tables here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-rss-"))
    procs: list[Any] = []
    paths: list[Path_] = []
    try:
        mock = start_mock(tmp / "mock")
        procs.append(mock.proc)
        wanted = args.paths.split(",")
        store: list[str] = []
        if "server" in wanted or (args.variant and args.variant_store == "server"):
            ch = start_chhttp(tmp / "ch")
            assert ch.proc is not None
            procs.append(ch.proc)
            store = ["--store", f"clickhouse://default:@127.0.0.1:{ch.port}/llmtap"]
        extra = ["--workers", args.workers] if args.workers else []
        if "bare" in wanted:
            bare, path = start_bare(tmp, mock)
            procs.append(bare)
            paths.append(path)

        def sidecar(name: str, flags: list[str], env: dict[str, str] | None = None) -> None:
            sc = start_sidecar(tmp / name, mock, *flags, *extra, env=env)
            procs.append(sc.proc)
            paths.append(Path_(name, ("127.0.0.1", sc.listen), sc.data_dir / "ca/mitmproxy-ca-cert.pem", sc.proc.pid))

        if "server" in wanted:
            sidecar("server", store)
        if "embedded" in wanted:
            sidecar("embedded", [])
        for spec in args.variant:
            name, _, assignments = spec.partition("=")
            env = dict(a.split("=", 1) for a in assignments.split(",") if a)
            sidecar(name, store if args.variant_store == "server" else [], env)
        time.sleep(2.0)  # start-up settles (the supervisor's first-second work, the workers' imports)
        for p in paths:  # warm-up: certificates made, first calls' set-up
            fresh(p, 3, 1)
        results: dict[str, list[dict[str, Any]]] = {p.name: [] for p in paths}
        for r in range(args.rounds):
            for p in paths if r % 2 == 0 else list(reversed(paths)):
                print(f"round {r + 1}/{args.rounds} {p.name}…", file=sys.stderr)
                results[p.name].append(peak(p, args.conc))
        for p in paths:
            show(p.name, results[p.name], args.conc)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
