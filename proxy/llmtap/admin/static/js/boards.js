// The dashboards of dashboards/*.json: variables, the time range, the panels (their SQL stays on the server).
import { $, el } from "./dom.js";
import { api, NeedLogin, StoreDown } from "./api.js";
import { DRAW, drawTable } from "./charts.js";
import { showDown, storeReady, whenUp } from "./banner.js";
import { showLogin } from "./login.js";

export const state = { boards: [], board: null, vars: {}, timer: null, loadSeq: 0, varSeq: 0 };

export function timeRange() {
  const to = Date.now() / 1000;
  return { from: to - Number($("range").value), to };
}

// Variables as the server expects them: empty text boxes are left out (no filter).
function sentVars() {
  const out = {};
  for (const [k, v] of Object.entries(state.vars)) if (v.length && !(v.length === 1 && v[0] === "")) out[k] = v;
  return out;
}

async function loadPanel(panel, box, seq) {
  const body = box.querySelector(".body");
  box.classList.add("loading");
  try {
    const view = timeRange();
    const { from, to } = view;
    const frame = await api("/api/panel", { uid: state.board.uid, panel: panel.id, from, to,
      maxDataPoints: Math.max(Math.floor(box.clientWidth / 6), 40), vars: sentVars() });
    if (seq !== state.loadSeq) return;
    body.replaceChildren();
    (DRAW[panel.type] || drawTable)(body, frame, panel, view);
    box.dataset.state = "rendered";
  } catch (e) {
    if (e instanceof NeedLogin) { showLogin(); return; }
    if (e instanceof StoreDown) {
      body.replaceChildren(el("div", { class: "empty" }, "waiting for the store"));
      box.dataset.state = "waiting";
      showDown(e.message);
      // the status said the store was up when the board started loading: this panel loads again once it is
      whenUp().then(() => { if (seq === state.loadSeq) loadPanel(panel, box, seq); });
      return;
    }
    body.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
    box.dataset.state = "error";
  } finally {
    box.classList.remove("loading");
  }
}

function drawBoxes() {
  const grid = $("grid");
  grid.replaceChildren();
  return state.board.panels.map((panel) => {
    const g = panel.gridPos;
    const box = el("section", { class: "panel", "data-type": panel.type, "data-panel": panel.id,
      "data-unit": panel.fieldConfig?.defaults?.unit,
      style: `grid-column:${g.x + 1} / span ${g.w};grid-row:${g.y + 1} / span ${g.h}` });
    box.append(el("h2", { title: panel.description || panel.title }, panel.title), el("div", { class: "body" }));
    box.querySelector(".body").append(el("div", { class: "empty" }, "…"));
    grid.append(box);
    return box;
  });
}

export async function render() {
  const seq = ++state.loadSeq;
  const boxes = drawBoxes();
  await storeReady();  // nothing is queried while the store is down: the banner says so, once
  if (seq !== state.loadSeq) return;
  boxes.forEach((box, i) => loadPanel(state.board.panels[i], box, seq));
}

function customOptions(v) {
  if (Array.isArray(v.options) && v.options.length) return v.options.map((o) => String(o.value));
  return String(v.query || "").split(",").map((x) => x.trim()).filter(Boolean);
}

// The board's filters, each box inside its label (one unit: the label never wraps away from its box). Built
// aside and put in at once, so that two boards opened in quick succession never interleave their filters.
async function loadVariables() {
  const holder = $("vars");
  const seq = ++state.varSeq;
  const labels = [];
  const { from, to } = timeRange();
  for (const v of state.board.templating?.list || []) {
    const label = el("label", { class: "filter" });
    label.append(el("span", {}, v.label || v.name));
    if (v.type === "textbox") {
      const input = el("input", { size: 14, value: (state.vars[v.name] || [""])[0], "data-var": v.name,
        placeholder: v.label || v.name, type: "search" });
      input.addEventListener("change", () => { state.vars[v.name] = [input.value.trim()]; render(); });
      label.append(input);
    } else {
      const sel = el("select", { "data-var": v.name });
      if (v.includeAll) sel.append(el("option", { value: "$__all" }, "All"));
      let values = [];
      if (v.type === "custom") values = customOptions(v);
      else {
        try { values = await api("/api/variable", { uid: state.board.uid, name: v.name, from, to }); } catch (e) {
          if (e instanceof NeedLogin) throw e;  // an empty store: keep "All"
        }
      }
      for (const value of values) sel.append(el("option", { value }, value));
      const fallback = v.includeAll ? "$__all" : (v.current?.value || [values[0]])[0];
      sel.value = (state.vars[v.name] || [fallback])[0];
      if (sel.selectedIndex < 0) sel.value = fallback;
      state.vars[v.name] = [sel.value];
      sel.addEventListener("change", () => { state.vars[v.name] = [sel.value]; render(); });
      label.append(sel);
    }
    labels.push(label);
  }
  if (seq === state.varSeq) holder.replaceChildren(...labels);
}

export async function openBoard(uid, vars = {}) {
  state.board = await api(`/api/dashboards/${encodeURIComponent(uid)}`);
  state.vars = vars;
  document.title = `${state.board.title} · llmtap`;
  $("title").textContent = state.board.title;
  $("controls").hidden = false;
  state.loadSeq++;
  drawBoxes();  // the board's panels at once, waiting
  await storeReady();
  await loadVariables();
  await render();
}

export function schedule() {
  clearInterval(state.timer);
  const s = Number($("refresh").value);
  if (s > 0) state.timer = setInterval(() => { if (state.board) render(); }, s * 1000);
}
