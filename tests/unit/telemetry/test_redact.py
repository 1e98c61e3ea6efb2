"""Redaction of secrets from what llmtap keeps."""

from __future__ import annotations

import pytest

from llmtap.telemetry.redact import redact


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Incorrect API key provided: sk-proj-abc123def456ghi789", "sk-proj-abc123def456ghi789"),
        ("key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA here", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
        ("password=hunter22secret", "hunter22secret"),
        ("contact jane.doe@example.org now", "jane.doe@example.org"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_redaction(text: str, gone: str) -> None:
    out = redact(text)
    assert gone not in out and ("[REDACTED]" in out or "[EMAIL]" in out)


from secrets_corpus import SHAPES, TEXT  # noqa: E402


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_secret_shape_is_redacted_in_free_text(shape: str) -> None:
    out = redact(TEXT)
    assert SHAPES[shape] not in out, shape
    assert SHAPES[shape][4:20] not in out, shape  # nor a recognizable piece of it


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000.",
        "accounts/fireworks/models/llama-v3p1-405b-instruct",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "The model `gpt-4o-mini-2024-07-18` does not exist or you do not have access to it.",
        "max_tokens: 4096 exceeds the limit of 1024 for this token type",
    ],
)
def test_ordinary_provider_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_records_and_log_lines_are_redacted() -> None:
    import logging

    from llmtap.record import CallRecord
    from llmtap.telemetry.redact import RedactingFilter, redact_record

    r = CallRecord(error_message=TEXT, error_code=SHAPES["openai project"], user_id=SHAPES["anthropic"])
    r.request_model = "gpt-4o"
    r.parse_error = f"ValueError: {SHAPES['groq']}"
    redact_record(r)
    dump = repr(r)
    assert not any(v in dump for v in SHAPES.values())
    assert r.request_model == "gpt-4o"
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "upstream said %s", (TEXT,), None)
    RedactingFilter().filter(rec)
    assert not any(v in rec.getMessage() for v in SHAPES.values())


# Issue #26: --capture-content kept connection URLs with passwords and AWS secret access keys. One row per
# shape: (shape, text as it may appear, the secret, what must stay readable around it).
SHAPES_26 = [
    (
        "postgres url",
        "could not connect: postgres://app:Hunter2-pw@db.internal:5432/prod failed",
        "Hunter2-pw",
        "db.internal:5432/prod",
    ),
    (
        "postgresql url",
        "DATABASE_URL=postgresql://admin:s3cr3t%40pw@10.0.0.5/app?sslmode=require",
        "s3cr3t%40pw",
        "10.0.0.5/app",
    ),
    ("mysql url", "dsn mysql://root:rootpass123@mysql:3306/shop", "rootpass123", "mysql:3306/shop"),
    ("redis url, no user", "REDIS_URL: redis://:redispass99@cache:6379/0", "redispass99", "cache:6379/0"),
    ("rediss url", "rediss://default:AbCdEf123456@eu1-redis.upstash.io:6379", "AbCdEf123456", "upstash.io"),
    ("amqp url", "broker amqp://guest:rabbitpass@rabbit:5672/%2F down", "rabbitpass", "rabbit:5672"),
    (
        "mongodb+srv url",
        '{"uri": "mongodb+srv://svc:M0ng0Pass@cluster0.ab1cd.mongodb.net/test?retryWrites=true"}',
        "M0ng0Pass",
        "cluster0.ab1cd.mongodb.net",
    ),
    ("mongodb multi-host", "mongodb://admin:mpw4321@m1:27017,m2:27017/?replicaSet=rs0", "mpw4321", "m1:27017"),
    (
        "clickhouse url",
        "store clickhouses://llmtap:chpass-77@ch.example.com:8443/llmtap",
        "chpass-77",
        "ch.example.com",
    ),
    (
        "https basic in url",
        "git clone https://deploy:glpwd12345@gitlab.example.com/repo.git",
        "glpwd12345",
        "gitlab.example.com",
    ),
    ("jdbc password param", "jdbc:postgresql://db:5432/x?user=app&password=jdbcpass42", "jdbcpass42", "db:5432"),
    (
        "odbc connection string",
        "Server=tcp:sql.example.net,1433;Database=x;User ID=sa;Password=Odbc!Pass9;",
        "Odbc!Pass9",
        "sql.example.net",
    ),
    (
        "aws secret key unnamed",
        "creds AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "creds",
    ),
    (
        "aws secret key in json",
        '{"AccessKeyId": "ASIAXXXXXXXXXXXXXXXX", "SecretAccessKey": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}',
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        "AccessKeyId",
    ),
    (
        "aws secret key after colon",
        "secret: Z2V0IG91dCBvZiBoZXJlIHRoaXMgaXMgbm90IGEga2V5",
        "Z2V0IG91dCBvZiBoZXJlIHRoaXMgaXMgbm90IGEga2V5",
        "secret",
    ),
    (
        "azure storage account key",
        "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq",
        "AccountName=acct1",
    ),
    (
        "azure service bus key",
        "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abcDEF123ghiJKL456mnoPQR789stuVWX012yzA3B4c=",
        "abcDEF123ghiJKL456mnoPQR789stuVWX012yzA3B4c=",
        "ns1.servicebus.windows.net",
    ),
    (
        "azure sas signature",
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&se=2026-12-01T00:00:00Z&sig=AbC%2Fde1Fgh2Ijk3Lmn4Opq5Rst6Uvw7Xyz8%3D",
        "AbC%2Fde1Fgh2Ijk3Lmn4Opq5Rst6Uvw7Xyz8",
        "acct.blob.core.windows.net",
    ),
    (
        "azure ad client secret",
        "client credential Abc8Q~dEfGhIjKlMnOpQrStUvWxYz012345678-_ used",
        "Abc8Q~dEfGhIjKlMnOpQrStUvWxYz012345678-_",
        "client credential",
    ),
    (
        "gcp oauth client secret",
        "oauth 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 rejected",
        "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",
        "oauth",
    ),
    (
        "gcp access token",
        "token ya29.a0AfH6SMBx3Kj9LmNoPqRsTuVwXyZ01234567-abcdEFGH_ij expired",
        "ya29.a0AfH6SMBx3Kj9LmNoPqRsTuVwXyZ01234567-abcdEFGH_ij",
        "expired",
    ),
    (
        "gcp service account key id",
        '{"type": "service_account", "private_key_id": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"}',
        "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
        "service_account",
    ),
    (
        "digitalocean token",
        "DO dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef0123456789abcdef",
        "DO",
    ),
    ("alibaba access key", "aliyun LTAI5tQ9XyZaBcDeFgHiJkLm id", "LTAI5tQ9XyZaBcDeFgHiJkLm", "aliyun"),
    ("stripe secret key", "stripe sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "stripe"),
    (
        "slack webhook",
        "POST https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/abcdefGHIJKLmnopQRSTuvwx",
        "abcdefGHIJKLmnopQRSTuvwx",
        "hooks.slack.com",
    ),
    ("gitlab token", "glpat-AbCdEfGhIjKlMnOpQrSt used", "glpat-AbCdEfGhIjKlMnOpQrSt", "used"),
    (
        "npm token",
        "//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "registry.npmjs.org",
    ),
    (
        "hashicorp vault token",
        "VAULT hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "VAULT",
    ),
    (
        "sendgrid key",
        "SG.AbCdEfGhIjKlMnOpQrStUv.wXyZ0123456789AbCdEfGhIjKlMnOpQrStUvWxYz01234",
        "AbCdEfGhIjKlMnOpQrStUv",
        "",
    ),
    ("databricks token", "dapi0123456789abcdef0123456789abcdef", "dapi0123456789abcdef0123456789abcdef", ""),
    (
        "openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        "",
    ),
]


@pytest.mark.parametrize(("shape", "text", "secret", "kept"), SHAPES_26, ids=[c[0] for c in SHAPES_26])
def test_connection_urls_and_cloud_keys_are_redacted(shape: str, text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out and secret[:12] not in out, out
    assert kept in out and "[REDACTED]" in out, out
    assert redact(out) == out  # and a second pass changes nothing
