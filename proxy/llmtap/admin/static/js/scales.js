// Axes from the data's meaning, and labels that never overlap: nice value ticks (whole numbers for counts, at most
// 100% for shares), time ticks on round minutes/hours/days across the selected range, and a greedy placer that
// puts each label on the first row where it collides with nothing (or leaves it out).
import { fmt } from "./dom.js";

// The width of a label in the viewer's SVG font (10 px system-ui), a little generous so that estimates never overlap.
export const textWidth = (text, size = 10) => String(text).length * size * 0.62 + 2;

// Value ticks from 0 (or the minimum) to a nice maximum; `integer`: counts, whose ticks are whole numbers;
// `cap`: the largest value the axis may show (1 for a share whose values are all ≤ 100%).
export function valueTicks(min, max, maxTicks, { integer = false, cap = Infinity } = {}) {
  if (!(max > min)) max = min + (integer ? 1 : 1);
  const raw = (max - min) / Math.max(maxTicks - 1, 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  if (integer) step = Math.max(1, Math.ceil(step));
  const round = (v) => Number(v.toPrecision(12));  // 0.30000000000000004 is 0.3
  let top = round(Math.ceil(max / step - 1e-9) * step);
  if (top > cap && max <= cap) top = cap;
  const lo = round(Math.floor(min / step + 1e-9) * step);
  const ticks = [];
  for (let k = 0; round(lo + k * step) < top - step * 1e-6; k++) ticks.push(round(lo + k * step));
  ticks.push(top);
  return { ticks, lo, top };
}

const MIN = 60e3, HOUR = 3600e3, DAY = 86400e3;
const STEPS = [MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY,
  2 * DAY, 7 * DAY];
const pad = (x) => String(x).padStart(2, "0");

// Time ticks on round UTC instants across [from, to] (ms): as many as fit in `width` px without touching.
// `span`: the range the reader chose (a day or less: times alone; longer: dates too), whatever the data stretch.
export function timeTicks(from, to, width, span = to - from) {
  const longLabel = textWidth("12/31 00:00") + 14;
  const fits = Math.max(2, Math.floor(width / longLabel));
  const count = (s) => Math.floor(to / s) - Math.ceil(from / s) + 1;
  let i = STEPS.findIndex((s) => (to - from) / s <= fits);
  if (i < 0) i = STEPS.length - 1;
  while (i > 0 && count(STEPS[i]) < 2) i--;  // at least two labels, else the axis says nothing of its span
  const step = STEPS[i];
  const out = [], seen = new Set();
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    const d = new Date(t);
    const hm = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
    const md = `${d.getUTCMonth() + 1}/${d.getUTCDate()}`;
    let label = step >= DAY || hm === "00:00" ? md : span > DAY * 1.01 ? `${md} ${hm}` : hm;
    if (seen.has(label)) label = `${md} ${hm}`;  // never the same label twice on one axis
    seen.add(label);
    out.push({ t, label });
  }
  return out;
}

// Greedy placement: each label (in priority order) on the first row where its box overlaps no placed label's and
// stays inside [0, width]; a label with no such row is left out. Returns the row index per label (-1: left out).
export function placeLabels(labels, rows, width) {
  const taken = rows.map(() => []);
  return labels.map((l) => {
    const w = textWidth(l.text, l.size);
    let x0 = l.anchor === "end" ? l.x - w : l.anchor === "middle" ? l.x - w / 2 : l.x;
    if (width) x0 = Math.min(Math.max(x0, 0), width - w);
    for (let r = 0; r < rows.length; r++) {
      if (taken[r].every(([a, b]) => x0 + w + 4 <= a || x0 >= b + 4)) {
        taken[r].push([x0, x0 + w]);
        l.x0 = x0;
        return r;
      }
    }
    return -1;
  });
}

// The width the value labels of an axis need (the left margin of a chart).
export const labelsWidth = (values, unit) => Math.max(...values.map((v) => textWidth(fmt(v, unit))), 20) + 8;
