"""What `llmtap exec` gives a client: the proxy with the service as its user, the CA everywhere."""

from __future__ import annotations

from pathlib import Path

from llmtap.clientenv import CA_VARIABLES, PROXY_VARIABLES, client_env, proxy_url


def test_proxy_url_carries_the_service_with_a_placeholder_password() -> None:
    assert proxy_url("127.0.0.1", 8080, "checkout") == "http://checkout:x@127.0.0.1:8080"
    assert proxy_url("127.0.0.1", 8080, "a b/c@d", "p:w") == "http://a%20b%2Fc%40d:p%3Aw@127.0.0.1:8080"
    assert proxy_url("::1", 8080) == "http://[::1]:8080"


def test_client_env() -> None:
    env = client_env("http://s:x@127.0.0.1:8080", Path("/d/ca-bundle.pem"), {"NO_PROXY": "internal.corp,localhost"})
    assert all(env[n] == "http://s:x@127.0.0.1:8080" for n in PROXY_VARIABLES)
    assert all(env[n] == "/d/ca-bundle.pem" for n in CA_VARIABLES)
    assert set(CA_VARIABLES) == {
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "AWS_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    }
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert env["NO_PROXY"] == env["no_proxy"] == "internal.corp,localhost,127.0.0.1,::1"
