// llmtap's built-in viewer: renders the panels of dashboards/*.json against the sidecar's store.
// The server expands the panels' SQL (Grafana ClickHouse macros; variables bound as query parameters);
// this file draws. Every value from the store is put into the page as text (textContent, attribute values,
// CSSOM), never as HTML. The data API needs the admin token: the page exchanges it once for an HttpOnly
// session cookie (the login box, or a #token=... link whose fragment never leaves the browser).
"use strict";

const COLORS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#ff780a", "#96d98d",
  "#ffee52", "#ca95e5", "#fade2a"];
const state = { boards: [], board: null, vars: {}, timer: null, loadSeq: 0 };
const $ = (id) => document.getElementById(id);
const NS = "http://www.w3.org/2000/svg";

class NeedLogin extends Error {}

async function api(path, body) {
  const opts = body === undefined ? { credentials: "same-origin" } : { method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const resp = await fetch(path, opts);
  if (resp.status === 401) throw new NeedLogin("the admin token is needed");
  if (resp.status === 204) return {};
  const data = await resp.json().catch(() => ({ error: `HTTP ${resp.status}` }));
  if (!resp.ok) throw new Error(data.error || `HTTP ${resp.status}`);
  return data;
}

async function login(token) {
  await api("/api/login", { token });
}

function showLogin(message) {
  const box = el("form", { id: "login", class: "login" });
  const input = el("input", { type: "password", size: 40, autocomplete: "current-password",
    placeholder: "admin token (<data-dir>/admin-token)", "aria-label": "admin token" });
  const err = el("div", { class: "error" }, message || "");
  box.append(el("label", {}, "Admin token "), input, el("button", { type: "submit" }, "Sign in"), err);
  box.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { await login(input.value.trim()); location.reload(); } catch (e) { err.textContent = "Wrong token."; }
  });
  $("grid").replaceChildren(box);
}

function timeRange() {
  const to = Date.now() / 1000;
  return { from: to - Number($("range").value), to };
}

function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);  // CSSOM: no inline-style CSP exception
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

// -- formatting ------------------------------------------------------------------------------
function fmt(v, unit) {
  if (v === null || v === undefined || v === "") return "–";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  const short = (x) => Math.abs(x) >= 1e9 ? (x / 1e9).toFixed(1) + "B" : Math.abs(x) >= 1e6 ? (x / 1e6).toFixed(1) + "M"
    : Math.abs(x) >= 1e4 ? (x / 1e3).toFixed(1) + "k" : Number.isInteger(x) ? String(x) : x.toPrecision(3);
  switch (unit) {
    case "currencyUSD": return "$" + (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 1 ? n.toFixed(2) : n.toPrecision(3));
    case "percentunit": return (n * 100).toFixed(n < 0.1 ? 2 : 1) + "%";
    case "ms": return n >= 1000 ? (n / 1000).toFixed(2) + " s" : n.toFixed(n < 10 ? 1 : 0) + " ms";
    case "s": return n.toFixed(n < 10 ? 2 : 0) + " s";
    case "reqps": return short(n) + "/s";
    default: return short(n);
  }
}

const parseTime = (s) => typeof s === "number" ? s * 1000 : Date.parse(String(s).replace(" ", "T") + "Z");
const isNum = (t) => /Int|Float|Decimal/.test(t);
const isTime = (t) => /DateTime|Date/.test(t);

// -- panels ---------------------------------------------------------------------------------------
function series(frame) {
  const cols = frame.columns;
  const tIdx = cols.findIndex((c) => isTime(c.type));
  const labels = cols.map((c, i) => i).filter((i) => i !== tIdx && !isNum(cols[i].type));
  const nums = cols.map((c, i) => i).filter((i) => i !== tIdx && isNum(cols[i].type));
  const map = new Map();
  for (const row of frame.rows) {
    const t = parseTime(row[tIdx]);
    const label = labels.map((i) => row[i]).join(" ");
    for (const i of nums) {
      const name = [label, nums.length > 1 || !label ? cols[i].name : ""].filter(Boolean).join(" · ");
      if (!map.has(name)) map.set(name, []);
      if (row[i] !== null) map.get(name).push([t, Number(row[i])]);
    }
  }
  return [...map.entries()].map(([name, pts]) => ({ name, pts: pts.sort((a, b) => a[0] - b[0]) }));
}

function axes(svg, w, h, pad, xmin, xmax, ymin, ymax, unit) {
  for (let i = 0; i <= 4; i++) {
    const y = pad.t + (h - pad.t - pad.b) * (1 - i / 4);
    svg.append(el("svg:line", { x1: pad.l, x2: w - pad.r, y1: y, y2: y, class: "grid-line" }));
    svg.append(el("svg:text", { x: pad.l - 4, y: y + 3, "text-anchor": "end" }, fmt(ymin + (ymax - ymin) * i / 4, unit)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = xmin + (xmax - xmin) * i / 4;
    const d = new Date(t);
    const label = (xmax - xmin) > 2 * 86400e3 ? `${d.getUTCMonth() + 1}/${d.getUTCDate()} ${String(d.getUTCHours()).padStart(2, "0")}h`
      : `${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`;
    svg.append(el("svg:text", { x: pad.l + (w - pad.l - pad.r) * i / 4, y: h - 4, "text-anchor": "middle" }, label));
  }
}

function drawTimeseries(body, frame, panel) {
  const list = series(frame);
  if (!list.length) return empty(body);
  const unit = panel.fieldConfig?.defaults?.unit;
  const stacked = panel.fieldConfig?.defaults?.custom?.stacking?.mode === "normal";
  const w = Math.max(body.clientWidth - 16, 200), h = Math.max(body.clientHeight - 26, 80);
  const pad = { l: 54, r: 8, t: 6, b: 16 };
  const xs = list.flatMap((s) => s.pts.map((p) => p[0]));
  let xmin = Math.min(...xs), xmax = Math.max(...xs);
  if (xmin === xmax) { xmin -= 60e3; xmax += 60e3; }
  let tops = list.flatMap((s) => s.pts.map((p) => p[1]));
  if (stacked) {
    const sums = new Map();
    for (const s of list) for (const [t, v] of s.pts) sums.set(t, (sums.get(t) || 0) + v);
    tops = [...sums.values()];
  }
  const ymin = Math.min(0, ...tops), ymax = Math.max(...tops, 0) * 1.08 || 1;
  const sx = (t) => pad.l + (w - pad.l - pad.r) * (t - xmin) / (xmax - xmin);
  const sy = (v) => pad.t + (h - pad.t - pad.b) * (1 - (v - ymin) / (ymax - ymin));
  const svg = el("svg:svg", { width: w, height: h, role: "img" });
  axes(svg, w, h, pad, xmin, xmax, ymin, ymax, unit);
  const base = new Map();
  list.forEach((s, i) => {
    const pts = s.pts.map(([t, v]) => {
      const b = stacked ? (base.get(t) || 0) : 0;
      if (stacked) base.set(t, b + v);
      return [sx(t), sy(b + v)];
    });
    if (!pts.length) return;
    const d = pts.map((p, j) => `${j ? "L" : "M"}${p[0].toFixed(1)},${p[1].toFixed(1)}`).join("");
    svg.append(el("svg:path", { d, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.5 }));
    if (pts.length === 1) svg.append(el("svg:circle", { cx: pts[0][0], cy: pts[0][1], r: 2.5, fill: COLORS[i % COLORS.length] }));
  });
  body.append(svg);
  const legend = el("div", { class: "legend" });
  list.slice(0, 12).forEach((s, i) => {
    const item = el("span");
    item.append(el("i", { style: `background:${COLORS[i % COLORS.length]}` }), document.createTextNode(s.name || "value"));
    legend.append(item);
  });
  body.append(legend);
}

function drawStat(body, frame, panel) {
  const i = frame.columns.findIndex((c) => isNum(c.type));
  const v = frame.rows.length && i >= 0 ? frame.rows[0][i] : null;
  body.append(el("div", { class: "stat" }, fmt(v, panel.fieldConfig?.defaults?.unit)));
}

function drawTable(body, frame, panel) {
  if (!frame.rows.length) return empty(body);
  const link = (panel.fieldConfig?.defaults?.links || [])[0];
  const table = el("table"), head = el("tr");
  frame.columns.forEach((c) => head.append(el("th", {}, c.name)));
  table.append(head);
  for (const row of frame.rows.slice(0, 300)) {
    const tr = el("tr");
    row.forEach((v, i) => {
      const c = frame.columns[i];
      const td = el("td", isNum(c.type) ? { class: "num" } : {});
      if (link && c.name === "trace_id" && v) {
        const a = el("a", { href: `#llmtap-trace?trace_id=${encodeURIComponent(v)}` }, String(v).slice(0, 12) + "…");
        td.append(a);
      } else {
        td.textContent = isNum(c.type) && v !== null ? fmt(v, c.name.endsWith("_usd") ? "currencyUSD" : "short")
          : v === null ? "–" : Array.isArray(v) ? JSON.stringify(v) : String(v);
      }
      tr.append(td);
    });
    table.append(tr);
  }
  body.append(table);
}

function drawBar(body, frame, panel) {
  if (!frame.rows.length) return empty(body);
  const li = frame.columns.findIndex((c) => !isNum(c.type)), vi = frame.columns.findIndex((c) => isNum(c.type));
  const rows = frame.rows.slice(0, 15);
  const w = Math.max(body.clientWidth - 16, 200), bh = 18, lw = 150;
  const max = Math.max(...rows.map((r) => Number(r[vi]) || 0), 1e-12);
  const svg = el("svg:svg", { width: w, height: rows.length * (bh + 4) + 4 });
  rows.forEach((r, i) => {
    const y = 4 + i * (bh + 4), bw = (w - lw - 80) * (Number(r[vi]) || 0) / max;
    svg.append(el("svg:text", { x: lw - 6, y: y + 13, "text-anchor": "end" }, String(r[li]).slice(0, 24)));
    svg.append(el("svg:rect", { x: lw, y, width: Math.max(bw, 1), height: bh, fill: COLORS[i % COLORS.length], rx: 2 }));
    svg.append(el("svg:text", { x: lw + bw + 6, y: y + 13 }, fmt(r[vi], panel.fieldConfig?.defaults?.unit)));
  });
  body.append(svg);
}

function drawHeatmap(body, frame) {
  const cols = frame.columns;
  const ti = cols.findIndex((c) => isTime(c.type)), bi = cols.findIndex((c, i) => i !== ti && !isNum(c.type));
  const vi = cols.findIndex((c) => isNum(c.type));
  if (!frame.rows.length || ti < 0 || bi < 0 || vi < 0) return empty(body);
  const times = [...new Set(frame.rows.map((r) => r[ti]))].sort(), buckets = [...new Set(frame.rows.map((r) => r[bi]))].sort();
  const max = Math.max(...frame.rows.map((r) => Number(r[vi])), 1);
  const w = Math.max(body.clientWidth - 16, 200), h = Math.max(body.clientHeight - 8, 80), pad = { l: 70, b: 16 };
  const cw = (w - pad.l) / times.length, ch = (h - pad.b) / buckets.length;
  const svg = el("svg:svg", { width: w, height: h });
  buckets.forEach((b, j) => svg.append(el("svg:text", { x: pad.l - 4, y: h - pad.b - j * ch - ch / 2 + 3, "text-anchor": "end" }, b)));
  for (const r of frame.rows) {
    const x = pad.l + times.indexOf(r[ti]) * cw, y = h - pad.b - (buckets.indexOf(r[bi]) + 1) * ch;
    const a = 0.15 + 0.85 * Number(r[vi]) / max;
    svg.append(el("svg:rect", { x, y, width: Math.max(cw - 1, 1), height: Math.max(ch - 1, 1), fill: `rgba(255,152,48,${a.toFixed(2)})` }));
  }
  body.append(svg);
}

function drawTraces(body, frame) {
  if (!frame.rows.length) return empty(body, "no spans for this trace id");
  const idx = Object.fromEntries(frame.columns.map((c, i) => [c.name, i]));
  const start = Math.min(...frame.rows.map((r) => Number(r[idx.startTime])));
  const end = Math.max(...frame.rows.map((r) => Number(r[idx.startTime]) + Number(r[idx.duration])));
  const table = el("table");
  for (const r of frame.rows) {
    const tr = el("tr"), bar = el("td");
    const left = 100 * (r[idx.startTime] - start) / (end - start || 1), width = Math.max(100 * r[idx.duration] / (end - start || 1), 0.5);
    bar.append(el("div", { style: `margin-left:${left}%;width:${width}%;height:10px;background:${r[idx.statusCode] === 2 ? "#f2495c" : "#5794f2"}` }));
    tr.append(el("td", {}, r[idx.serviceName]), el("td", {}, r[idx.operationName]), el("td", { class: "num" }, fmt(r[idx.duration], "ms")));
    bar.style.width = "50%";
    tr.append(bar);
    table.append(tr);
    const tags = el("tr"), cell = el("td", { colspan: 4, style: "white-space:normal;color:#8e8e8e" });
    cell.textContent = (r[idx.tags] || []).map((t) => `${t.key}=${t.value}`).join("  ");
    tags.append(cell);
    table.append(tags);
  }
  body.append(table);
}

function empty(body, text = "No data") { body.append(el("div", { class: "empty" }, text)); }

const DRAW = { timeseries: drawTimeseries, stat: drawStat, table: drawTable, barchart: drawBar, heatmap: drawHeatmap,
  traces: drawTraces };

async function loadPanel(panel, box, seq) {
  const body = box.querySelector(".body");
  box.classList.add("loading");
  try {
    const { from, to } = timeRange();
    const frame = await api("/api/panel", { uid: state.board.uid, panel: panel.id, from, to,
      maxDataPoints: Math.max(Math.floor(box.clientWidth / 6), 40), vars: state.vars });
    if (seq !== state.loadSeq) return;
    body.replaceChildren();
    (DRAW[panel.type] || drawTable)(body, frame, panel);
    box.dataset.state = "rendered";
  } catch (e) {
    if (e instanceof NeedLogin) { showLogin(); return; }
    body.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    box.dataset.state = "error";
  } finally {
    box.classList.remove("loading");
  }
}

function render() {
  const seq = ++state.loadSeq;
  const grid = $("grid");
  grid.replaceChildren();
  for (const panel of state.board.panels) {
    const g = panel.gridPos;
    const box = el("section", { class: "panel", "data-type": panel.type, "data-panel": panel.id,
      style: `grid-column:${g.x + 1} / span ${g.w};grid-row:${g.y + 1} / span ${g.h}` });
    box.append(el("h2", { title: panel.description || panel.title }, panel.title), el("div", { class: "body" }));
    grid.append(box);
  }
  grid.querySelectorAll(".panel").forEach((box, i) => loadPanel(state.board.panels[i], box, seq));
}

async function loadVariables() {
  const holder = $("vars");
  holder.replaceChildren();
  const { from, to } = timeRange();
  for (const v of state.board.templating?.list || []) {
    const label = el("label", {}, v.label || v.name);
    if (v.type === "textbox") {
      const input = el("input", { size: 34, value: (state.vars[v.name] || [""])[0] });
      input.addEventListener("change", () => { state.vars[v.name] = [input.value.trim()]; render(); });
      label.append(" ", input);
    } else {
      const sel = el("select", { "data-var": v.name });
      sel.append(el("option", { value: "$__all" }, "All"));
      try {
        for (const value of await api("/api/variable", { uid: state.board.uid, name: v.name, from, to })) {
          sel.append(el("option", { value }, value));
        }
      } catch (e) { /* an empty store or no session yet: keep "All" */ }
      sel.value = (state.vars[v.name] || ["$__all"])[0];
      if (sel.selectedIndex < 0) sel.value = "$__all";
      sel.addEventListener("change", () => { state.vars[v.name] = [sel.value]; render(); });
      label.append(" ", sel);
    }
    holder.append(label);
  }
}

async function openBoard(uid, vars = {}) {
  state.board = await api(`/api/dashboards/${encodeURIComponent(uid)}`);
  state.vars = vars;
  document.title = `${state.board.title} · llmtap`;
  $("title").textContent = state.board.title;
  $("boards").querySelectorAll("a").forEach((a) => a.classList.toggle("active", a.dataset.uid === uid));
  await loadVariables();
  render();
}

function fromHash() {
  const [uid, query] = location.hash.slice(1).split("?");
  const vars = {};
  new URLSearchParams(query || "").forEach((v, k) => { vars[k] = [v]; });
  return { uid: uid || (state.boards[0] && state.boards[0].uid), vars };
}

function schedule() {
  clearInterval(state.timer);
  const s = Number($("refresh").value);
  if (s > 0) state.timer = setInterval(render, s * 1000);
}

async function main() {
  if (location.hash.startsWith("#token=")) {  // a link carrying the token: exchanged once, then forgotten
    const token = decodeURIComponent(location.hash.slice(7));
    history.replaceState(null, "", location.pathname + location.search);
    try { await login(token); } catch (e) { showLogin("That link's token is wrong."); return; }
  }
  state.boards = await api("/api/dashboards");
  for (const b of state.boards) {
    $("boards").append(el("a", { href: `#${b.uid}`, "data-uid": b.uid }, b.title.replace(/^LLM /, "")));
  }
  window.addEventListener("hashchange", () => { const h = fromHash(); openBoard(h.uid, h.vars); });
  $("range").addEventListener("change", async () => { await loadVariables(); render(); });
  $("refresh").addEventListener("change", schedule);
  $("reload").addEventListener("click", render);
  const h = fromHash();
  await openBoard(h.uid, h.vars);
  schedule();
}

main().catch((e) => { $("grid").replaceChildren(el("div", { class: "error" }, String(e.message || e))); });
