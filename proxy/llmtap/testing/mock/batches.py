"""The batch APIs: OpenAI's Batch API (with the file uploads and downloads it uses) and Anthropic's
Message Batches, run at once.

OpenAI: ``POST /v1/files`` (multipart upload) → a file; ``POST /v1/batches`` → a batch
``validating``; ``GET /v1/batches/{id}`` → ``completed`` with its ``output_file_id``;
``GET /v1/files/{id}/content`` → the output file: one line per line of the input file,
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``, the body
being what the mock answers that request directly (a request for the model ``mock-bad-model``
fails with a 400). Anthropic: ``POST /v1/messages/batches`` → ``in_progress``;
``GET /v1/messages/batches/{id}`` → ``ended`` with its ``results_url``;
``GET …/results`` → ``{"custom_id", "result": {"type": "succeeded", "message"}}`` lines (or
``errored``), ``usage.service_tier`` ``batch``. Shapes: the providers' API references (the
output line and the results line are the ones their batch guides show).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from . import anthropic, openai
from .common import CREATED, Reply, json_reply

_files: dict[str, bytes] = {}
_batches: dict[str, dict[str, Any]] = {}
_ids = itertools.count(1)
BAD_MODEL = "mock-bad-model"


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids):06d}mock"


def upload(headers: dict[str, str], raw: bytes) -> Reply:
    """``POST /v1/files``: keep the uploaded file (multipart/form-data)."""
    msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {headers.get('content-type', '')}\r\n\r\n".encode() + raw)
    content, name, purpose = b"", "upload.jsonl", "batch"
    for part in msg.iter_parts() if msg.is_multipart() else []:
        field = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if field == "file":
            content, name = data, str(part.get_filename() or name)
        elif field == "purpose":
            purpose = data.decode()
    fid = _id("file-")
    _files[fid] = content
    return json_reply(
        200,
        {
            "id": fid,
            "object": "file",
            "bytes": len(content),
            "created_at": CREATED,
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        },
    )


def _openai_batch(bid: str, status: str) -> dict[str, Any]:
    b = _batches[bid]
    done = status == "completed"
    return {
        "id": bid,
        "object": "batch",
        "endpoint": b["endpoint"],
        "errors": None,
        "input_file_id": b["input_file_id"],
        "completion_window": "24h",
        "status": status,
        "output_file_id": b["output_file_id"] if done else None,
        "error_file_id": None,
        "created_at": CREATED,
        "in_progress_at": CREATED + 1 if done else None,
        "expires_at": CREATED + 86400,
        "completed_at": CREATED + 60 if done else None,
        "request_counts": {"total": b["total"], "completed": b["total"] if done else 0, "failed": 0},
        "metadata": None,
    }


def _output_line(i: int, line: dict[str, Any]) -> dict[str, Any]:
    body = dict(line.get("body") or {})
    body.pop("stream", None)
    rid = f"req_mock_batch_{i}"
    if body.get("model") == BAD_MODEL:
        err = {
            "error": {
                "message": f"The model `{BAD_MODEL}` does not exist.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        }
        return {
            "id": f"batch_req_{i}",
            "custom_id": line.get("custom_id"),
            "response": {"status_code": 404, "request_id": rid, "body": err},
            "error": None,
        }
    url = str(line.get("url") or "/v1/chat/completions")
    reply = openai.openai_embeddings(body, "") if url.endswith("/embeddings") else openai.openai_chat(body, "default")
    answer = json.loads(b"".join(reply.chunks))
    answer["created"] = int(time.time())  # run when the batch was created (not the fixed time of direct replies)
    return {
        "id": f"batch_req_{i}",
        "custom_id": line.get("custom_id"),
        "response": {"status_code": reply.status, "request_id": rid, "body": answer},
        "error": None,
    }


def openai_batches(method: str, path: str, body: dict[str, Any]) -> Reply | None:
    bare = path.split("?", 1)[0].rstrip("/")
    if method == "POST" and bare == "/v1/batches":
        bid = _id("batch_")
        lines = [json.loads(x) for x in _files.get(str(body.get("input_file_id")), b"").splitlines() if x.strip()]
        out = "\n".join(json.dumps(_output_line(i, x)) for i, x in enumerate(lines)) + "\n"
        ofid = _id("file-out-")
        _files[ofid] = out.encode()
        _batches[bid] = {
            "endpoint": body.get("endpoint", "/v1/chat/completions"),
            "input_file_id": body.get("input_file_id"),
            "output_file_id": ofid,
            "total": len(lines),
        }
        return json_reply(200, _openai_batch(bid, "validating"))
    m = re.fullmatch(r"/v1/batches/([^/]+)", bare)
    if method == "GET" and m and m.group(1) in _batches:
        return json_reply(200, _openai_batch(m.group(1), "completed"))
    m = re.fullmatch(r"/v1/files/([^/]+)/content", bare)
    if method == "GET" and m:
        if m.group(1) not in _files:
            return json_reply(404, {"error": {"message": "No such File object", "type": "invalid_request_error"}})
        return Reply(200, [("content-type", "application/octet-stream")], [_files[m.group(1)]])
    return None


def _anthropic_batch(bid: str, ended: bool) -> dict[str, Any]:
    n = len(_batches[bid]["requests"])
    return {
        "id": bid,
        "type": "message_batch",
        "processing_status": "ended" if ended else "in_progress",
        "request_counts": {
            "processing": 0 if ended else n,
            "succeeded": n if ended else 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        },
        "ended_at": "2025-11-29T07:36:40Z" if ended else None,
        "created_at": "2025-11-29T07:06:40Z",
        "expires_at": "2025-11-30T07:06:40Z",
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": f"https://api.anthropic.com/v1/messages/batches/{bid}/results" if ended else None,
    }


def _result_line(req: dict[str, Any]) -> dict[str, Any]:
    params = dict(req.get("params") or {})
    params.pop("stream", None)
    if params.get("model") == BAD_MODEL:
        err = {
            "type": "error",
            "error": {"type": "not_found_error", "message": f"model: {BAD_MODEL}"},
            "request_id": "req_mock_batch_err",
        }
        return {"custom_id": req.get("custom_id"), "result": {"type": "errored", "error": err}}
    message = json.loads(b"".join(anthropic.anthropic_messages(params, "default").chunks))
    message["usage"]["service_tier"] = "batch"
    return {"custom_id": req.get("custom_id"), "result": {"type": "succeeded", "message": message}}


def anthropic_batches(method: str, path: str, body: dict[str, Any]) -> Reply | None:
    bare = path.split("?", 1)[0].rstrip("/")
    if method == "POST" and bare == "/v1/messages/batches":
        bid = _id("msgbatch_")
        _batches[bid] = {"requests": list(body.get("requests") or [])}
        return json_reply(200, _anthropic_batch(bid, False))
    m = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results)?", bare)
    if method == "GET" and m and m.group(1) in _batches:
        if not m.group(2):
            return json_reply(200, _anthropic_batch(m.group(1), True))
        lines = "".join(json.dumps(_result_line(r)) + "\n" for r in _batches[m.group(1)]["requests"])
        return Reply(
            200, [("content-type", "application/binary"), ("request-id", "req_mock_results")], [lines.encode()]
        )
    return None
