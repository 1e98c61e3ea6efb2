// llmtap: make Node's built-in fetch honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY on Node < 24.
//
// Node's fetch (undici inside Node) ignores the proxy variables unless NODE_USE_ENV_PROXY=1, which only
// Node 24 (and 22.21+) understand. Preloaded with `node --require <this file>` (or NODE_OPTIONS, as
// `llmtap env` prints), it installs undici's EnvHttpProxyAgent as the global dispatcher: the dispatcher
// Node's own fetch uses. undici comes from the application (`npm i undici`, 7.x on Node 20): it is
// looked up from the working directory, then from this file's location and NODE_PATH.
//
// Without undici it warns, but only when a call really goes around the proxy: many programs never use
// Node's fetch for their calls (Codex's `codex` command is a Node launcher for a native binary that reads
// HTTPS_PROXY itself; Gemini CLI routes fetch through its own bundled undici ProxyAgent). undici's
// diagnostics channels (Node's fetch and any bundled undici publish on them) show each connection: one whose
// socket reaches the proxy is captured; one to another host that NO_PROXY does not exempt is not.
"use strict";
(function () {
  if (process.env.LLMTAP_NODE_PRELOAD_DONE) return;
  const major = Number(process.versions.node.split(".")[0]);
  if (process.env.NODE_USE_ENV_PROXY === "1" && major >= 24) return; // Node does it itself
  const proxyUrl = process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy;
  if (!proxyUrl) return;
  const path = require("node:path");
  const { createRequire } = require("node:module");
  let undici = null;
  for (const from of [path.join(process.cwd(), "noop.js"), __filename]) {
    try {
      undici = createRequire(from)("undici");
      break;
    } catch (_) {
      // next
    }
  }
  if (undici !== null && typeof undici.EnvHttpProxyAgent === "function") {
    undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
    process.env.LLMTAP_NODE_PRELOAD_DONE = "1";
    return;
  }
  watchForBypass(proxyUrl);
})();

function watchForBypass(proxyUrl) {
  let proxy;
  try {
    proxy = new URL(proxyUrl);
  } catch (_) {
    return;
  }
  const proxyPort = Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80));
  const proxyHosts = new Set([proxy.hostname.replace(/^\[|\]$/g, "")]);
  if (proxy.hostname === "localhost") ["127.0.0.1", "::1", "::ffff:127.0.0.1"].forEach((h) => proxyHosts.add(h));
  if (proxy.hostname === "127.0.0.1") proxyHosts.add("::ffff:127.0.0.1");
  const exempt = (process.env.NO_PROXY || process.env.no_proxy || "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const isExempt = (host) =>
    exempt.some((e) => e === "*" || host === e.replace(/^\./, "") || host.endsWith(e.startsWith(".") ? e : "." + e));
  const viaProxy = (host, port) => proxyHosts.has(host) && Number(port) === proxyPort;
  const proxyDispatcher = () => {
    const d = globalThis[Symbol.for("undici.globalDispatcher.1")];
    return Boolean(d && /Proxy/.test((d.constructor && d.constructor.name) || ""));
  };
  let warned = false;
  const warn = (host) => {
    if (warned) return;
    warned = true;
    process.emitWarning(
      "llmtap: a request to " + host + " went around the proxy: fetch() ignores HTTPS_PROXY on Node " +
        process.versions.node + " and undici (with EnvHttpProxyAgent, >= 6.4) was not found, so these calls " +
        "are not captured. `npm i undici`, or use base-URL mode (OPENAI_BASE_URL=http://127.0.0.1:8080/openai/v1).",
      "LlmtapWarning",
    );
  };
  const dc = require("node:diagnostics_channel");
  dc.subscribe("undici:client:connected", (m) => {
    const host = String((m.connectParams && m.connectParams.hostname) || "").toLowerCase();
    const socket = m.socket || {};
    if (warned || viaProxy(socket.remoteAddress, socket.remotePort) || viaProxy(host, m.connectParams.port)) return;
    if (!isExempt(host)) warn(host);
  });
  dc.subscribe("undici:client:connectError", (m) => {
    // a direct connection that failed (no network, DNS) went around the proxy all the same
    const host = String((m.connectParams && m.connectParams.hostname) || "").toLowerCase();
    if (warned || viaProxy(host, m.connectParams.port) || isExempt(host) || proxyDispatcher()) return;
    warn(host);
  });
}
