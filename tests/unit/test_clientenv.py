"""What `llmtap exec` gives a client: the proxy with the service as its user, the CA everywhere."""

from __future__ import annotations

from pathlib import Path

from llmtap.clientenv import CA_VARIABLES, PROXY_VARIABLES, Node, exec_env, proxy_url


def test_proxy_url_carries_the_service_with_a_placeholder_password() -> None:
    assert proxy_url("127.0.0.1", 8080, "checkout") == "http://checkout:x@127.0.0.1:8080"
    assert proxy_url("127.0.0.1", 8080, "a b/c@d", "p:w") == "http://a%20b%2Fc%40d:p%3Aw@127.0.0.1:8080"
    assert proxy_url("::1", 8080) == "http://[::1]:8080"


def test_exec_env() -> None:
    new_node = Node("24.1.0", env_proxy=True)
    env = exec_env(
        "http://s:x@127.0.0.1:8080", Path("/d/ca-bundle.pem"), {"NO_PROXY": "internal.corp,localhost"}, new_node
    )
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


def test_exec_env_preloads_for_an_old_node_keeping_node_options() -> None:
    env = exec_env(
        "http://127.0.0.1:8080", Path("/b.pem"), {"NODE_OPTIONS": "--max-old-space-size=512"}, Node("20.1.0", False)
    )
    assert env["NODE_OPTIONS"].startswith("--max-old-space-size=512 --require ")
    assert "NODE_OPTIONS" not in exec_env("http://127.0.0.1:8080", Path("/b.pem"), {}, Node("24.1.0", True))
