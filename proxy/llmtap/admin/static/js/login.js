// The data API needs the admin token: the page exchanges it once for an HttpOnly session cookie (this box,
// or a #token=... link whose fragment never leaves the browser).
import { $, el } from "./dom.js";
import { login } from "./api.js";

export function showLogin(message) {
  const box = el("form", { id: "login", class: "login" });
  const input = el("input", { type: "password", size: 40, autocomplete: "current-password",
    placeholder: "admin token (<data-dir>/admin-token)", "aria-label": "admin token" });
  const err = el("div", { class: "error" }, message || "");
  box.append(el("label", {}, "Admin token "), input, el("button", { type: "submit" }, "Sign in"), err);
  box.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { await login(input.value.trim()); location.reload(); } catch (e) { err.textContent = "Wrong token."; }
  });
  $("page").hidden = true;  // a page (explain, call, session) asked: the box takes its place
  $("grid").hidden = false;
  $("grid").replaceChildren(box);
  input.focus();
}

export async function tokenFromLink() {
  if (!location.hash.startsWith("#token=")) return true;
  const token = decodeURIComponent(location.hash.slice(7));
  history.replaceState(null, "", location.pathname + location.search);
  try { await login(token); return true; } catch (e) { showLogin("That link's token is wrong."); return false; }
}
