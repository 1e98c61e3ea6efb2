// The admin API: JSON in, JSON out, the session cookie; a store that does not answer is its own error.
export class NeedLogin extends Error {}
export class StoreDown extends Error {}

export async function api(path, body) {
  const opts = body === undefined ? { credentials: "same-origin" } : { method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw new StoreDown("the sidecar does not answer");
  }
  if (resp.status === 401) throw new NeedLogin("the admin token is needed");
  if (resp.status === 204) return {};
  const data = await resp.json().catch(() => ({ error: `HTTP ${resp.status}` }));
  if (resp.status === 503 && data.store_unreachable) throw new StoreDown(data.error || "the store is unreachable");
  if (!resp.ok) throw new Error(data.error || `HTTP ${resp.status}`);
  return data;
}

export async function login(token) {
  await api("/api/login", { token });
}
