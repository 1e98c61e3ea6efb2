// One streamed chat completion with the official `openai` package, configured only by the environment
// (OPENAI_BASE_URL when set, else the real API host through whatever proxy the environment gives).
// Usage: node chat.mjs SESSION_ID  → prints {"chunks": N, "text": "..."}
import OpenAI from "openai";

const client = new OpenAI({ apiKey: "sk-node-test", maxRetries: 0, timeout: 30_000 });
const stream = await client.chat.completions.create(
  {
    model: "gpt-4o",
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Say hi" }],
  },
  { headers: { "x-llmtap-session": process.argv[2] } },
);
let chunks = 0;
let text = "";
for await (const chunk of stream) {
  chunks += 1;
  text += chunk.choices[0]?.delta?.content ?? "";
}
console.log(JSON.stringify({ chunks, text }));
