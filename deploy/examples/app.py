"""An unmodified OpenAI app: it only sees HTTPS_PROXY and SSL_CERT_FILE (set by docker-compose)."""

import time

import openai

client = openai.OpenAI(max_retries=0)
features = ["search", "summarize", "chat"]
i = 0
while True:
    try:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello in five words."}], stream=True,
            stream_options={"include_usage": True}, extra_headers={"x-llmtap-feature": features[i % 3]})
        print("".join(c.choices[0].delta.content or "" for c in stream if c.choices), flush=True)
    except openai.APIError as e:
        print("error:", e, flush=True)
    i += 1
    time.sleep(2)
