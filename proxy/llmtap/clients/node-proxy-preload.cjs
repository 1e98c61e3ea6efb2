// llmtap: make Node's built-in fetch honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY on Node < 24.
//
// Node's fetch (undici inside Node) ignores the proxy variables unless NODE_USE_ENV_PROXY=1, which only
// Node 24 (and 22.21+) understand. Preloaded with `node --require <this file>` (or NODE_OPTIONS, as
// `llmtap env` prints), it installs undici's EnvHttpProxyAgent as the global dispatcher: the dispatcher
// Node's own fetch uses. undici comes from the application (`npm i undici`, 7.x on Node 20): it is
// looked up from the working directory, then from this file's location and NODE_PATH.
"use strict";
(function () {
  if (process.env.LLMTAP_NODE_PRELOAD_DONE) return;
  const major = Number(process.versions.node.split(".")[0]);
  if (process.env.NODE_USE_ENV_PROXY === "1" && major >= 24) return; // Node does it itself
  if (!(process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy)) {
    return;
  }
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
  if (undici === null || typeof undici.EnvHttpProxyAgent !== "function") {
    process.emitWarning(
      "llmtap: undici (with EnvHttpProxyAgent, >= 6.4) not found: fetch() ignores HTTPS_PROXY on Node " +
        process.versions.node + " and these calls are not captured. `npm i undici`, or use base-URL mode " +
        "(OPENAI_BASE_URL=http://127.0.0.1:8080/openai/v1).",
      "LlmtapWarning",
    );
    return;
  }
  undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
  process.env.LLMTAP_NODE_PRELOAD_DONE = "1";
})();
