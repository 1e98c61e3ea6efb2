// The panel types of the dashboards, drawn as SVG and tables. Every chart says its units and its time zone:
// axes are labelled in UTC, and hovering shows the exact values with their units.
import { COLORS, el, empty, exact, fmt, parseTime, tick, unitOfColumn, utc } from "./dom.js";

const isNum = (t) => /Int|Float|Decimal/.test(t);
const isTime = (t) => /DateTime|Date/.test(t);
const unitOf = (panel) => panel.fieldConfig?.defaults?.unit;

function tooltip() {
  let tip = document.getElementById("tooltip");
  if (!tip) {
    tip = el("div", { id: "tooltip", class: "tooltip", role: "tooltip" });
    tip.hidden = true;
    document.body.append(tip);
  }
  return tip;
}

export function showTip(ev, lines) {
  const tip = tooltip();
  tip.replaceChildren(...lines.map(([label, value, color]) => {
    const row = el("div");
    if (color) row.append(el("i", { style: `background:${color}` }));
    row.append(document.createTextNode(label), el("b", {}, value));
    return row;
  }));
  tip.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  tip.style.left = `${x}px`;
  tip.style.top = `${ev.clientY + 14}px`;
}
export function hideTip() { tooltip().hidden = true; }

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
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    svg.append(el("svg:text", { x: pad.l + (w - pad.l - pad.r) * i / 4, y: h - 4, "text-anchor": anchor },
      tick(t, xmax - xmin) + (i === 4 ? " UTC" : "")));
  }
}

export function drawTimeseries(body, frame, panel) {
  const list = series(frame);
  if (!list.length) return empty(body);
  const unit = unitOf(panel);
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
  const svg = el("svg:svg", { width: w, height: h, role: "img", "aria-label": panel.title });
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
  // hover: the nearest time, every series' value there, with its unit
  const times = [...new Set(xs)].sort((a, b) => a - b);
  const cursor = el("svg:line", { y1: pad.t, y2: h - pad.b, class: "cursor", visibility: "hidden" });
  svg.append(cursor);
  svg.addEventListener("mousemove", (ev) => {
    const box = svg.getBoundingClientRect();
    const t = xmin + (ev.clientX - box.left - pad.l) / (w - pad.l - pad.r) * (xmax - xmin);
    let best = times[0];
    for (const x of times) if (Math.abs(x - t) < Math.abs(best - t)) best = x;
    cursor.setAttribute("x1", sx(best)); cursor.setAttribute("x2", sx(best));
    cursor.setAttribute("visibility", "visible");
    const lines = [[utc(best), ""]];
    list.slice(0, 12).forEach((s, i) => {
      const p = s.pts.find((q) => q[0] === best);
      if (p) lines.push([`${s.name || "value"} `, exact(p[1], unit), COLORS[i % COLORS.length]]);
    });
    showTip(ev, lines);
  });
  svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); hideTip(); });
  body.append(svg);
  const legend = el("div", { class: "legend" });
  list.slice(0, 12).forEach((s, i) => {
    const item = el("span");
    item.append(el("i", { style: `background:${COLORS[i % COLORS.length]}` }), document.createTextNode(s.name || "value"));
    legend.append(item);
  });
  body.append(legend);
}

export function drawStat(body, frame, panel) {
  const i = frame.columns.findIndex((c) => isNum(c.type));
  const v = frame.rows.length && i >= 0 ? frame.rows[0][i] : null;
  const unit = unitOf(panel);
  body.append(el("div", { class: "stat", title: exact(v, unit) }, fmt(v, unit)));
}

// Cells that lead somewhere: a call's page from its trace id, a session's from its id.
function linkFor(name, v) {
  if (!v) return null;
  if (name === "trace_id") return { href: `#call?trace_id=${encodeURIComponent(v)}`, text: String(v).slice(0, 12) + "…" };
  if (name === "session_id") return { href: `#session?session_id=${encodeURIComponent(v)}`, text: String(v) };
  return null;
}

export function drawTable(body, frame) {
  if (!frame.rows.length) return empty(body);
  const table = el("table"), head = el("tr");
  frame.columns.forEach((c) => head.append(el("th", {}, isTime(c.type) ? `${c.name} (UTC)` : c.name)));
  table.append(head);
  for (const row of frame.rows.slice(0, 300)) {
    const tr = el("tr");
    row.forEach((v, i) => {
      const c = frame.columns[i];
      const num = isNum(c.type) && v !== null;
      const td = el("td", num ? { class: "num", title: exact(v, unitOfColumn(c.name)) } : {});
      const link = linkFor(c.name, v);
      if (link) td.append(el("a", { href: link.href, title: String(v) }, link.text));
      else td.textContent = num ? fmt(v, unitOfColumn(c.name)) : v === null ? "–"
        : typeof v === "object" ? JSON.stringify(v) : String(v);
      tr.append(td);
    });
    table.append(tr);
  }
  body.append(table);
}

export function drawBar(body, frame, panel) {
  if (!frame.rows.length) return empty(body);
  const li = frame.columns.findIndex((c) => !isNum(c.type)), vi = frame.columns.findIndex((c) => isNum(c.type));
  const rows = frame.rows.slice(0, 15), unit = unitOf(panel);
  const w = Math.max(body.clientWidth - 16, 200), bh = 18, lw = 150;
  const max = Math.max(...rows.map((r) => Number(r[vi]) || 0), 1e-12);
  const svg = el("svg:svg", { width: w, height: rows.length * (bh + 4) + 4, role: "img", "aria-label": panel.title });
  rows.forEach((r, i) => {
    const y = 4 + i * (bh + 4), bw = (w - lw - 80) * (Number(r[vi]) || 0) / max;
    svg.append(el("svg:text", { x: lw - 6, y: y + 13, "text-anchor": "end" }, String(r[li]).slice(0, 24)));
    const bar = el("svg:rect", { x: lw, y, width: Math.max(bw, 1), height: bh, fill: COLORS[i % COLORS.length], rx: 2,
      class: "bar" });
    bar.addEventListener("mousemove", (ev) => showTip(ev, [[`${r[li]} `, exact(r[vi], unit)]]));
    bar.addEventListener("mouseleave", hideTip);
    svg.append(bar);
    svg.append(el("svg:text", { x: lw + bw + 6, y: y + 13 }, fmt(r[vi], unit)));
  });
  body.append(svg);
}

export function drawHeatmap(body, frame, panel) {
  const cols = frame.columns;
  const ti = cols.findIndex((c) => isTime(c.type)), bi = cols.findIndex((c, i) => i !== ti && !isNum(c.type));
  const vi = cols.findIndex((c) => isNum(c.type));
  if (!frame.rows.length || ti < 0 || bi < 0 || vi < 0) return empty(body);
  const times = [...new Set(frame.rows.map((r) => r[ti]))].sort(), buckets = [...new Set(frame.rows.map((r) => r[bi]))].sort();
  const max = Math.max(...frame.rows.map((r) => Number(r[vi])), 1);
  const w = Math.max(body.clientWidth - 16, 200), h = Math.max(body.clientHeight - 8, 80), pad = { l: 70, b: 16 };
  const cw = (w - pad.l) / times.length, ch = (h - pad.b) / buckets.length;
  const svg = el("svg:svg", { width: w, height: h, role: "img", "aria-label": panel.title });
  const yunit = panel.options?.yAxis?.unit || "";
  buckets.forEach((b, j) => svg.append(el("svg:text", { x: pad.l - 4, y: h - pad.b - j * ch - ch / 2 + 3, "text-anchor": "end" },
    `${b}${yunit ? " " + yunit : ""}`)));
  const first = parseTime(times[0]), last = parseTime(times[times.length - 1]);
  svg.append(el("svg:text", { x: pad.l, y: h - 4 }, tick(first, last - first)));
  svg.append(el("svg:text", { x: w, y: h - 4, "text-anchor": "end" }, tick(last, last - first) + " UTC"));
  for (const r of frame.rows) {
    const x = pad.l + times.indexOf(r[ti]) * cw, y = h - pad.b - (buckets.indexOf(r[bi]) + 1) * ch;
    const a = 0.15 + 0.85 * Number(r[vi]) / max;
    const cell = el("svg:rect", { x, y, width: Math.max(cw - 1, 1), height: Math.max(ch - 1, 1),
      fill: `rgba(255,152,48,${a.toFixed(2)})` });
    cell.addEventListener("mousemove", (ev) => showTip(ev, [[utc(parseTime(r[ti])), ""],
      [`${r[bi]}${yunit ? " " + yunit : ""}: `, `${exact(r[vi])} ${cols[vi].name}`]]));
    cell.addEventListener("mouseleave", hideTip);
    svg.append(cell);
  }
  body.append(svg);
}

export function drawTraces(body, frame) {
  if (!frame.rows.length) return empty(body, "no spans for this trace id");
  const idx = Object.fromEntries(frame.columns.map((c, i) => [c.name, i]));
  const start = Math.min(...frame.rows.map((r) => Number(r[idx.startTime])));
  const end = Math.max(...frame.rows.map((r) => Number(r[idx.startTime]) + Number(r[idx.duration])));
  const table = el("table");
  for (const r of frame.rows) {
    const tr = el("tr"), bar = el("td", { class: "span-bar" });
    const left = 100 * (r[idx.startTime] - start) / (end - start || 1), width = Math.max(100 * r[idx.duration] / (end - start || 1), 0.5);
    bar.append(el("div", { style: `margin-left:${left}%;width:${width}%;height:10px;background:${r[idx.statusCode] === 2 ? "#f2495c" : "#5794f2"}` }));
    tr.append(el("td", {}, r[idx.serviceName]), el("td", {}, r[idx.operationName]), el("td", { class: "num" }, fmt(r[idx.duration], "ms")));
    tr.append(bar);
    table.append(tr);
    const tags = el("tr"), cell = el("td", { colspan: 4, class: "tags" });
    cell.textContent = (r[idx.tags] || []).map((t) => `${t.key}=${t.value}`).join("  ");
    tags.append(cell);
    table.append(tags);
  }
  body.append(table);
}

export const DRAW = { timeseries: drawTimeseries, stat: drawStat, table: drawTable, barchart: drawBar, heatmap: drawHeatmap,
  traces: drawTraces };
