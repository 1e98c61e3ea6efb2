// One banner when the store does not answer, instead of a blank page and an exception in every panel.
// The page asks /api/status before it queries anything; while the store is down nothing else is queried,
// and the status is asked again every few seconds until it answers.
import { $, el } from "./dom.js";
import { api, NeedLogin, StoreDown } from "./api.js";

const RETRY_MS = 5000;
let down = false;
let waiters = [];

export function storeIsDown() { return down; }

export function showDown(message) {
  down = true;
  const b = $("banner");
  b.replaceChildren(el("strong", {}, "Store unreachable. "),
    document.createTextNode(`${message} — the panels load as soon as it answers (checking every ${RETRY_MS / 1000} s).`));
  b.hidden = false;
  document.body.dataset.store = "down";
  document.querySelectorAll(".panel .body .empty").forEach((e) => { e.textContent = "waiting for the store"; });
  setTimeout(check, RETRY_MS);
}

function showUp() {
  down = false;
  $("banner").hidden = true;
  document.body.dataset.store = "up";
  const w = waiters;
  waiters = [];
  w.forEach((f) => f());
}

// Resolves when the banner next goes (at once when the store is not known to be down): what a panel or page
// that met the store going away mid-load waits for before it loads again.
export function whenUp() {
  return down ? new Promise((resolve) => waiters.push(resolve)) : Promise.resolve();
}

// Resolves once the store answers (at once when it does).
export async function storeReady() {
  if (!(await check())) await whenUp();
}

async function check() {
  try {
    const st = await api("/api/status");
    if (st.store && st.store.ok === false) {
      if (!down) showDown(st.store.error || "the store does not answer");
      else setTimeout(check, RETRY_MS);
      return false;
    }
    if (down || document.body.dataset.store !== "up") showUp();
    return true;
  } catch (e) {
    if (e instanceof NeedLogin) throw e;
    const msg = e instanceof StoreDown ? e.message : String(e.message || e);
    if (!down) showDown(msg); else setTimeout(check, RETRY_MS);
    return false;
  }
}
