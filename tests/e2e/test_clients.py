"""docs/clients.md's recipes for Java, Go, curl and NO_PROXY, run as written against a real ``llmtap run``.

Java: ``java.net.http.HttpClient`` with the JVM flags and the truststore docs/clients.md builds with
keytool (Java 11+ runs a one-file program from its source). Go: ``net/http`` with ``HTTPS_PROXY`` and
``SSL_CERT_FILE`` (skipped when Go is not installed: ``apt-get install golang-go``). curl: the variables
``llmtap env`` prints. Each call must appear as its row.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import LLMTAP, Sidecar, session_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
BODY = (
    '{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},'
    '"messages":[{"role":"user","content":"hi"}]}'
)

JAVA = """
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Chat {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();  // the default ProxySelector: -Dhttps.proxyHost/Port
        HttpRequest req = HttpRequest.newBuilder(URI.create("https://api.openai.com/v1/chat/completions"))
            .header("Authorization", "Bearer sk-java")
            .header("Content-Type", "application/json")
            .header("x-llmtap-session", args[0])
            .POST(HttpRequest.BodyPublishers.ofString(args[1]))
            .build();
        HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
        System.out.println(resp.statusCode() + " " + resp.body().contains("[DONE]"));
    }
}
"""

GO = """
package main

import (
\t"fmt"
\t"io"
\t"net/http"
\t"os"
\t"strings"
)

func main() {
\treq, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(os.Args[2]))
\treq.Header.Set("Authorization", "Bearer sk-go")
\treq.Header.Set("Content-Type", "application/json")
\treq.Header.Set("x-llmtap-session", os.Args[1])
\tresp, err := http.DefaultClient.Do(req) // ProxyFromEnvironment: HTTPS_PROXY; roots: SSL_CERT_FILE
\tif err != nil {
\t\tfmt.Println(err)
\t\tos.Exit(1)
\t}
\tb, _ := io.ReadAll(resp.Body)
\tfmt.Println(resp.StatusCode, strings.Contains(string(b), "[DONE]"))
}
"""


def env_of(sc: Sidecar) -> dict[str, str]:
    """The environment ``eval "$(llmtap env)"`` gives a shell (parsed from its output)."""
    base = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY") and not k.startswith("LLMTAP_")}
    printed = f"{' '.join(LLMTAP)} env --data-dir {sc.data_dir} --listen 127.0.0.1:{sc.listen}"
    r = subprocess.run(
        ["sh", "-c", f'eval "$({printed})" && env'],
        capture_output=True,
        text=True,
        timeout=60,
        env=base,
    )
    assert r.returncode == 0, r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


@pytest.mark.skipif(not (shutil.which("java") and shutil.which("keytool")), reason="needs a JDK (java, keytool)")
def test_java_httpclient_with_the_documented_truststore_and_flags(sidecar: Sidecar, tmp_path: Path) -> None:
    java_home = Path(os.path.realpath(shutil.which("java") or "")).parents[1]
    store = tmp_path / "java-truststore.p12"
    ca = sidecar.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    for cmd in (  # docs/clients.md, "Java"
        ["keytool", "-importkeystore", "-noprompt", "-srckeystore", str(java_home / "lib/security/cacerts"),
         "-srcstorepass", "changeit", "-destkeystore", str(store), "-deststoretype", "PKCS12",
         "-deststorepass", "changeit"],
        ["keytool", "-importcert", "-noprompt", "-alias", "llmtap", "-file", str(ca), "-keystore", str(store),
         "-storepass", "changeit"],
    ):  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "Chat.java").write_text(JAVA)
    sid = session_id()
    opts = (
        f"-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={sidecar.listen} -Dhttp.nonProxyHosts=localhost|127.0.0.1 "
        f"-Djavax.net.ssl.trustStore={store} -Djavax.net.ssl.trustStorePassword=changeit"
    )
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    r = subprocess.run(
        ["java", "Chat.java", sid, BODY],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**env, "JAVA_TOOL_OPTIONS": opts},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "200 true"
    row = sidecar.row(sid, timeout=15)
    assert (row["api"], row["outcome"], row["usage_source"]) == ("openai.chat_completions", "ok", "provider")


@pytest.mark.skipif(not shutil.which("go"), reason="Go is not installed (apt-get install golang-go)")
def test_go_net_http_with_https_proxy_and_ssl_cert_file(sidecar: Sidecar, tmp_path: Path) -> None:
    (tmp_path / "main.go").write_text(GO)
    env = env_of(sidecar)
    env.update(GOCACHE=str(tmp_path / "gocache"), GOPATH=str(tmp_path / "gopath"), HOME=str(tmp_path))
    sid = session_id()
    r = subprocess.run(["go", "run", "main.go", sid, BODY], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                       env=env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "200 true"
    assert sidecar.row(sid, timeout=15)["outcome"] == "ok"


def test_curl_with_what_llmtap_env_prints(sidecar: Sidecar) -> None:
    env = env_of(sidecar)
    assert env["CURL_CA_BUNDLE"] == str(sidecar.bundle)
    sid = session_id()
    r = subprocess.run(
        ["curl", "-sS", "--fail", "https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer sk-curl",
         "-H", "Content-Type: application/json", "-H", f"x-llmtap-session: {sid}", "-d", BODY],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert r.returncode == 0 and "[DONE]" in r.stdout, r.stderr
    row = sidecar.row(sid, timeout=15)
    assert row["outcome"] == "ok" and row["client_name"] in ("curl", "")  # client attribution where it exists


def test_no_proxy_that_names_a_provider_host_bypasses_the_sidecar(sidecar: Sidecar) -> None:
    """docs/clients.md: NO_PROXY must not list the providers (nor a suffix of them): those calls go direct."""
    env = {**env_of(sidecar), "NO_PROXY": ".openai.com,localhost"}
    sid = session_id()
    subprocess.run(
        ["curl", "-sS", "-m", "5", "https://api.openai.com/v1/chat/completions", "-H", f"x-llmtap-session: {sid}",
         "-d", BODY],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert sidecar.rows(f"session_id = '{sid}'", 1, timeout=3) == []
    env["NO_PROXY"] = "localhost,127.0.0.1,.internal.example"  # the recommended form: the sidecar still sees it
    r = subprocess.run(
        ["curl", "-sS", "--fail", "https://api.openai.com/v1/chat/completions", "-H", f"x-llmtap-session: {sid}",
         "-H", "Authorization: Bearer sk-curl", "-H", "Content-Type: application/json", "-d", BODY],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sidecar.row(sid, timeout=15)["outcome"] == "ok"
