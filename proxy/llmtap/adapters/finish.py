"""Providers' finish and stop values → the contract's normalized ``finish_reason`` (one table)."""

from __future__ import annotations

from ..record import FinishReason

# Provider finish/stop values → the contract's normalized finish_reason.
FINISH_MAP: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "completed": "stop",
    "eos": "stop",
    "end": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_context_window_exceeded": "length",
    "model_length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
    "safety": "content_filter",
    "refusal": "refusal",
    "error": "error",
    "failed": "error",
    # AWS Bedrock
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
    # Gemini (upper case, matched case-insensitively like the others)
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "image_safety": "content_filter",
    "image_prohibited_content": "content_filter",
    "image_recitation": "content_filter",
    "language": "content_filter",
    "malformed_function_call": "error",
    "unexpected_tool_call": "error",
    "too_many_tool_calls": "error",
}


def normalize_finish(raw: str) -> FinishReason:
    return FINISH_MAP.get(raw.lower(), "") if raw else ""


__all__ = ["FINISH_MAP", "normalize_finish"]
