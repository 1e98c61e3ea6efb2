// Tables of the boards: the identifying column first (the call link never off-screen), every number with its
// unit (from the column's name, or the row's driver for the explain analyses' before/after), empty columns left
// out, and the table scrolling inside its panel when it is wider.
import { DRIVER_UNITS, IDENTIFYING, el, empty, exact, fmt, unitOfColumn } from "./dom.js";

export const isNum = (t) => /Int|Float|Decimal/.test(t);
export const isTime = (t) => /DateTime|Date/.test(t);
const FIRST = ["trace_id"];  // the column that names the row: it leads, whatever the SQL's order

// Cells that lead somewhere: a call's page from its trace id, a session's from its id.
function linkFor(name, v) {
  if (!v) return null;
  if (name === "trace_id") return { href: `#call?trace_id=${encodeURIComponent(v)}`, text: String(v).slice(0, 12) + "…" };
  if (name === "session_id") return { href: `#session?session_id=${encodeURIComponent(v)}`, text: String(v) };
  return null;
}

function cellUnit(name, row, idx) {
  if ((name === "before" || name === "after") && idx.driver !== undefined) {
    return DRIVER_UNITS[row[idx.driver]] || null;
  }
  return null;
}

export function drawTable(body, frame) {
  if (!frame.rows.length) return empty(body);
  const rows = frame.rows.slice(0, 300);
  const idx = Object.fromEntries(frame.columns.map((c, i) => [c.name, i]));
  const blank = (v) => v === null || v === "" || (Array.isArray(v) && !v.length);
  const order = frame.columns.map((c, i) => i)
    .filter((i) => !rows.every((r) => blank(r[i])))  // a column empty in every row says nothing
    .sort((a, b) => (FIRST.includes(frame.columns[b].name) ? 1 : 0) - (FIRST.includes(frame.columns[a].name) ? 1 : 0));
  const table = el("table"), head = el("tr");
  for (const i of order) {
    const c = frame.columns[i];
    head.append(el("th", { "data-col": c.name }, isTime(c.type) ? `${c.name} (UTC)` : c.name));
  }
  table.append(head);
  for (const row of rows) {
    const tr = el("tr");
    for (const i of order) {
      const c = frame.columns[i], v = row[i];
      const num = isNum(c.type) && v !== null;
      const unit = IDENTIFYING.includes(c.name) ? "short" : unitOfColumn(c.name);
      const byRow = num ? cellUnit(c.name, row, idx) : null;
      const td = el("td", num ? { class: "num", title: exact(v, unit) } : {});
      const link = linkFor(c.name, v);
      if (link) td.append(el("a", { href: link.href, title: String(v) }, link.text));
      else td.textContent = byRow ? byRow(Number(v)) : num ? fmt(v, unit) : v === null ? "–"
        : typeof v === "object" ? JSON.stringify(v) : String(v);
      tr.append(td);
    }
    table.append(tr);
  }
  body.append(table);
}
