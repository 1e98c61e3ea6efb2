// Run by test_scales.py: prints the problems it finds (a JSON list).

import { valueTicks, timeTicks, placeLabels, textWidth } from "@JS@/scales.js";
import { fmt, exact, usd, duration, plain } from "@JS@/dom.js";
const bad = [];
const maxes = [0.004, 0.05, 0.1, 0.29, 0.3, 0.31, 0.5, 0.6, 0.72, 0.999, 1, 1.3, 2, 7, 9.99, 13, 97, 100, 1234, 56789, 2.5e6];
for (const max of maxes) for (const n of [2, 3, 4, 5, 6]) for (const [unit, opts] of [["short", {}],
    ["short", { integer: true }], ["percentunit", { cap: 1 }], ["currencyUSD", {}], ["ms", {}]]) {
  if (opts.integer && !Number.isInteger(max)) continue;
  if (opts.cap && max > 1) continue;
  const { ticks, top } = valueTicks(0, max, n, opts);
  const labels = ticks.map((v) => fmt(v, unit));
  const where = JSON.stringify({ max, n, unit, opts, ticks, labels });
  if (new Set(labels).size !== labels.length) bad.push("repeated labels " + where);
  if (ticks.some((v, i) => i && v <= ticks[i - 1])) bad.push("not ascending " + where);
  if (top < max) bad.push("does not cover the data " + where);
  if (opts.integer && ticks.some((v) => !Number.isInteger(v))) bad.push("fractional count tick " + where);
  if (opts.cap && ticks.some((v) => v > 1)) bad.push("share above 100% " + where);
}
const now = Date.UTC(2026, 11, 2, 4, 17, 33);
for (const span of [900, 3600, 21600, 86400, 604800, 2592000]) for (const width of [200, 400, 700, 1400]) {
  const ticks = timeTicks(now - span * 1000, now, width, span * 1000);
  const labels = ticks.map((t) => t.label);
  const where = JSON.stringify({ span, width, labels });
  if (new Set(labels).size !== labels.length) bad.push("repeated time labels " + where);
  if (ticks.length < 2) bad.push("fewer than two time labels " + where);
  if (ticks.some((t) => t.t < now - span * 1000 || t.t > now)) bad.push("time label outside the range " + where);
  if (ticks.length * (textWidth(labels[0]) + 4) > width + 40) bad.push("more time labels than fit " + where);
}
for (const xs of [[0, 5, 10, 15, 300, 305, 890, 895, 900], [450, 450, 450, 451], [0, 900]]) {
  const labels = xs.map((x, i) => ({ x, text: `label ${i} ${x} ms`, anchor: "middle" }));
  const rows = placeLabels(labels, [0, 1], 900);
  const placed = labels.map((l, i) => [rows[i], l.x0, l.x0 + textWidth(l.text)]).filter(([r]) => r >= 0);
  for (const [r, a, b] of placed) {
    if (a < 0 || b > 900) bad.push("label outside the chart " + JSON.stringify({ xs, a, b }));
    for (const [r2, a2, b2] of placed) if ((a !== a2 || b !== b2) && r === r2 && a < b2 && a2 < b) bad.push("overlap " + JSON.stringify(xs));
  }
  if (rows[0] < 0) bad.push("the first label is left out " + JSON.stringify(xs));
}
// numbers of any size are written out, never in scientific notation (the cost board's "$8.8e-7"), and keep the
// digits they are shown with
const SCI = /\d(\.\d+)?e[+-]?\d/i;
for (const x of [8.8e-7, -8.8e-7, 1.23e-9, 4.2e-13, 9.96e-7, 3e-6, 0.00012, 0.5, 7, 123456.7, 4.5e12]) {
  const shown = [fmt(x, "currencyUSD"), usd(x), exact(x, "currencyUSD"), fmt(x, "short"), exact(x, "short"), fmt(x, "s"),
    duration(x), fmt(x, "percentunit"), exact(x, "percentunit"), fmt(x, "reqps"), exact(x, "reqps"), fmt(x, "tokens")];
  for (const t of shown) if (SCI.test(t)) bad.push("scientific notation " + JSON.stringify({ x, t }));
}
for (const [x, digits, want] of [[8.8e-7, 2, "0.00000088"], [9.96e-7, 2, "0.000001"], [0.000123456, 3, "0.000123"],
    [-4.2e-13, 2, "-0.00000000000042"], [100000, 6, "100000"], [1.5, 6, "1.5"], [123.456, 2, "123"]]) {
  if (plain(x, digits) !== want) bad.push("plain " + JSON.stringify({ x, digits, got: plain(x, digits), want }));
}
if (usd(8.8e-7) !== "$0.00000088") bad.push("usd " + usd(8.8e-7));
if (exact(100000, "currencyUSD") !== "$100000 USD") bad.push("exact " + exact(100000, "currencyUSD"));
console.log(JSON.stringify(bad));
