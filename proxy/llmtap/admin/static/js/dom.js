// Building the page: every value from the store goes in as text (textContent, attribute values, CSSOM),
// never as HTML.
export const $ = (id) => document.getElementById(id);
const NS = "http://www.w3.org/2000/svg";
export const COLORS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#ff780a",
  "#96d98d", "#ffee52", "#ca95e5", "#fade2a"];

export function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);  // CSSOM: no inline-style CSP exception
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

export function empty(body, text = "No data") { body.append(el("div", { class: "empty" }, text)); }

// -- numbers and units -----------------------------------------------------------------------------------------
const short = (x) => Math.abs(x) >= 1e9 ? (x / 1e9).toFixed(1) + "B" : Math.abs(x) >= 1e6 ? (x / 1e6).toFixed(1) + "M"
  : Math.abs(x) >= 1e4 ? (x / 1e3).toFixed(1) + "k" : Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US")
  : Number.isInteger(x) ? String(x) : x.toPrecision(3);

// Milliseconds as people read them: 840 ms, 2.31 s, 4m 05s, 3h 20m, 2d 04h.
export function duration(ms) {
  const a = Math.abs(ms), s = a / 1000;
  if (a < 1000) return `${ms.toFixed(a < 10 ? 1 : 0)} ms`;
  if (s < 60) return `${(ms / 1000).toFixed(2)} s`;
  const p = (x) => String(Math.floor(x)).padStart(2, "0");
  if (s < 3600) return `${Math.floor(s / 60)}m ${p(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${p((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${p((s % 86400) / 3600)}h`;
}

export function usd(n) {
  const a = Math.abs(n);
  return (n < 0 ? "-$" : "$") + (a >= 100 ? a.toFixed(0) : a >= 1 ? a.toFixed(2) : a === 0 ? "0" : a.toPrecision(2));
}

export function fmt(v, unit) {
  if (v === null || v === undefined || v === "") return "–";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  switch (unit) {
    case "currencyUSD": return usd(n);
    case "percentunit": return (n * 100).toFixed(Math.abs(n) < 0.1 ? 2 : 1) + "%";
    case "ms": return duration(n);
    case "s": return n.toFixed(Math.abs(n) < 10 ? 2 : 0) + " s";
    case "reqps": return short(n) + "/s";
    default: return short(n);
  }
}

// The full value for a tooltip: every digit that matters, and the unit in words.
export function exact(v, unit) {
  if (v === null || v === undefined || v === "") return "–";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  switch (unit) {
    case "currencyUSD": return `$${n.toPrecision(6).replace(/\.?0+$/, "")} USD`;
    case "percentunit": return `${(n * 100).toPrecision(4)}%`;
    case "ms": return `${n.toFixed(1)} ms`;
    case "s": return `${n.toFixed(3)} s`;
    case "reqps": return `${n.toPrecision(4)} per second`;
    default: return Number.isInteger(n) ? n.toLocaleString("en-US") : n.toPrecision(6);
  }
}

export const unitOfColumn = (name) => /_usd$|^cost/.test(name) ? "currencyUSD" : /_ms$/.test(name) ? "ms"
  : /_s$/.test(name) ? "s" : "short";

// -- time: the store keeps UTC, the viewer shows UTC and says so ------------------------------------------------
export const parseTime = (s) => typeof s === "number" ? s * 1000 : Date.parse(String(s).replace(" ", "T") + "Z");
const pad = (x) => String(x).padStart(2, "0");
export function utc(t, withSeconds = false) {
  const d = new Date(t);
  const base = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:` +
    pad(d.getUTCMinutes());
  return (withSeconds ? `${base}:${pad(d.getUTCSeconds())}` : base) + " UTC";
}
export function tick(t, span) {
  const d = new Date(t);
  return span > 2 * 86400e3 ? `${d.getUTCMonth() + 1}/${d.getUTCDate()} ${pad(d.getUTCHours())}h`
    : `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

// A key/value list (the call page's blocks).
export function facts(pairs) {
  const dl = el("dl", { class: "facts" });
  for (const [k, v, href] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", {}, k));
    const dd = el("dd");
    if (href) dd.append(el("a", { href }, String(v))); else dd.textContent = String(v);
    dl.append(dd);
  }
  return dl;
}
