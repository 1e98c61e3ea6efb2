"""Attribution headers and credential fingerprints."""

from __future__ import annotations

from pathlib import Path

from llmtap.intercept.attribution import Fingerprinter, read_attribution


def test_fingerprints_are_keyed_and_stable(tmp_path: Path) -> None:
    fp = Fingerprinter.from_data_dir(tmp_path)
    assert (tmp_path / "install-secret").stat().st_mode & 0o777 == 0o600
    a = fp.api_key_id([("authorization", "Bearer sk-one")])
    assert a == fp.api_key_id([("x-api-key", "sk-one")]) == fp.api_key_id([], "key=sk-one&alt=sse")
    assert a != fp.api_key_id([("authorization", "Bearer sk-two")]) and "sk-one" not in a
    assert Fingerprinter(b"other-install").api_key_id([("x-api-key", "sk-one")]) != a
    sig = "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260101/us-east-1/bedrock/aws4_request, Signature=abc"
    assert fp.api_key_id([("authorization", sig)]) == fp.fingerprint("AKIAEXAMPLE")
    assert fp.api_key_id([]) == ""


def test_attribution_headers_and_foreign_session_headers() -> None:
    got = read_attribution([("x-llmtap-feature", "search"), ("helicone-session-id", "h1"), ("x-llmtap-user", "u")])
    assert got == {"feature": "search", "session_id": "h1", "user_id": "u"}
    assert read_attribution([("x-llmtap-session", "mine"), ("x-session-id", "theirs")])["session_id"] == "mine"
