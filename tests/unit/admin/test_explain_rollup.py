"""explain-cost reads whole hours from the hourly rollup and only the hours a period boundary cuts from the
calls: its rows are the rows of the same analysis over the calls alone, also when the rollup holds hours
rolled up before its explain columns existed, and when retention dropped calls the rollup still counts."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from llmtap.admin import explain_sql
from llmtap.record import CallRecord
from llmtap.store.embedded import ChdbBackend
from llmtap.telemetry.semconv import otel_traces_row

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

T1 = 1_750_000_000.25  # mid-hour, with a fraction: every period boundary cuts an hour
HOUR = 3600


def calls(service: str, n: int, seed: int) -> list[CallRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        inp, outp = rnd.choice([0, 40, 900, 5000]), rnd.choice([0, 10, 300])
        unc = inp * rnd.choice([1e-6, 3e-6])
        r = CallRecord(
            api="openai.chat_completions",  # LLM calls: the rollup holds no other request
            timestamp=T1 - rnd.uniform(0, 9 * 86400),
            trace_id=f"{seed:08x}{i:024x}",
            span_id="0" * 16,
            service=service,
            provider=rnd.choice(["openai", "anthropic"]),
            request_model=rnd.choice(["m1", "m2", "m3"]),
            feature=rnd.choice(["a", "b"]),
            prompt_version=rnd.choice(["", "v1", "v2"]),
            service_tier=rnd.choice(["", "default", "flex"]),
            attempt=rnd.choice([1, 1, 1, 2]),
            input_tokens=inp,
            output_tokens=outp,
            cache_read_tokens=inp // 3,
            usage_source="provider",
        )
        if rnd.random() < 0.9:
            r.uncached_input_cost_usd = unc
            r.input_cost_usd = unc * rnd.choice([0.4, 1.0])
            r.output_cost_usd = outp * 8e-6
            r.cost_usd = r.input_cost_usd + r.output_cost_usd + rnd.choice([0.0, 0.0, 0.002])
        out.append(r)
    return out


def load(store: ChdbBackend, records: list[CallRecord]) -> None:
    rows = [otel_traces_row(r) for r in records]
    for i in range(0, len(rows), 5000):
        store.insert_spans(rows[i : i + 5000], f"rollup-{records[0].service}-{i}")


def explain(store: ChdbBackend, service: str, by: tuple[str, ...], raw: bool = False, **periods: str) -> Any:
    saved = explain_sql.ROLLUP_DIMENSIONS
    if raw:
        explain_sql.ROLLUP_DIMENSIONS = ()
    try:
        sql = explain_sql.explain_cost_sql(by, t1=repr(T1), where=f"service = '{service}'", **periods)
    finally:
        explain_sql.ROLLUP_DIMENSIONS = saved
    return [json.loads(x) for x in store.query(sql, "JSONEachRow").splitlines()]


def same(a: list[dict[str, Any]], b: list[dict[str, Any]], by: tuple[str, ...]) -> None:
    def keyed(rows: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
        return {(r["driver"], *(r[k] for k in by)): r for r in rows}

    ka, kb = keyed(a), keyed(b)
    assert ka.keys() == kb.keys()
    for k, ra in ka.items():
        rb = kb[k]
        scale = abs(kb[("total", *[""] * len(by))]["before"]) + abs(kb[("total", *[""] * len(by))]["after"])
        assert ra["delta_usd"] == pytest.approx(rb["delta_usd"], rel=1e-9, abs=1e-12 * scale), k
        for f in ("before", "after"):
            assert (ra[f] is None) == (rb[f] is None), (k, f)
            if ra[f] is not None:
                assert ra[f] == pytest.approx(rb[f], rel=1e-9, abs=1e-12), (k, f)
        if k[0] not in ("new", "gone"):  # the models' order in a new/gone detail is the engine's
            assert ra["detail"] == rb["detail"], k


PERIODS = [
    {"w": "86400", "n": "7", "step": "86400"},  # 24h against the same 24h of the 7 days before
    {"w": "3600", "n": "7", "step": "86400"},  # 1h windows: most hours of the range are cut
    {"w": str(4 * 86400), "n": "1", "step": str(4 * 86400)},  # 4 days against the 4 days before
    {"w": "5400", "n": "1", "step": "5400"},  # 90 minutes: boundaries off the hour
]


@pytest.mark.parametrize("by", [("model", "feature"), ("provider",), ("service",)])
@pytest.mark.parametrize("periods", PERIODS, ids=["24h-7d", "1h-7d", "4d-previous", "90m-previous"])
def test_the_rollup_gives_the_rows_of_the_calls(inproc_store: ChdbBackend, by: tuple[str, ...], periods: Any) -> None:
    service = f"rollup-same-{by[0]}-{periods['w']}"
    load(inproc_store, calls(service, 3000, seed=len(service)))
    rolled = explain(inproc_store, service, by, **periods)
    assert len(rolled) > 3
    same(rolled, explain(inproc_store, service, by, raw=True, **periods), by)


def test_hours_rolled_up_before_the_explain_columns_are_read_from_the_calls(inproc_store: ChdbBackend) -> None:
    service = "rollup-unready"
    load(inproc_store, calls(service, 2000, seed=11))
    by = ("model", "feature")
    periods = PERIODS[0]
    truth = explain(inproc_store, service, by, raw=True, **periods)
    same(explain(inproc_store, service, by, **periods), truth, by)
    # A rollup row for an hour inside the window, as this version writes them: the analysis reads it …
    hour = int(T1 - 5 * HOUR) // HOUR * HOUR
    row = (
        f"INSERT INTO llm_calls_hourly (hour, service, provider, request_model, feature, first_priced_calls, "
        f"first_cost_usd_sum, first_output_cost_usd_sum, first_text_rate_output_cost_usd_sum, explain_ready, "
        f"explain_modal_ready) VALUES "
        f"(toDateTime({hour}, 'UTC'), '{service}', 'openai', 'm1', 'a', 1000, 5000.0, 5000.0, 5000.0, {{ready}}, 1)"
    )
    inproc_store.query(row.format(ready=1), "CSV")
    after = {r["driver"]: r for r in explain(inproc_store, service, by, **periods) if r["driver"] == "total"}
    assert after["total"]["after"] == pytest.approx(next(r for r in truth if r["driver"] == "total")["after"] + 5000)
    # … and a row of an earlier version in the same hour (no explain columns: explain_ready 0) sends the whole
    # hour back to the calls, as if neither row were there
    inproc_store.query(row.format(ready=0), "CSV")
    same(explain(inproc_store, service, by, **periods), truth, by)


def test_calls_that_retention_dropped_are_not_counted_from_the_rollup(tmp_path: Path) -> None:
    """Retention deletes the oldest calls; the rollup keeps its hours. Hours older than the oldest call left
    are not read from the rollup, so the analysis sees what the calls say (its own store: chDB allows one
    embedded path per process)."""
    code = f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from test_explain_rollup import T1, calls, explain, load, same
        from llmtap.store.embedded import ChdbBackend
        b = ChdbBackend(Path({str(tmp_path / "store")!r}))
        load(b, calls("svc", 3000, seed=5))
        cut = T1 - 5.5 * 86400  # mid-hour, inside the 7-day baseline
        b.query(f"ALTER TABLE llm_calls DELETE WHERE timestamp < toDateTime64({{cut}}, 6, 'UTC') "
                "SETTINGS mutations_sync = 2", "CSV")
        by = ("model", "feature")
        kw = dict(w="86400", n="7", step="86400")
        truth = explain(b, "svc", by, raw=True, **kw)
        same(explain(b, "svc", by, **kw), truth, by)
        print(json.dumps(len(truth)))
        b.close()
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) > 3
