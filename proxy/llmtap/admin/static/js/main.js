// llmtap's built-in viewer: the Grafana dashboards of dashboards/*.json rendered against the sidecar's store,
// and its own pages (explain, a call, a session). Routes are the URL fragment: #<board uid>?var=value,
// #explain?window=24h&baseline=7d, #call?trace_id=..., #session?session_id=...
import { $, el } from "./dom.js";
import { api, NeedLogin, StoreDown } from "./api.js";
import { openBoard, render, schedule, state } from "./boards.js";
import { showDown, storeReady, whenUp } from "./banner.js";
import { showLogin, tokenFromLink } from "./login.js";
import { explainPage } from "./pages/explain.js";
import { callPage } from "./pages/call.js";
import { sessionPage } from "./pages/session.js";

const PAGES = { explain: ["Explain", explainPage], call: ["Call", callPage], session: ["Session", sessionPage] };

async function showPage(name, params) {
  const [title, draw] = PAGES[name];
  state.board = null;
  state.loadSeq++;
  $("grid").hidden = true;
  $("controls").hidden = true;
  const page = $("page");
  page.hidden = false;
  page.replaceChildren();
  page.dataset.page = name;
  page.dataset.state = "loading";
  $("title").textContent = title;
  document.title = `${title} · llmtap`;
  try {
    await storeReady();
    await draw(page, params);
    page.dataset.state = "rendered";
  } catch (e) {
    if (e instanceof NeedLogin) { showLogin(); return; }
    if (e instanceof StoreDown) {  // it went away while the page loaded: the page loads again once it is back
      showDown(e.message);
      page.replaceChildren(el("div", { class: "empty" }, "waiting for the store"));
      page.dataset.state = "waiting";
      const seq = state.loadSeq;
      whenUp().then(() => { if (seq === state.loadSeq) showPage(name, params); });
      return;
    }
    page.append(el("div", { class: "error" }, String(e.message || e)));
    page.dataset.state = "error";
  }
}

async function route() {
  const [name, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  $("boards").querySelectorAll("a").forEach((a) => a.classList.toggle("active", a.dataset.uid === (name || state.boards[0]?.uid)));
  if (name in PAGES) return showPage(name, params);
  $("page").hidden = true;
  $("grid").hidden = false;
  const vars = {};
  params.forEach((v, k) => { vars[k] = [v]; });
  try {
    await openBoard(name || state.boards[0].uid, vars);
  } catch (e) {
    if (e instanceof NeedLogin) showLogin(); else $("grid").replaceChildren(el("div", { class: "error" }, String(e.message || e)));
  }
}

async function main() {
  if (!(await tokenFromLink())) return;
  try {
    state.boards = await api("/api/dashboards");
  } catch (e) {
    if (e instanceof NeedLogin) { showLogin(); return; }
    throw e;
  }
  for (const b of state.boards) {
    $("boards").append(el("a", { href: `#${b.uid}`, "data-uid": b.uid }, b.title.replace(/^LLM /, "")));
  }
  $("boards").append(el("a", { href: "#explain", "data-uid": "explain" }, "explain"));
  window.addEventListener("hashchange", route);
  $("range").addEventListener("change", () => { if (state.board) openBoard(state.board.uid, state.vars); });
  $("refresh").addEventListener("change", schedule);
  $("reload").addEventListener("click", () => (state.board ? render() : route()));
  await route();
  schedule();
}

main().catch((e) => { $("grid").replaceChildren(el("div", { class: "error" }, String(e.message || e))); });
