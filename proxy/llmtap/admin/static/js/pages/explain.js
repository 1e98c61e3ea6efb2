// "Why did cost change? Why is it slow?": the explain analyses for a window and its baseline, the same
// numbers as `llmtap explain-cost` / `explain-latency` (the server runs the same SQL and the same formatting).
import { el, exact, fmt, usd } from "../dom.js";
import { api, NeedLogin } from "../api.js";

const WINDOWS = ["1h", "6h", "24h"];
const BASELINES = [["7d", "same window, previous 7 days"], ["1d", "same window, yesterday"], ["previous", "the window before"]];
const BYS = ["model,feature", "feature", "model", "provider", "service", "tenant", "user"];

const beforeAfter = {
  volume: (v) => fmt(v) + " calls",
  mix: (v) => v === null ? "–" : `${(v * 100).toFixed(0)}%`,
  input_tokens_per_call: (v) => fmt(v) + " tok",
  output_tokens_per_call: (v) => fmt(v) + " tok",
  cache_hit_ratio: (v) => v === null ? "–" : `${(v * 100).toFixed(0)}% cached`,
  unit_price: (v) => v === null ? "–" : `${usd(v)}/Mtok`,
  new: (v) => usd(v), gone: (v) => usd(v),
  retries: (v) => fmt(v) + " calls",
};

function picker(name, options, value, onChange) {
  const sel = el("select", { "data-explain": name });
  for (const o of options) {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    sel.append(el("option", { value: v }, label));
  }
  sel.value = value;
  sel.addEventListener("change", () => onChange(sel.value));
  const label = el("label", {}, `${name} `);
  label.append(sel);
  return label;
}

function costTable(res) {
  const max = Math.max(...res.drivers.map((d) => Math.abs(d.delta_usd)), 1e-12);
  const table = el("table", { class: "drivers", "data-table": "cost" });
  const head = el("tr");
  for (const h of ["driver", ...res.by, "change", "", "before", "after", "detail"]) head.append(el("th", {}, h));
  table.append(head);
  for (const d of res.drivers.slice(0, 25)) {
    const tr = el("tr", { "data-driver": d.driver, "data-key": res.by.map((b) => d.key[b]).join("/"),
      "data-delta": String(d.delta_usd) });
    tr.append(el("td", {}, d.driver.replaceAll("_", " ")));
    for (const b of res.by) tr.append(el("td", {}, d.key[b] || "–"));
    tr.append(el("td", { class: "num", title: exact(d.delta_usd, "currencyUSD") }, (d.delta_usd >= 0 ? "+" : "") + usd(d.delta_usd)));
    const bar = el("td", { class: "bar-cell" });
    bar.append(el("div", { class: d.delta_usd >= 0 ? "bar up" : "bar down", style: `width:${(100 * Math.abs(d.delta_usd) / max).toFixed(1)}%` }));
    tr.append(bar);
    const f = beforeAfter[d.driver] || fmt;
    tr.append(el("td", { class: "num" }, f(d.before)), el("td", { class: "num" }, f(d.after)), el("td", {}, d.detail || ""));
    table.append(tr);
  }
  if (res.drivers.length > 25) {
    const rest = res.drivers.slice(25).reduce((a, d) => a + d.delta_usd, 0);
    const tr = el("tr");
    tr.append(el("td", { colspan: 3 + res.by.length }, `… ${res.drivers.length - 25} more drivers, ${usd(rest)} together`));
    table.append(tr);
  }
  return table;
}

function latencyBlock(res) {
  const box = el("div", { class: "latency", "data-metric": res.metric });
  box.append(el("pre", { class: "explain-text" }, res.text));
  if (res.findings.length) {
    const t = el("table", { "data-table": "findings" });
    const head = el("tr");
    for (const h of ["part", "when", "server", "models", "×", "ms added", "unchanged"]) head.append(el("th", {}, h));
    t.append(head);
    for (const f of res.findings) {
      const tr = el("tr", { "data-component": f.component, "data-server": f.server_address });
      tr.append(el("td", {}, f.component.replaceAll("_", " ")),
        el("td", {}, f.whole_window ? "whole window" : `${f.from.slice(11, 16)}–${f.to.slice(11, 16)} UTC`),
        el("td", {}, f.server_address), el("td", {}, f.models.join(", ")),
        el("td", { class: "num" }, f.ratio === null ? "–" : `×${f.ratio.toPrecision(2)}`),
        el("td", { class: "num" }, fmt(f.delta_ms, "ms")), el("td", {}, f.unchanged.join(", ")));
      t.append(tr);
    }
    box.append(t);
  }
  return box;
}

export async function explainPage(page, params) {
  const q = { window: params.get("window") || "24h", baseline: params.get("baseline") || "7d",
    by: params.get("by") || "model,feature", metric: params.get("metric") || "duration" };
  if (params.get("end")) q.end = params.get("end");  // a fixed window (unix seconds or ISO), else up to now
  const go = (k) => (v) => { const p = new URLSearchParams({ ...q, [k]: v }); location.hash = `#explain?${p}`; };
  const controls = el("div", { class: "page-controls" });
  controls.append(picker("window", WINDOWS, q.window, go("window")), picker("baseline", BASELINES, q.baseline, go("baseline")),
    picker("by", BYS, q.by, go("by")), picker("latency", ["duration", "ttft"], q.metric, go("metric")));
  const costBox = el("section", { class: "card", "data-section": "cost" }, "…");
  const latBox = el("section", { class: "card", "data-section": "latency" }, "…");
  page.append(controls, el("h2", {}, "Why did cost change?"), costBox, el("h2", {}, "Why is it slow?"), latBox);
  const cost = api("/api/explain-cost", { window: q.window, baseline: q.baseline, end: q.end, by: q.by.split(",") });
  const lat = api("/api/explain-latency", { window: q.window, baseline: q.baseline, end: q.end, metric: q.metric,
    quantile: "p95" });
  lat.catch(() => {});  // awaited below; handled even when the cost part ends the page first (the login box)
  try {
    const res = await cost;
    costBox.replaceChildren(el("pre", { class: "explain-text" }, res.text.split("\n").slice(0, 2).join("\n")),
      res.drivers.length ? costTable(res) : el("div", { class: "empty" }, "no change to explain"));
    costBox.dataset.state = "rendered";
    costBox.dataset.delta = String(res.delta_usd);
  } catch (e) {
    if (e instanceof NeedLogin) throw e;  // the login box, not an error in the box
    costBox.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    costBox.dataset.state = "error";
  }
  try {
    latBox.replaceChildren(latencyBlock(await lat));
    latBox.dataset.state = "rendered";
  } catch (e) {
    if (e instanceof NeedLogin) throw e;
    latBox.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    latBox.dataset.state = "error";
  }
}
