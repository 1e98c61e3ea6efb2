"""Which tool called in the synthetic history, who pays and how (:mod:`.synthetic`): SDKs on API keys, coding
agents on plans with the plan windows their providers report, Responses WebSocket mode."""

from __future__ import annotations

import random

from ..record import CallRecord


def caller(r: CallRecord, rnd: random.Random) -> None:
    """Which tool called, who pays, how: SDKs on API keys, coding agents on plans (with the plan
    windows Anthropic reports in anthropic-ratelimit-unified-*), Responses WebSocket mode."""
    roll = rnd.random()
    if r.provider == "anthropic" and roll < 0.35:
        r.client_name, r.client_version, r.billing = "claude-code", "2.1.126", "subscription"
        five_h, week = 5 * 3600, 7 * 86400
        u5, u7 = (r.timestamp % five_h) / five_h, (r.timestamp % week) / week
        status = "rejected" if u5 > 0.97 else "allowed_warning" if max(u5, u7) > 0.8 else "allowed"
        r.ratelimit_headers = {
            "anthropic-ratelimit-unified-status": status,
            "anthropic-ratelimit-unified-5h-status": "allowed" if u5 <= 0.8 else "allowed_warning",
            "anthropic-ratelimit-unified-5h-utilization": f"{u5:.2f}",
            "anthropic-ratelimit-unified-7d-status": "allowed" if u7 <= 0.8 else "allowed_warning",
            "anthropic-ratelimit-unified-7d-utilization": f"{u7:.2f}",
            "anthropic-ratelimit-unified-representative-claim": "five_hour" if u5 >= u7 else "seven_day",
        }
    elif r.provider == "anthropic":
        r.client_name, r.client_version, r.billing = "anthropic-python", "0.69.0", "api"
    elif r.api == "openai.responses" and roll < 0.5:
        r.client_name, r.client_version, r.billing = "codex", "0.135.0", "subscription"
        r.transport, r.connection_id = "websocket", f"conn-{rnd.randint(1, 30)}"
        used = (r.timestamp % (5 * 3600)) / (5 * 3600) * 100
        r.ratelimit_headers = {
            "x-codex-primary-used-percent": f"{used:.1f}",
            "x-codex-primary-window-minutes": "300",
            "x-codex-secondary-used-percent": f"{(r.timestamp % (7 * 86400)) / (7 * 86400) * 100:.1f}",
            "x-codex-secondary-window-minutes": "10080",
        }
    else:
        r.client_name, r.client_version, r.billing = "openai-python", "1.109.1", "api"
