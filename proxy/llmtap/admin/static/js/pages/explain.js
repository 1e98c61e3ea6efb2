// "Why did cost change? Why is it slow?": the explain analyses for a window and its baseline, the same
// numbers as `llmtap explain-cost` / `explain-latency` (the server runs the same SQL and the same formatting).
import { DRIVER_UNITS, el, exact, fmt, ratio, usd } from "../dom.js";
import { api, NeedLogin, StoreDown } from "../api.js";

const WINDOWS = ["1h", "6h", "24h"];
const BASELINES = [["7d", "same window, previous 7 days"], ["1d", "same window, yesterday"], ["previous", "the window before"]];
const BYS = ["model,feature", "feature", "model", "provider", "service", "tenant", "user"];


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
  const detail = res.drivers.some((d) => d.detail);  // a column only when some driver has one
  for (const h of ["driver", ...res.by, "change", "", "before", "after", ...(detail ? ["detail"] : [])]) {
    head.append(el("th", {}, h));
  }
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
    const f = DRIVER_UNITS[d.driver] || fmt;
    tr.append(el("td", { class: "num" }, f(d.before)), el("td", { class: "num" }, f(d.after)));
    if (detail) tr.append(el("td", {}, d.detail || ""));
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
        el("td", { class: "num" }, ratio(f.ratio)),
        el("td", { class: "num" }, fmt(f.delta_ms, "ms")), el("td", {}, f.unchanged.join(", ")));
      t.append(tr);
    }
    box.append(t);
  }
  return box;
}

// The window control: one button per window, the one shown pressed.
function windowButtons(value, onChange) {
  const label = el("label", { class: "window-control" });
  label.append(el("span", {}, "window "));
  const group = el("span", { class: "segmented", role: "group", "aria-label": "window", "data-explain": "window" });
  for (const w of WINDOWS) {
    const b = el("button", { type: "button", "aria-pressed": String(w === value), "data-window": w }, `last ${w}`);
    b.addEventListener("click", () => onChange(w));
    group.append(b);
  }
  label.append(group);
  return label;
}

// how far cost moved against the baseline (a window with no baseline cost has nothing to compare with)
const relative = (res) => (res.baseline_cost_usd > 0 ? Math.abs(res.delta_usd) / res.baseline_cost_usd : 0);
const SIGNIFICANT = 0.05;  // a window whose cost moved less than this is no story
// what ends the page rather than fills a box: the login box, or the whole page again once the store is back
const endsPage = (e) => e instanceof NeedLogin || e instanceof StoreDown;

// Without a window in the link: the window whose cost moved the most against its baseline (the demo's planted
// one-hour regression shows in 1h at once, where 24h dilutes it), else 24h; the note says why.
async function pickWindow(q) {
  const all = await Promise.all(WINDOWS.map((w) => api("/api/explain-cost",
    { window: w, baseline: q.baseline, end: q.end, by: q.by.split(",") }).then((r) => [w, r])));
  const best = all.reduce((a, b) => (relative(b[1]) > relative(a[1]) ? b : a));
  const moved = relative(best[1]) >= SIGNIFICANT;
  const pct = ([w, r]) => `${r.delta_usd >= 0 ? "+" : "−"}${(100 * relative(r)).toFixed(0)}% over ${w}`;
  const note = moved
    ? `Opened on the last ${best[0]}: its cost moved the most against the baseline (${all.map(pct).join(", ")}).`
    : `No window's cost moved by ${SIGNIFICANT * 100}% or more (${all.map(pct).join(", ")}): the last 24h.`;
  const window = moved ? best[0] : "24h";
  return { window, note, result: all.find(([w]) => w === window)[1] };
}

export async function explainPage(page, params) {
  const q = { window: params.get("window") || "", baseline: params.get("baseline") || "7d",
    by: params.get("by") || "model,feature", metric: params.get("metric") || "duration" };
  if (params.get("end")) q.end = params.get("end");  // a fixed window (unix seconds or ISO), else up to now
  let picked = null;
  if (!q.window) {
    try {
      picked = await pickWindow(q);
      q.window = picked.window;
    } catch (e) {
      if (endsPage(e)) throw e;
      q.window = "24h";  // the cost part below says what went wrong
    }
  }
  const go = (k) => (v) => { const p = new URLSearchParams({ ...q, [k]: v }); location.hash = `#explain?${p}`; };
  const controls = el("div", { class: "page-controls" });
  controls.append(windowButtons(q.window, go("window")), picker("baseline", BASELINES, q.baseline, go("baseline")),
    picker("by", BYS, q.by, go("by")), picker("latency", ["duration", "ttft"], q.metric, go("metric")));
  page.append(controls);
  if (picked) page.append(el("p", { class: "window-note", "data-note": "window" }, picked.note));
  const costBox = el("section", { class: "card", "data-section": "cost" }, "…");
  const latBox = el("section", { class: "card", "data-section": "latency" }, "…");
  page.append(el("h2", {}, "Why did cost change?"), costBox, el("h2", {}, "Why is it slow?"), latBox);
  const cost = picked ? Promise.resolve(picked.result)
    : api("/api/explain-cost", { window: q.window, baseline: q.baseline, end: q.end, by: q.by.split(",") });
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
    if (endsPage(e)) throw e;
    costBox.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    costBox.dataset.state = "error";
  }
  try {
    latBox.replaceChildren(latencyBlock(await lat));
    latBox.dataset.state = "rendered";
  } catch (e) {
    if (endsPage(e)) throw e;
    latBox.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    latBox.dataset.state = "error";
  }
}
