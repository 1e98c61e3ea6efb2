// One call, readable at a glance: who made it (identity), what it carried and cost (shape), where its time
// went (a timeline drawn to scale), how it ended (outcome), and what surrounds it (its request's other
// attempts, its session, its content when captured).
import { el, exact, facts, fmt, parseTime, usd, utc } from "../dom.js";
import { api } from "../api.js";
import { hideTip, showTip } from "../charts.js";
import { placeLabels, textWidth } from "../scales.js";

const n = (v) => (v === null || v === undefined || v === "" ? null : Number(v));

function card(title, ...children) {
  const c = el("section", { class: "card", "data-card": title.toLowerCase() });
  c.append(el("h3", {}, title), ...children);
  return c;
}

function identity(c) {
  return facts([
    ["time", utc(parseTime(c.timestamp), true)],
    ["provider", c.provider], ["api", c.api], ["server", c.server_address],
    ["model", c.response_model && c.response_model !== c.request_model ? `${c.request_model} → ${c.response_model}` : c.request_model],
    ["request id", c.request_id], ["response id", c.response_id], ["trace id", c.trace_id],
    ["service", c.service], ["user", c.user_id], ["tenant", c.tenant],
    ["session", c.session_id, c.session_id ? `#session?session_id=${encodeURIComponent(c.session_id)}` : null],
    ["feature", c.feature], ["prompt version", c.prompt_version],
    ["client", [c.client_name, c.client_version].filter(Boolean).join(" ")], ["transport", c.transport],
    ["API key", c.api_key_id], ["billing", c.billing],
  ]);
}

function shape(c) {
  const input = n(c.input_tokens) || 0, cr = n(c.cache_read_tokens) || 0, cw = n(c.cache_write_tokens) || 0;
  const tokens = el("table", { class: "mini" });
  const rows = [
    ["input, uncached", Math.max(input - cr - cw, 0)], ["cache read", cr],
    [`cache write${n(c.cache_write_1h_tokens) ? ` (1h: ${c.cache_write_1h_tokens})` : ""}`, cw],
    ["input total", input], ["output", n(c.output_tokens)], ["of which reasoning", n(c.reasoning_tokens)],
  ];
  for (const [k, v] of rows) {
    const tr = el("tr");
    tr.append(el("td", {}, k), el("td", { class: "num" }, fmt(v, "tokens")));
    tokens.append(tr);
  }
  const savings = n(c.uncached_input_cost_usd) !== null && n(c.input_cost_usd) !== null ? n(c.uncached_input_cost_usd) - n(c.input_cost_usd) : null;
  const cost = facts([
    ["cost", c.cost_usd === null ? "unpriced" : exact(c.cost_usd, "currencyUSD")],
    ["input", c.input_cost_usd === null ? null : exact(c.input_cost_usd, "currencyUSD")],
    ["output", c.output_cost_usd === null ? null : exact(c.output_cost_usd, "currencyUSD")],
    ["cache saved", savings ? usd(savings) : null],
    ["cache miss", c.cache_miss_reason ? `${c.cache_miss_reason}${n(c.cache_miss_cost_usd) ? ` (${usd(n(c.cache_miss_cost_usd))} over a warm cache)` : ""}` : null],
    ["tier", c.request_service_tier && c.request_service_tier !== c.service_tier ? `${c.request_service_tier} → ${c.service_tier}` : c.service_tier],
    ["priced by", [c.cost_source, c.price_version].filter(Boolean).join(" ")], ["usage", c.usage_source],
  ]);
  return [tokens, cost];
}

// request → headers → first content → last content → end, to scale, with the gaps between tokens.
function timeline(c) {
  const dur = n(c.duration_ms) || 0, ttfb = n(c.ttfb_ms), ttft = n(c.ttft_ms), dec = n(c.decode_ms);
  const marks = [["request", 0]];
  if (ttfb !== null) marks.push(["headers", ttfb]);
  if (ttft !== null) marks.push(["first content", ttft]);
  if (ttft !== null && dec !== null) marks.push(["last content", ttft + dec]);
  marks.push(["end", dur]);
  const names = { headers: "TTFB (network + queue)", "first content": "prefill → first token", "last content": "decode",
    end: ttft === null ? "response body" : "after the last token" };
  const colors = { headers: "#5794f2", "first content": "#ff9830", "last content": "#73bf69", end: "#8e8e8e" };
  const w = 900, h = 110, x = (t) => 10 + (w - 20) * (dur ? t / dur : 0);
  const svg = el("svg:svg", { width: "100%", viewBox: `0 0 ${w} ${h}`, class: "timeline", role: "img", "aria-label": "call timeline" });
  for (let i = 1; i < marks.length; i++) {
    const [name, t] = marks[i], t0 = marks[i - 1][1];
    const seg = el("svg:rect", { x: x(t0), y: 18, width: Math.max(x(t) - x(t0), 1), height: 16, fill: colors[name],
      "data-segment": name });
    seg.addEventListener("mousemove", (ev) => showTip(ev, [[`${names[name]}: `, exact(t - t0, "ms")]]));
    seg.addEventListener("mouseleave", hideTip);
    svg.append(seg);
    const text = fmt(t - t0, "ms");
    if (x(t) - x(t0) > textWidth(text) + 8) {
      svg.append(el("svg:text", { x: (x(t0) + x(t)) / 2, y: 30, "text-anchor": "middle", class: "on-bar" }, text));
    }
  }
  // the marks' labels: above the bar, then below it, each on the first row where it overlaps nothing
  const last = marks.length - 1, order = [0, last, ...marks.map((m, i) => i).slice(1, last)];  // the ends first
  const labels = order.map((i) => ({ x: x(marks[i][1]), text: `${marks[i][0]}${i ? " " + fmt(marks[i][1], "ms") : ""}`,
    anchor: i === 0 ? "start" : i === marks.length - 1 ? "end" : "middle" }));
  const markRows = [10, 52, 64];
  placeLabels(labels, markRows, w).forEach((row, k) => {
    const i = order[k], [name, t] = marks[i];
    svg.append(el("svg:line", { x1: x(t), x2: x(t), y1: 12, y2: 40, class: "mark" }));
    if (row >= 0) svg.append(el("svg:text", { x: labels[k].x0, y: markRows[row], "data-mark": name }, labels[k].text));
  });
  const p50 = n(c.itl_p50_ms), p95 = n(c.itl_p95_ms), max = n(c.itl_max_ms);
  if (p50 !== null && max) {  // the spread of the gaps between tokens, on its own scale: 0 to the longest gap
    const x0 = 10, x1 = 310, y = 90, s = (g) => x0 + (x1 - x0) * Math.min(g / max, 1);
    svg.append(el("svg:line", { x1: x0, x2: x1, y1: y, y2: y, class: "itl" }));
    const gaps = [["p50", p50], ["p95", p95], ["max", max]].filter(([, g]) => g !== null);
    svg.append(el("svg:text", { x: x1 + 8, y: y + 3 }, "gaps between tokens (0 → longest)"));
    const itl = gaps.map(([label, g]) => ({ x: s(g), text: `${label} ${fmt(g, "ms")}`, anchor: label === "max" ? "end" : "middle" }));
    const itlRows = [y + 13, y - 6];
    placeLabels(itl, itlRows, x1 + 4).forEach((row, k) => {  // never past the scale's end (its caption is there)
      svg.append(el("svg:line", { x1: itl[k].x, x2: itl[k].x, y1: y - 4, y2: y + 4, class: "itl", "data-itl": gaps[k][0] }));
      if (row >= 0) svg.append(el("svg:text", { x: itl[k].x0, y: itlRows[row] }, itl[k].text));
    });
  }
  const legend = facts([
    ["gaps between tokens", p50 === null ? null : `p50 ${fmt(p50, "ms")}, p95 ${fmt(p95, "ms")}, max ${fmt(max, "ms")}`],
    ["output tokens/s", n(c.output_tokens_per_s) === null ? null : fmt(c.output_tokens_per_s)],
    ["provider's own time", n(c.provider_processing_ms) === null ? null : fmt(c.provider_processing_ms, "ms")],
    ["added by llmtap", n(c.overhead_ms) === null ? null : fmt(c.overhead_ms, "ms")],
    ["content events", c.content_events], ["stream", c.stream ? "yes" : "no"],
  ]);
  return [svg, legend];
}

function outcome(c) {
  const f = facts([
    ["outcome", c.outcome], ["status", c.status_code], ["error type", c.error_type], ["error code", c.error_code],
    ["after a 200", c.mid_stream_error ? "yes (mid-stream)" : null], ["message", c.error_message],
    ["finish", c.finish_reason_raw && c.finish_reason_raw !== c.finish_reason ? `${c.finish_reason} (${c.finish_reason_raw})` : c.finish_reason],
    ["retry after", n(c.retry_after_s) === null ? null : fmt(c.retry_after_s, "s")],
    ["attempt", c.attempt], ["requests left", c.ratelimit_remaining_requests], ["tokens left", c.ratelimit_remaining_tokens],
  ]);
  const out = [f];
  const headers = Object.entries(c.ratelimit_headers || {});
  if (headers.length) {
    const t = el("table", { class: "mini" });
    for (const [k, v] of headers.sort()) {
      const tr = el("tr");
      tr.append(el("td", {}, k), el("td", {}, v));
      t.append(tr);
    }
    out.push(el("h4", {}, "rate-limit headers"), t);
  }
  return out;
}

function callsTable(rows, current, cols) {
  const t = el("table", { class: "mini" });
  const head = el("tr");
  for (const [h] of cols) head.append(el("th", {}, h));
  t.append(head);
  for (const r of rows) {
    const tr = el("tr", r.trace_id === current ? { class: "current" } : {});
    for (const [, f] of cols) {
      const v = f(r);
      const td = el("td");
      if (v && typeof v === "object") td.append(v); else td.textContent = v === null || v === undefined ? "–" : String(v);
      tr.append(td);
    }
    t.append(tr);
  }
  return t;
}

const link = (r) => el("a", { href: `#call?trace_id=${encodeURIComponent(r.trace_id)}` }, utc(parseTime(r.timestamp), true));

export async function callPage(page, params) {
  const data = await api("/api/call", { trace_id: params.get("trace_id") || "" });
  const c = data.call;
  const links = el("div", { class: "links" });
  links.append(el("a", { href: data.links.trace }, "span attributes"));
  if (data.links.grafana) links.append(el("a", { href: data.links.grafana, rel: "noopener noreferrer", target: "_blank" }, "Grafana trace view"));
  if (c.session_id) links.append(el("a", { href: `#session?session_id=${encodeURIComponent(c.session_id)}` }, `session (${fmt(data.session_calls, "count:calls")})`));
  page.append(el("h2", {}, `${c.operation || "call"} ${c.request_model} · ${c.outcome}`), links);
  const grid = el("div", { class: "cards" });
  grid.append(card("Identity", identity(c)), card("Shape", ...shape(c)), card("Outcome", ...outcome(c)));
  page.append(grid, card("Timeline", ...timeline(c)));
  if (data.attempts.length) {
    page.append(card("Attempts of this request", callsTable(data.attempts, c.trace_id, [
      ["time", link], ["attempt", (r) => r.attempt], ["outcome", (r) => r.outcome], ["error", (r) => r.error_type],
      ["status", (r) => r.status_code], ["retry after", (r) => fmt(r.retry_after_s, "s")],
      ["duration", (r) => fmt(r.duration_ms, "ms")], ["cost", (r) => r.cost_usd === null ? "–" : usd(Number(r.cost_usd))]])));
  }
  if (data.session.length) {
    page.append(card("In its session", callsTable(data.session, c.trace_id, [
      ["time", link], ["model", (r) => r.request_model], ["feature", (r) => r.feature], ["outcome", (r) => r.outcome],
      ["cost", (r) => r.cost_usd === null ? "–" : usd(Number(r.cost_usd))], ["duration", (r) => fmt(r.duration_ms, "ms")]])));
  }
  if (data.content) {
    const pre = (s) => el("pre", { class: "content" }, s || "–");
    page.append(card("Content (captured)", el("h4", {}, "input"), pre(data.content.input_messages), el("h4", {}, "output"),
      pre(data.content.output_messages)));
  }
}
