"""JSON-mode answers: a request that asks for JSON gets valid JSON, an instance of its schema when it gives one.

The APIs' JSON modes: OpenAI Chat ``response_format`` (``json_object``, ``json_schema``), the Responses API's
``text.format``, Gemini's ``generationConfig.responseMimeType: application/json`` with ``responseSchema`` (OpenAPI
subset, upper-case types) or ``responseJsonSchema``, and a tool the client forces (Anthropic ``tool_choice`` of type
``tool``/``any``, OpenAI ``tool_choice`` naming a function): the agents' routers and classifiers (Gemini CLI's
model router) parse what comes back, and a plain-text answer makes them retry and fall back.
"""

from __future__ import annotations

import json
from typing import Any

TEXT = "The quick brown fox"  # the string the mock puts where a schema asks for one
PLAIN = {"answer": TEXT}  # JSON mode without a schema


def example(schema: Any, depth: int = 0) -> Any:
    """A small value valid against ``schema`` (JSON Schema, or Gemini's OpenAPI subset): the first enum value or
    const, every property (required or not), one array item, the minimum of a number."""
    if not isinstance(schema, dict) or depth > 8:
        return TEXT
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kind = next((k for k in kind if k != "null"), "null")
    kind = str(kind or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        props = schema.get("properties")
        return {str(k): example(v, depth + 1) for k, v in (props.items() if isinstance(props, dict) else [])}
    if kind == "array":
        return [example(schema.get("items"), depth + 1)] * max(1, int(schema.get("minItems") or 1))
    if kind in ("integer", "number"):
        top = schema.get("maximum", 1)
        low: float = schema.get("minimum", 1 if not isinstance(top, (int, float)) or top >= 1 else top)  # a score: 1
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return TEXT


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pieces(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` consecutive pieces (fewer when it is shorter), for a stream's deltas."""
    n = max(1, min(n, len(text)))
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def chat_json(body: dict[str, Any]) -> str | None:
    """OpenAI Chat Completions: the JSON the message content must be, or None (plain text)."""
    fmt = body.get("response_format")
    return _openai_format(fmt if isinstance(fmt, dict) else {})


def responses_json(body: dict[str, Any]) -> str | None:
    """The Responses API: ``text.format`` ``{"type": "json_schema", "schema": …}`` or ``json_object``."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    return _openai_format(fmt if isinstance(fmt, dict) else {})


def _openai_format(fmt: dict[str, Any]) -> str | None:
    if fmt.get("type") == "json_object":
        return dumps(PLAIN)
    if fmt.get("type") == "json_schema":
        nested = fmt.get("json_schema")  # chat nests the schema one level deeper than the Responses API
        spec: dict[str, Any] = nested if isinstance(nested, dict) else fmt
        return dumps(example(spec.get("schema")))
    return None


def gemini_json(body: dict[str, Any]) -> str | None:
    """Gemini/Vertex ``generationConfig`` (camelCase or snake_case): JSON when the MIME type asks for it."""
    cfg = body.get("generationConfig") or body.get("generation_config") or {}
    if not isinstance(cfg, dict):
        return None
    mime = cfg.get("responseMimeType") or cfg.get("response_mime_type")
    if mime != "application/json":
        return None
    keys = ("responseJsonSchema", "response_json_schema", "responseSchema", "response_schema")
    schema = next((cfg[k] for k in keys if k in cfg), None)
    return dumps(example(schema) if schema is not None else PLAIN)


def forced_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Anthropic Messages: the tool the client forces (``tool_choice`` ``tool`` or ``any``), and its input."""
    choice = body.get("tool_choice")
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    if not isinstance(choice, dict) or choice.get("type") not in ("tool", "any") or not tools:
        return None
    tool = next((t for t in tools if t["name"] == choice.get("name")), tools[0])
    value = example(tool.get("input_schema") or {"type": "object"})
    return str(tool["name"]), value if isinstance(value, dict) else {}
