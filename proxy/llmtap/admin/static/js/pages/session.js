// One session (an agent run): its calls in order, with cost and time running totals, cache hits and
// misses, retries.
import { el, exact, facts, fmt, parseTime, usd, utc } from "../dom.js";
import { api } from "../api.js";
import { hideTip, showTip } from "../charts.js";

function costChart(rows) {
  const w = 900, h = 120, pad = 56;  // room for the cost label left of the axis
  const maxT = Math.max(...rows.map((r) => Number(r.elapsed_ms)), 1), maxC = Math.max(Number(rows[rows.length - 1].cost_total_usd), 1e-9);
  const x = (t) => pad + (w - pad - 8) * t / maxT, y = (c) => h - 18 - (h - 26) * c / maxC;
  const svg = el("svg:svg", { width: "100%", viewBox: `0 0 ${w} ${h}`, class: "session-chart", role: "img", "aria-label": "cost over the session" });
  let d = `M${x(0)},${y(0)}`;
  for (const r of rows) d += `L${x(Number(r.elapsed_ms)).toFixed(1)},${y(Number(r.cost_total_usd)).toFixed(1)}`;
  svg.append(el("svg:path", { d, fill: "none", stroke: "#ff9830", "stroke-width": 1.5 }));
  for (const r of rows) {
    const dot = el("svg:circle", { cx: x(Number(r.elapsed_ms)), cy: y(Number(r.cost_total_usd)), r: 3,
      fill: r.outcome === "error" ? "#f2495c" : r.attempt > 1 ? "#f2cc0c" : "#73bf69" });
    dot.addEventListener("mousemove", (ev) => showTip(ev, [[`${r.request_model} `, r.outcome],
      ["cost ", exact(r.cost_usd, "currencyUSD")], ["total ", exact(r.cost_total_usd, "currencyUSD")],
      ["at ", fmt(r.elapsed_ms, "ms")]]));
    dot.addEventListener("mouseleave", hideTip);
    svg.append(dot);
  }
  svg.append(el("svg:text", { x: pad - 4, y: y(maxC) + 4, "text-anchor": "end" }, usd(maxC)));
  svg.append(el("svg:text", { x: pad - 4, y: y(0), "text-anchor": "end" }, "$0"));
  svg.append(el("svg:text", { x: w - 8, y: h - 4, "text-anchor": "end" }, `${fmt(maxT, "ms")} since the first call`));
  return svg;
}

export async function sessionPage(page, params) {
  const data = await api("/api/session", { session_id: params.get("session_id") || "" });
  const s = data.summary;
  page.append(el("h2", {}, `Session ${data.session_id}`));
  const tiles = el("div", { class: "tiles" });
  for (const [k, v, title] of [
    ["calls", String(s.calls)], ["cost", usd(s.cost_usd), exact(s.cost_usd, "currencyUSD")],
    ["elapsed", fmt(s.elapsed_ms, "ms")], ["time in LLM calls", fmt(s.llm_time_ms, "ms")],
    ["tokens in / out", `${fmt(s.input_tokens, "tokens")} / ${fmt(s.output_tokens, "tokens")}`],
    ["cache hits / misses", `${s.cache_hits} / ${s.cache_misses}`, s.cache_miss_cost_usd ? `misses cost ${usd(s.cache_miss_cost_usd)} over a warm cache` : ""],
    ["retries", String(s.retries)], ["errors", String(s.errors)],
  ]) {
    // a colour only where it means something: errors red, retries amber, when there are any
    const tone = k === "errors" && s.errors > 0 ? "bad" : k === "retries" && s.retries > 0 ? "warn" : "";
    const t = el("div", { class: `tile ${tone}`.trim(), "data-tile": k, title: title || v });
    t.append(el("div", { class: "tile-value" }, v), el("div", { class: "tile-label" }, k));
    tiles.append(t);
  }
  page.append(tiles, facts([["from", utc(parseTime(s.first), true)], ["to", utc(parseTime(s.last), true)], ["models", s.models.join(", ")]]));
  page.append(costChart(data.calls));
  const t = el("table", { class: "session-calls" });
  const cols = ["#", "time", "+elapsed", "model", "feature", "outcome", "attempt", "in", "out", "cache", "cost", "cost so far",
    "duration", "LLM time so far"];
  const head = el("tr");
  cols.forEach((c) => head.append(el("th", {}, c)));
  t.append(head);
  data.calls.forEach((r, i) => {
    const tr = el("tr", { "data-trace": r.trace_id, class: r.outcome === "error" ? "failed" : r.attempt > 1 ? "retry" : "" });
    const time = el("td");
    time.append(el("a", { href: `#call?trace_id=${encodeURIComponent(r.trace_id)}` }, utc(parseTime(r.timestamp), true)));
    tr.append(el("td", { class: "num" }, String(i + 1)), time, el("td", { class: "num" }, fmt(r.elapsed_ms, "ms")),
      el("td", {}, r.request_model), el("td", {}, r.feature || "–"),
      el("td", {}, r.error_type ? `${r.outcome}: ${r.error_type}` : r.outcome), el("td", { class: "num" }, String(r.attempt)),
      el("td", { class: "num" }, fmt(r.input_tokens, "tokens")), el("td", { class: "num" }, fmt(r.output_tokens, "tokens")),
      el("td", {}, r.cache),
      el("td", { class: "num", title: exact(r.cost_usd, "currencyUSD") }, r.cost_usd === null ? "–" : usd(Number(r.cost_usd))),
      el("td", { class: "num", "data-col": "cost_total", title: exact(r.cost_total_usd, "currencyUSD") }, usd(Number(r.cost_total_usd))),
      el("td", { class: "num" }, fmt(r.duration_ms, "ms")), el("td", { class: "num" }, fmt(r.llm_time_total_ms, "ms")));
    t.append(tr);
  });
  const scroll = el("div", { class: "scroll card" });
  scroll.append(t);
  page.append(scroll);
  if (data.truncated) page.append(el("div", { class: "empty" }, "the first 2000 calls of the session"));
}
