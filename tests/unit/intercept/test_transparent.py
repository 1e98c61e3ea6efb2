"""Transparent and local mode in the worker: how a redirected call is named, and the redirector's exit."""

from __future__ import annotations

import logging

from llmtap.intercept.redirector import LOGGER, watch
from llmtap.intercept.routing import call_host


def test_a_redirected_call_is_named_by_its_tls_server_name() -> None:
    # transparent/local: the request's host is the original destination's address; the name is the SNI
    assert call_host("transparent", "10.0.0.1", "API.openai.com", "api.openai.com") == "api.openai.com"
    assert call_host("transparent", "10.0.0.1", None, "api.openai.com:80") == "api.openai.com"  # plain HTTP
    assert call_host("local", "10.0.0.1", None, None) == "10.0.0.1"
    assert call_host("regular", "api.openai.com", "other.example", "x") == "api.openai.com"  # the CONNECT host


# What mitmproxy logged, line by line, when this machine's kernel refused the redirector (kernel 6.18, 2026-12).
REFUSED = [
    "[aya::bpf] object BTF couldn't be loaded in the kernel: the BPF_BTF_LOAD syscall returned Invalid argument",
    "Error: eBPF initialization failed",
    "",
    "Caused by:",
    "    0: failed to attach cgroup_sock_create program",
    "    1: `bpf_link_create` failed",
    "    2: Bad file descriptor (os error 9)",
    "",
    "Stack backtrace:",
    "   0: <unknown>",
    "[linux-redirector] exited: Ok(ExitStatus(unix_wait_status(256)))",
]


def test_the_redirectors_exit_is_one_line_with_its_reason() -> None:
    said: list[str] = []
    handler = watch(said.append)
    try:
        log = logging.getLogger(LOGGER)
        for line in REFUSED[:-1]:
            log.warning(line)
        assert said == []  # its complaints alone stop nothing: only its exit does
        log.error(REFUSED[-1])
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    assert said == [handler.reason]
    assert handler.reason.startswith(
        "--mode local: mitmproxy's redirector stopped (eBPF initialization failed: failed to attach "
        "cgroup_sock_create program: `bpf_link_create` failed: Bad file descriptor (os error 9))"
    )
    assert "\n" not in handler.reason and "--mode transparent" in handler.reason


def test_the_proxy_listener_is_never_a_destination() -> None:
    # In transparent mode a connection that reached the port unredirected has the listener itself as its
    # original destination: proxying it would connect back to llmtap, again and again.
    from llmtap.intercept.limits import ConnectionLimits, LimitsConfig

    limits = ConnectionLimits(LimitsConfig(listen=("0.0.0.0", 15001), intercept=["127.0.0.1:15001"]))
    assert "its own proxy listener" in limits._refusal("10.1.2.3", 15001, ["10.1.2.3"])
    assert "its own proxy listener" in limits._refusal("127.0.0.1", 15001, ["127.0.0.1"])  # even --intercept'ed
    assert limits._refusal("10.1.2.3", 443, ["10.1.2.3"]) == ""
