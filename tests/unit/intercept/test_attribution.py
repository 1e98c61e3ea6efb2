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


def test_session_fallbacks_in_the_contract_order_and_helicone_user() -> None:
    from llmtap.intercept.attribution import FOREIGN_SESSION_HEADERS

    headers = [(h, f"v-{h}") for h in reversed(FOREIGN_SESSION_HEADERS)]  # every one present, order scrambled
    for expected in FOREIGN_SESSION_HEADERS:
        assert read_attribution(headers)["session_id"] == f"v-{expected}"
        headers = [(k, v) for k, v in headers if k != expected]
    assert FOREIGN_SESSION_HEADERS[:4] == (
        "x-claude-code-session-id",
        "helicone-session-id",
        "x-session-id",
        "langfuse-session-id",
    )
    assert read_attribution([("helicone-user-id", "hu")]) == {"user_id": "hu"}
    assert read_attribution([("helicone-user-id", "hu"), ("x-llmtap-user", "mine")])["user_id"] == "mine"


def test_proxy_user_from_proxy_authorization() -> None:
    import base64

    from llmtap.intercept.attribution import proxy_user

    def basic(s: bytes) -> str:
        return "Basic " + base64.b64encode(s).decode()

    assert proxy_user(basic(b"checkout-api:x")) == ("checkout-api", "x")
    assert proxy_user(basic(b"a%20b%2Fc:x")) == ("a b/c", "x")  # a client that sent it still encoded
    assert proxy_user(basic(b"only-user")) == ("only-user", "")
    assert proxy_user(basic(b"bad\x07name:x"))[0] == "badname"
    assert proxy_user("Bearer abc") == ("", "") and proxy_user("Basic !!") == ("", "") and proxy_user("") == ("", "")
