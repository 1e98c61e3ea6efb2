"""explain-cost's SQL on the real engine: each planted change lands on its driver with the value the change
itself implies, the drivers add up to the cost change exactly (random data, hypothesis), and the periods are
exactly the contract's windows."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.admin.explain import Periods, explain_cost
from llmtap.admin.explain_sql import COST_DRIVERS, explain_cost_sql
from llmtap.record import CallRecord
from llmtap.store.embedded import ChdbBackend
from llmtap.telemetry.semconv import otel_traces_row

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

T1 = 1_750_000_000  # the end of every window here (a whole second)
_svc = itertools.count()


@dataclass
class Call:
    """One call with explicit prices (USD per token), so the expected cost change is known by construction."""

    feature: str = "f"
    model: str = "m"
    ago: float = 3600.0  # seconds before T1
    input_tokens: int = 1000
    output_tokens: int = 100
    cache_read: int = 0
    in_price: float = 2e-6  # uncached input price at the text rate
    cache_factor: float = 1.0  # input cost / uncached input cost
    out_price: float = 8e-6
    extra: float = 0.0  # cost the input/output split does not cover
    attempt: int = 1
    provider: str = "openai"
    priced: bool = True
    modal_in: float = 1.0  # uncached input cost / the same input at the text rate (audio, images)
    modal_out: float = 1.0  # output cost / the same output at the text rate
    tool: float = 0.0  # server tool fees (tool_cost_usd)

    def record(self, service: str) -> CallRecord:
        r = CallRecord(
            api="openai.chat_completions",  # an LLM call: analyses read no other request
            timestamp=T1 - self.ago,
            trace_id=f"{next(_svc):032x}",
            span_id="0" * 16,
            service=service,
            provider=self.provider,
            operation="chat",
            request_model=self.model,
            response_model=self.model,
            feature=self.feature,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            attempt=self.attempt,
            usage_source="provider",
            status_code=200,
        )
        if self.priced:
            r.text_rate_input_cost_usd = self.input_tokens * self.in_price
            unc = r.text_rate_input_cost_usd * self.modal_in
            r.uncached_input_cost_usd = unc
            r.input_cost_usd = unc * self.cache_factor
            r.text_rate_output_cost_usd = self.output_tokens * self.out_price
            r.output_cost_usd = r.text_rate_output_cost_usd * self.modal_out
            r.tool_cost_usd = self.tool
            r.cost_usd = r.input_cost_usd + r.output_cost_usd + self.tool + self.extra
        return r

    def cost(self) -> float:
        if not self.priced:
            return 0.0
        inp = self.input_tokens * self.in_price * self.modal_in * self.cache_factor
        return inp + self.output_tokens * self.out_price * self.modal_out + self.tool + self.extra


def load(store: ChdbBackend, calls: Iterable[Call]) -> str:
    service = f"explain-{next(_svc)}"
    rows = [otel_traces_row(c.record(service)) for c in calls]
    if rows:
        store.insert_spans(rows, f"explain-test-{service}")
    return service


def drivers(
    store: ChdbBackend, service: str, by: tuple[str, ...] = ("feature",), n: int = 1, step: int = 86400, w: int = 86400
) -> list[dict[str, Any]]:
    sql = explain_cost_sql(by, t1=str(T1), w=str(w), n=str(n), step=str(step), where=f"service = '{service}'")
    return [json.loads(x) for x in store.query(sql, "JSONEachRow").splitlines()]


def window(**kw: Any) -> Call:
    return Call(ago=kw.pop("ago", 3600.0), **kw)


def baseline(**kw: Any) -> Call:
    return Call(ago=kw.pop("ago", 86400 + 3600.0), **kw)


def split(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[tuple[str, str], float]]:
    total = next(r for r in rows if r["driver"] == "total")
    out = {(r["driver"], r["feature"]): r["delta_usd"] for r in rows if r["driver"] != "total"}
    return total, out


def only(rows: list[dict[str, Any]], driver: str, feature: str, expected: float) -> None:
    total, ds = split(rows)
    assert total["delta_usd"] == pytest.approx(expected, rel=1e-9)
    assert ds[(driver, feature)] == pytest.approx(expected, rel=1e-9), ds
    rest = {k: v for k, v in ds.items() if k != (driver, feature)}
    assert all(abs(v) < 1e-12 for v in rest.values()), rest


def test_audio_share_is_modality_mix(inproc_store: ChdbBackend) -> None:
    # the same calls, tokens and text prices; in the window a larger share of input and output is audio, priced
    # above text (uncached input 3x its text-rate cost, output 2x): all of the change is modality_mix
    b = [baseline(ago=86400 + 60 * (i + 1), modal_in=1.2, modal_out=1.1) for i in range(4)]
    w = [window(ago=60 * (i + 1), modal_in=3.0, modal_out=2.0) for i in range(4)]
    svc = load(inproc_store, b + w)
    only(drivers(inproc_store, svc), "modality_mix", "f", sum(c.cost() for c in w) - sum(c.cost() for c in b))


def test_tool_fees_per_call_are_tool_calls(inproc_store: ChdbBackend) -> None:
    b = [baseline(ago=86400 + 60 * (i + 1), tool=0.01) for i in range(5)]
    w = [window(ago=60 * (i + 1), tool=0.035) for i in range(5)]
    svc = load(inproc_store, b + w)
    only(drivers(inproc_store, svc), "tool_calls", "f", 5 * (0.035 - 0.01))


def test_audio_share_and_tool_fees_beside_volume_sum_to_the_change(inproc_store: ChdbBackend) -> None:
    # issue #27: an audio-share change and a tool-fee change named as their own drivers, with a volume change
    # beside them, summing to the cost change (LMDI: exactly; the contract asks 1%)
    b = [baseline(ago=86400 + 60 * (i + 1), modal_in=1.5, tool=0.01) for i in range(10)]
    w = [window(ago=60 * (i + 1), modal_in=4.0, tool=0.04) for i in range(13)]
    svc = load(inproc_store, b + w)
    total, ds = split(drivers(inproc_store, svc))
    delta = sum(c.cost() for c in w) - sum(c.cost() for c in b)
    assert total["delta_usd"] == pytest.approx(delta, rel=1e-9)
    assert sum(ds.values()) == pytest.approx(delta, rel=1e-9)
    assert ds[("modality_mix", "f")] > 0 and ds[("tool_calls", "f")] > 0 and ds[("volume", "f")] > 0
    # each driver is its factor's share: LMDI of tool fees = L(T1, T0) · ln(τ1 / τ0)
    import math

    t1, t0 = 13 * 0.04, 10 * 0.01
    assert ds[("tool_calls", "f")] == pytest.approx((t1 - t0) / math.log(t1 / t0) * math.log(0.04 / 0.01), rel=1e-9)


def test_volume(inproc_store: ChdbBackend) -> None:
    svc = load(
        inproc_store,
        [baseline(ago=86400 + 60 * (i + 1)) for i in range(10)] + [window(ago=60 * (i + 1)) for i in range(13)],
    )
    only(drivers(inproc_store, svc), "volume", "f", 3 * Call().cost())


def test_output_tokens_per_call(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(output_tokens=400), window(output_tokens=1000)])
    only(drivers(inproc_store, svc), "output_tokens_per_call", "f", 600 * 8e-6)


def test_input_tokens_per_call(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(input_tokens=1000), window(input_tokens=1500)])
    only(drivers(inproc_store, svc), "input_tokens_per_call", "f", 500 * 2e-6)


def test_cache_hit_ratio_collapse(inproc_store: ChdbBackend) -> None:
    # 80% read from cache at a tenth of the price, then 5%: the input cost factor goes 0.28 → 0.955
    svc = load(
        inproc_store,
        [baseline(cache_read=800, cache_factor=0.2 + 0.8 * 0.1), window(cache_read=50, cache_factor=0.95 + 0.05 * 0.1)],
    )
    only(drivers(inproc_store, svc), "cache_hit_ratio", "f", 1000 * 2e-6 * (0.955 - 0.28))


def test_unit_price_from_a_tier_change(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(), window(in_price=4e-6, out_price=16e-6)])
    only(drivers(inproc_store, svc), "unit_price", "f", Call().cost())


def test_mix_between_models_of_one_key(inproc_store: ChdbBackend) -> None:
    cheap, dear = dict(model="mini", in_price=1e-7, out_price=4e-7), dict(model="big", in_price=5e-6, out_price=2e-5)
    calls = [baseline(ago=86401 + i, **(dear if i < 5 else cheap)) for i in range(10)]
    calls += [window(ago=1 + i, **(dear if i < 8 else cheap)) for i in range(10)]
    svc = load(inproc_store, calls)
    expected = 3 * (Call(**dear).cost() - Call(**cheap).cost())  # type: ignore[arg-type]
    only(drivers(inproc_store, svc), "mix", "f", expected)


def test_new_gone_and_retries(inproc_store: ChdbBackend) -> None:
    svc = load(
        inproc_store,
        [
            baseline(feature="old"),
            window(feature="fresh", output_tokens=300),
            baseline(feature="f"),
            window(feature="f"),
            window(feature="f", attempt=2),
            window(feature="f", attempt=3),
        ],
    )
    total, ds = split(drivers(inproc_store, svc))
    assert ds[("new", "fresh")] == pytest.approx(Call(output_tokens=300).cost())
    assert ds[("gone", "old")] == pytest.approx(-Call().cost())
    assert ds[("retries", "f")] == pytest.approx(2 * Call().cost())
    assert total["delta_usd"] == pytest.approx(sum(ds.values()), rel=1e-12)


def test_a_term_zero_in_one_period_goes_to_the_factor_that_became_zero(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(output_tokens=0), window(output_tokens=200)])
    only(drivers(inproc_store, svc), "output_tokens_per_call", "f", 200 * 8e-6)
    svc = load(inproc_store, [baseline(in_price=0.0), window()])  # a free preview that started charging
    only(drivers(inproc_store, svc), "unit_price", "f", 1000 * 2e-6)


def test_provider_reported_cost_without_a_split_is_a_price(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(extra=0.01), window(extra=0.03)])
    only(drivers(inproc_store, svc), "unit_price", "f", 0.02)


def test_unpriced_calls_change_nothing(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(), window(), window(priced=False), window(priced=False)])
    total, ds = split(drivers(inproc_store, svc))
    assert total["delta_usd"] == 0 and not ds


def test_periods_are_exact(inproc_store: ChdbBackend) -> None:
    """[t1 - w, t1) is the window; baseline k is [t1 - k·step - w, t1 - k·step); 7d divides by 7."""
    w = 3600
    calls = [
        window(ago=w, output_tokens=1),  # t1 - w: in the window
        window(ago=0, output_tokens=10_000),  # t1: not in the window
        window(ago=0.000001, output_tokens=2),  # just before t1: in
        baseline(ago=86400 + w, output_tokens=3),  # t1 - step - w: in baseline 1
        baseline(ago=86400, output_tokens=10_000),  # t1 - step: not in any period (for w < step)
        baseline(ago=7 * 86400 + w, output_tokens=4),  # t1 - 7·step - w: in baseline 7
        baseline(ago=8 * 86400 + 1, output_tokens=10_000),  # baseline 8: outside 7d
        baseline(ago=w + 1, output_tokens=10_000),  # between the window and baseline 1: outside
    ]
    svc = load(inproc_store, calls)
    total, _ = split(drivers(inproc_store, svc, n=7, w=w))
    per = Call(output_tokens=0).cost()
    assert total["after"] == pytest.approx(2 * per + 3 * 8e-6)
    assert total["before"] == pytest.approx((2 * per + 7 * 8e-6) / 7)
    total, _ = split(drivers(inproc_store, svc, n=1, step=w, w=w))  # previous: [t1 - 2w, t1 - w)
    assert total["before"] == pytest.approx(Call(output_tokens=10_000).cost())


# -- exactness on random data -------------------------------------------------------------------------------------

prices = st.sampled_from([0.0, 1e-7, 2.5e-6, 1e-5, 7.5e-5])
call = st.builds(
    Call,
    feature=st.sampled_from(["a", "b", "c"]),
    model=st.sampled_from(["m1", "m2"]),
    provider=st.sampled_from(["openai", "azure.ai.openai"]),
    ago=st.one_of(
        st.floats(min_value=0.001, max_value=86399),  # the window
        st.floats(min_value=86401, max_value=8 * 86400 + 86399),  # the baseline days (and beyond)
    ),
    input_tokens=st.sampled_from([0, 1, 50, 1200, 90_000]),
    output_tokens=st.sampled_from([0, 1, 30, 800]),
    in_price=prices,
    out_price=prices,
    cache_factor=st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.25]),
    extra=st.sampled_from([0.0, 0.0, 0.003]),
    attempt=st.sampled_from([1, 1, 1, 2]),
    priced=st.sampled_from([True, True, True, False]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(call, min_size=1, max_size=30),
    days=st.sampled_from([1, 7]),
    by=st.sampled_from([("feature",), ("model", "feature"), ("provider",)]),
)
def test_drivers_add_up_to_the_change_exactly(
    inproc_store: ChdbBackend, calls: list[Call], days: int, by: tuple[str, ...]
) -> None:
    svc = load(inproc_store, calls)
    rows = drivers(inproc_store, svc, by=by, n=days)
    w0 = sum(c.cost() for c in calls if 86400 < c.ago <= (days + 1) * 86400) / days
    w1 = sum(c.cost() for c in calls if 0 < c.ago <= 86400)
    total = next((r for r in rows if r["driver"] == "total"), None)
    if total is None:
        assert w0 == w1 == 0
        return
    scale = abs(w0) + abs(w1)
    assert total["before"] == pytest.approx(w0, rel=1e-9, abs=1e-15)
    assert total["after"] == pytest.approx(w1, rel=1e-9, abs=1e-15)
    parts = [r for r in rows if r["driver"] != "total"]
    assert {r["driver"] for r in parts} <= set(COST_DRIVERS)
    assert abs(sum(r["delta_usd"] for r in parts) - (w1 - w0)) <= 1e-9 * scale + 1e-15
    assert all(r["delta_usd"] == r["delta_usd"] for r in parts)  # no NaN


def test_json_shape_follows_the_contract(inproc_store: ChdbBackend) -> None:
    svc = load(inproc_store, [baseline(output_tokens=400), window(output_tokens=1000), window(feature="new")])

    def rows(sql: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in inproc_store.query(sql, "JSONEachRow").splitlines()]

    res = explain_cost(rows, Periods.parse("24h", "previous", T1), ["feature"], where=f"service = '{svc}'")
    assert set(res) >= {"window", "baseline", "cost_usd", "baseline_cost_usd", "delta_usd", "drivers"}
    assert res["delta_usd"] == pytest.approx(res["cost_usd"] - res["baseline_cost_usd"])
    assert [d["driver"] for d in res["drivers"]] == ["output_tokens_per_call", "new"]  # sorted by |delta_usd|
    assert res["drivers"][0]["key"] == {"feature": "f"} and res["drivers"][0]["before"] == 400
    assert res["window"]["seconds"] == 86400 and res["window"]["to"] == "2025-06-15T15:06:40Z"
