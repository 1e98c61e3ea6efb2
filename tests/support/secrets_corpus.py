"""Planted secrets of every shape (issue #19, finding 7): what redaction must remove wherever llmtap writes.

Each value is distinctive (it contains PLANTED or a fixed pattern), so a search of tables, spans,
logs, metrics, the spool and the data dir finds it if any copy survived.
"""

from __future__ import annotations

SIG = "a3f1c9e27b4d8f60a3f1c9e27b4d8f60a3f1c9e27b4d8f60a3f1c9e27b4d8f60"
SHAPES = {
    "sigv4 credential": "AKIAZPLANTED0KEY0ID1",
    "sigv4 signature": SIG,
    "aws secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY9",
    "aws session token": "IQoJb3JpZ2luX2VjEPLANTED0123456789abcdefGHIJKLmnopqrstuvWXYZ",
    "anthropic": "sk-ant-api03-PLANTEDxxxxxxxxxxxxxxxxxxxx",
    "openai project": "sk-proj-PLANTED0123456789abcdef",
    "google": "AIzaSyPLANTED0123456789abcdefghijklmnop",
    "groq": "gsk_PLANTED0123456789abcdefghij",
    "huggingface": "hf_PLANTED0123456789abcdefghij",
    "azure hex": "0123456789abcdef0123456789abcdef",
    "json password": "hunter2-PLANTED-pw",
    "json client secret": "cs-PLANTED-value-42",
    "bearer-like": "Zk9QTEFOVEVEMTIzNDU2Nzg5YWJjZGVmZ2hpamtsbW5vcA",
    "connection url password": "PLANTED-db-pw-9x",  # issue #26
    "aws secret unnamed": "Zq8PLANTEDsecretKEY/abc+def0123456789ABC",  # issue #26: 40 characters, no name
}
assert len(SHAPES["aws secret unnamed"]) == 40
TEXT = (
    f"SignatureDoesNotMatch: Authorization: AWS4-HMAC-SHA256 Credential={SHAPES['sigv4 credential']}/20261201/"
    f"us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature={SHAPES['sigv4 signature']} "
    f"aws_secret_access_key={SHAPES['aws secret']} X-Amz-Security-Token={SHAPES['aws session token']} "
    f"keys {SHAPES['anthropic']}, {SHAPES['openai project']}, {SHAPES['google']}, {SHAPES['groq']}, "
    f"{SHAPES['huggingface']}; azure api-key {SHAPES['azure hex']} "
    f'{{"password": "{SHAPES["json password"]}", "client_secret": "{SHAPES["json client secret"]}"}} '
    f"and then {SHAPES['bearer-like']} appeared; "
    f"DATABASE_URL=postgres://app:{SHAPES['connection url password']}@db.internal:5432/prod, "
    f"key pair AKIAZPLANTED0KEY0ID1 {SHAPES['aws secret unnamed']}"
)
