// The panel types of the dashboards, drawn as SVG and tables. Every chart says its units and its time zone:
// axes are labelled in UTC, and hovering shows the exact values with their units. Axes come from what the data
// means (scales.js): the selected time range, whole-number ticks for counts, shares up to 100%.
import { COLORS, el, empty, exact, fmt, parseTime, utc } from "./dom.js";
import { labelsWidth, placeLabels, textWidth, timeTicks, valueTicks } from "./scales.js";
import { drawTable, isNum, isTime } from "./tables.js";

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
  tip.style.top = `${Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8)}px`;
}
export function hideTip() { tooltip().hidden = true; }

// A key that is empty is named plainly: "no model", not the value column's name.
const keyName = (col, v) => (v === null || v === "" ? `no ${col.name}` : String(v));

function series(frame) {
  const cols = frame.columns;
  const tIdx = cols.findIndex((c) => isTime(c.type));
  const labels = cols.map((c, i) => i).filter((i) => i !== tIdx && !isNum(cols[i].type));
  const nums = cols.map((c, i) => i).filter((i) => i !== tIdx && isNum(cols[i].type));
  const map = new Map();
  for (const row of frame.rows) {
    const t = parseTime(row[tIdx]);
    const label = labels.map((i) => keyName(cols[i], row[i])).join(" ");
    for (const i of nums) {
      const name = [label, nums.length > 1 || !label ? cols[i].name : ""].filter(Boolean).join(" · ");
      if (!map.has(name)) map.set(name, []);
      if (row[i] !== null) map.get(name).push([t, Number(row[i])]);
    }
  }
  return [...map.entries()].filter(([, pts]) => pts.length)  // a series without a value is not drawn, nor listed
    .map(([name, pts]) => ({ name, pts: pts.sort((a, b) => a[0] - b[0]) }));
}

// The legend: every series, or as many as fit in two lines and "+N more" naming the rest.
function legendFor(body, list) {
  const legend = el("div", { class: "legend", "data-series": String(list.length) });
  body.append(legend);
  const maxH = 34;
  list.forEach((s, i) => {
    const item = el("span", { "data-name": s.name });
    item.append(el("i", { style: `background:${COLORS[i % COLORS.length]}` }), document.createTextNode(s.name));
    legend.append(item);
  });
  if (legend.scrollHeight <= maxH + 2) return legend;
  const items = [...legend.children];
  const more = el("span", { class: "more" });
  legend.append(more);
  let shown = items.length;
  while (shown > 1 && legend.scrollHeight > maxH + 2) {
    items[--shown].remove();
    const rest = list.slice(shown);
    more.textContent = `+${rest.length} more`;
    more.title = rest.map((s) => s.name).join("\n");
    more.dataset.more = String(rest.length);
  }
  return legend;
}

export function drawTimeseries(body, frame, panel, view) {
  const list = series(frame);
  if (!list.length) return empty(body);
  const unit = unitOf(panel);
  const stacked = panel.fieldConfig?.defaults?.custom?.stacking?.mode === "normal";
  const legend = legendFor(body, list);
  const w = Math.max(body.clientWidth - 16, 200), h = Math.max(body.clientHeight - legend.offsetHeight - 10, 80);
  const xs = list.flatMap((s) => s.pts.map((p) => p[0]));
  // the selected range, even when the data are sparse (a shifted series, like last week's, may lie outside it)
  let xmin = view ? view.from * 1000 : Math.min(...xs), xmax = view ? view.to * 1000 : Math.max(...xs);
  if (xs.some((t) => t < xmin || t > xmax)) { xmin = Math.min(xmin, ...xs); xmax = Math.max(xmax, ...xs); }
  if (xmin === xmax) { xmin -= 60e3; xmax += 60e3; }
  let tops = list.flatMap((s) => s.pts.map((p) => p[1]));
  if (stacked) {
    const sums = new Map();
    for (const s of list) for (const [t, v] of s.pts) sums.set(t, (sums.get(t) || 0) + v);
    tops = [...sums.values()];
  }
  const integer = (!unit || unit === "short") && tops.every((v) => Number.isInteger(v));
  const cap = unit === "percentunit" && tops.every((v) => v <= 1) ? 1 : Infinity;
  const plotH = h - 6 - 20;
  const y = valueTicks(Math.min(0, ...tops), Math.max(0, ...tops), Math.max(2, Math.min(6, Math.floor(plotH / 26))),
    { integer, cap });
  const pad = { l: labelsWidth(y.ticks, unit), r: 8, t: 6, b: 20 };  // the time labels below, clear of the lowest value's
  const sx = (t) => pad.l + (w - pad.l - pad.r) * (t - xmin) / (xmax - xmin);
  const sy = (v) => pad.t + (h - pad.t - pad.b) * (1 - (v - y.lo) / (y.top - y.lo));
  const svg = el("svg:svg", { width: w, height: h, role: "img", "aria-label": panel.title });
  for (const v of y.ticks) {
    svg.append(el("svg:line", { x1: pad.l, x2: w - pad.r, y1: sy(v), y2: sy(v), class: "grid-line" }));
    svg.append(el("svg:text", { x: pad.l - 4, y: sy(v) + 3, "text-anchor": "end", "data-axis": "y", "data-value": v },
      fmt(v, unit)));
  }
  const ticks = [{ t: null, label: "UTC" }, ...timeTicks(xmin, xmax, w - pad.l - pad.r,
    view ? (view.to - view.from) * 1000 : xmax - xmin)];  // the zone, then the times
  const xl = ticks.map((t) => (t.t === null ? { x: 2, text: t.label, anchor: "start" }
    : { x: sx(t.t), text: t.label, anchor: "middle" }));
  placeLabels(xl, [0], w).forEach((row, i) => {
    if (row < 0) return;
    svg.append(el("svg:text", { x: xl[i].x0, y: h - 4, "data-axis": ticks[i].t === null ? "zone" : "x",
      "data-t": ticks[i].t ?? undefined }, ticks[i].label));
  });
  const base = new Map();
  list.forEach((s, i) => {
    const pts = s.pts.map(([t, v]) => {
      const b = stacked ? (base.get(t) || 0) : 0;
      if (stacked) base.set(t, b + v);
      return [sx(t), sy(b + v)];
    });
    if (!pts.length) return;
    const d = pts.map((p, j) => `${j ? "L" : "M"}${p[0].toFixed(1)},${p[1].toFixed(1)}`).join("");
    svg.append(el("svg:path", { d, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.5, class: "series",
      "data-name": s.name }));
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
    list.forEach((s, i) => {
      const p = s.pts.find((q) => q[0] === best);
      if (p && lines.length <= 20) lines.push([`${s.name} `, exact(p[1], unit), COLORS[i % COLORS.length]]);
    });
    showTip(ev, lines);
  });
  svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); hideTip(); });
  body.insertBefore(svg, legend);
}

// A stat's colour says something only when the panel has thresholds (error rate: green only when low).
function thresholdColor(panel, v) {
  const steps = panel.fieldConfig?.defaults?.thresholds?.steps;
  if (!steps || !steps.length || v === null) return "";
  let color = "";
  for (const s of steps) if (s.value === null || Number(v) >= s.value) color = s.color;
  return { green: "#73bf69", orange: "#ff9830", red: "#f2495c", yellow: "#f2cc0c" }[color] || color;
}

export function drawStat(body, frame, panel) {
  const i = frame.columns.findIndex((c) => isNum(c.type));
  const v = frame.rows.length && i >= 0 ? frame.rows[0][i] : null;
  const unit = unitOf(panel);
  const color = thresholdColor(panel, v);
  body.append(el("div", { class: "stat", title: exact(v, unit), style: color ? `color:${color}` : undefined,
    "data-color": color || "neutral" }, fmt(v, unit)));
}

export function drawBar(body, frame, panel) {
  if (!frame.rows.length) return empty(body);
  const cols = frame.columns;
  const li = cols.findIndex((c) => !isNum(c.type)), vi = cols.findIndex((c) => isNum(c.type));
  const rows = frame.rows.slice(0, 15), unit = unitOf(panel);
  const names = rows.map((r) => (li < 0 ? "" : keyName(cols[li], r[li]).slice(0, 28)));
  const w = Math.max(body.clientWidth - 16, 200), bh = 18;
  const lw = Math.min(Math.max(...names.map((n) => textWidth(n)), 20) + 8, w * 0.4);
  const vw = Math.max(...rows.map((r) => textWidth(fmt(r[vi], unit)))) + 8;  // room for the value after the bar
  const max = Math.max(...rows.map((r) => Number(r[vi]) || 0), 1e-12);
  const svg = el("svg:svg", { width: w, height: rows.length * (bh + 4) + 4, role: "img", "aria-label": panel.title });
  rows.forEach((r, i) => {
    const y = 4 + i * (bh + 4), bw = (w - lw - vw) * (Number(r[vi]) || 0) / max;
    svg.append(el("svg:text", { x: lw - 6, y: y + 13, "text-anchor": "end" }, names[i]));
    const bar = el("svg:rect", { x: lw, y, width: Math.max(bw, 1), height: bh, fill: COLORS[i % COLORS.length], rx: 2,
      class: "bar" });
    bar.addEventListener("mousemove", (ev) => showTip(ev, [[`${names[i]} `, exact(r[vi], unit)]]));
    bar.addEventListener("mouseleave", hideTip);
    svg.append(bar);
    svg.append(el("svg:text", { x: lw + Math.max(bw, 1) + 6, y: y + 13 }, fmt(r[vi], unit)));
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
  const yunit = panel.options?.yAxis?.unit || "";
  const names = buckets.map((b) => `${b}${yunit ? " " + yunit : ""}`);
  const w = Math.max(body.clientWidth - 16, 200), h = Math.max(body.clientHeight - 8, 80);
  const pad = { l: Math.max(...names.map((n) => textWidth(n)), 20) + 8, b: 16 };
  const cw = (w - pad.l) / times.length, ch = (h - pad.b) / buckets.length;
  const svg = el("svg:svg", { width: w, height: h, role: "img", "aria-label": panel.title });
  const every = Math.ceil(13 / ch);  // bucket labels at least a line apart
  names.forEach((name, j) => {
    if (j % every) return;
    svg.append(el("svg:text", { x: pad.l - 4, y: h - pad.b - j * ch - ch / 2 + 3, "text-anchor": "end" }, name));
  });
  const first = parseTime(times[0]), last = parseTime(times[times.length - 1]);
  const xl = [{ x: pad.l, text: utc(first).replace(" UTC", ""), anchor: "start" }];
  if (times.length > 1) xl.push({ x: w, text: utc(last), anchor: "end" });
  else xl[0].text += " UTC";
  placeLabels(xl, [0], w).forEach((row, i) => {
    if (row >= 0) svg.append(el("svg:text", { x: xl[i].x0, y: h - 4 }, xl[i].text));
  });
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

export { drawTable };

export const DRAW = { timeseries: drawTimeseries, stat: drawStat, table: drawTable, barchart: drawBar, heatmap: drawHeatmap,
  traces: drawTraces };
