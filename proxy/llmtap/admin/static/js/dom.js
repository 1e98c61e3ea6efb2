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
// ``digits`` significant digits in positional notation, trailing zeros dropped: 0.00000088, never 8.8e-7 (what
// String() and toPrecision() print below 1e-6).
export function plain(x, digits) {
  if (x === 0 || !Number.isFinite(x)) return String(x);
  const places = Math.min(100, Math.max(0, digits - 1 - Math.floor(Math.log10(Math.abs(x)))));
  const s = x.toFixed(places);
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

const short = (x) => Math.abs(x) >= 1e9 ? (x / 1e9).toFixed(1) + "B" : Math.abs(x) >= 1e6 ? (x / 1e6).toFixed(1) + "M"
  : Math.abs(x) >= 1e4 ? (x / 1e3).toFixed(1) + "k" : Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US")
  : Number.isInteger(x) ? String(x) : plain(x, 3);

// Milliseconds as people read them: 840 ms, 2.31 s, 4m 05s, 3h 20m, 2d 04h.
export function duration(ms) {
  const a = Math.abs(ms), s = a / 1000;
  if (a < 10) return `${plain(ms, 2)} ms`;  // 0.025 ms, 5.6 ms: the digits that differ
  if (a < 1000) return `${ms.toFixed(0)} ms`;
  if (s < 60) return `${(ms / 1000).toFixed(2)} s`;
  const p = (x) => String(Math.floor(x)).padStart(2, "0");
  if (s < 3600) return `${Math.floor(s / 60)}m ${p(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${p((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${p((s % 86400) / 3600)}h`;
}

export function usd(n) {
  const a = Math.abs(n);
  return (n < 0 ? "-$" : "$") + (a >= 100 ? a.toFixed(0) : a >= 1 ? a.toFixed(2) : a === 0 ? "0"
    : a >= 0.01 ? a.toPrecision(2) : plain(a, 2));
}

// A count with its noun: "1 call", "12 calls", "1 miss", "3 misses".
export function plural(n, word) {
  if (Number(n) !== 1) return word;
  return word.endsWith("sses") || word.endsWith("shes") ? word.slice(0, -2) : word.replace(/s$/, "");
}

// A ratio as people say it: ×1.4, ×12, ×110 (never ×1.1e+2).
export function ratio(r) {
  if (r === null || r === undefined || !Number.isFinite(Number(r))) return "–";
  const a = Math.abs(Number(r));
  return "×" + (a >= 10 ? Math.round(a).toLocaleString("en-US") : a.toFixed(a >= 1 ? 1 : 2));
}

// Units: Grafana's (currencyUSD, percentunit, ms, s, reqps, short) and the counts of tables ("tokens", "count:<noun>").
export function fmt(v, unit) {
  if (v === null || v === undefined || v === "") return "–";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  if (unit && unit.startsWith("count:")) return `${short(n)} ${plural(n, unit.slice(6))}`;
  switch (unit) {
    case "currencyUSD": return usd(n);
    case "percentunit": return (n * 100).toFixed(Math.abs(n) < 0.1 ? 2 : 1).replace(/\.0+$/, "") + "%";
    case "ms": return duration(n);
    case "s": return (Math.abs(n) < 100 ? plain(n, 3) : n.toFixed(0)) + " s";
    case "reqps": return short(n) + "/s";
    case "tokens": return short(n) + " tok";
    default: return short(n);
  }
}

// The full value for a tooltip: every digit that matters, and the unit in words.
export function exact(v, unit) {
  if (v === null || v === undefined || v === "") return "–";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  const whole = Number.isInteger(n) ? n.toLocaleString("en-US") : plain(n, 6);
  if (unit && unit.startsWith("count:")) return `${whole} ${plural(n, unit.slice(6))}`;
  switch (unit) {
    case "currencyUSD": return `$${plain(n, 6)} USD`;
    case "percentunit": return `${plain(n * 100, 4)}%`;
    case "ms": return `${n.toFixed(1)} ms`;
    case "s": return `${n.toFixed(3)} s`;
    case "reqps": return `${plain(n, 4)} per second`;
    case "tokens": return `${whole} tokens`;
    default: return whole;
  }
}

// A table column's unit from its name (the boards' SQL names its columns by what they hold). Columns that
// identify (status_code, attempt) have none: they are not quantities.
const COUNT_NOUNS = ["calls", "misses", "attempts", "chains", "requests", "sessions", "errors", "events", "hits", "uses"];
const COUNT_NAMES = { failed: "calls", quota_429_retried_more_than_once: "chains", tool_calls: "calls" };
export const IDENTIFYING = ["status_code", "attempt", "max_attempt", "status", "#"];
export function unitOfColumn(name) {
  if (/_usd$|^cost/.test(name)) return "currencyUSD";
  if (/_ms$/.test(name)) return "ms";
  if (/_s$/.test(name)) return "s";
  if (/tokens/.test(name)) return "tokens";
  if (/ratio$|_rate$|_share$/.test(name)) return "percentunit";
  if (COUNT_NAMES[name]) return `count:${COUNT_NAMES[name]}`;
  const noun = COUNT_NOUNS.find((w) => name.split("_").includes(w));
  return noun ? `count:${noun}` : "short";
}

// The explain analyses' before/after of one driver, in that driver's unit (the board's table and the page).
export const DRIVER_UNITS = {
  volume: (v) => fmt(v, "count:calls"),
  mix: (v) => v === null ? "–" : `${(v * 100).toFixed(0)}% of calls`,
  input_tokens_per_call: (v) => fmt(v, "tokens") + "/call",
  output_tokens_per_call: (v) => fmt(v, "tokens") + "/call",
  cache_hit_ratio: (v) => v === null ? "–" : `${(v * 100).toFixed(0)}% cached`,
  unit_price: (v) => v === null ? "–" : `${usd(v)}/Mtok`,
  modality_mix: (v) => v === null ? "–" : `×${v.toFixed(2)} text rate`,
  tool_calls: (v) => v === null ? "–" : `${usd(v)}/call in tool fees`,
  new: (v) => usd(v), gone: (v) => usd(v), total: (v) => usd(v),
  retries: (v) => fmt(v, "count:calls"),
};

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
