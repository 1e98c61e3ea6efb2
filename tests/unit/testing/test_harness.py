"""The harness's ports: chosen where no outgoing connection takes them, and chosen again when another process bound
one first (a parallel suite lost a sidecar start to "the address is already in use")."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from llmtap.testing import harness

pytestmark = pytest.mark.e2e  # starts a sidecar: with the e2e suite


def test_free_ports_are_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [harness.free_port() for _ in range(50)]
    assert all(1024 <= p < low for p in ports), ports
    assert len(set(ports)) > 40  # drawn, not a sequence two workers would share


def test_a_port_taken_before_the_sidecar_binds_it_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = socket.create_server(("127.0.0.1", 0))  # another process got there first
    taken = held.getsockname()[1]
    picks = iter([taken, harness.free_port()])
    real = harness.free_port
    monkeypatch.setattr(harness, "free_port", lambda: next(picks, None) or real())
    try:
        sc = harness.start_sidecar(tmp_path / "data", None)
    finally:
        held.close()
    try:
        assert sc.listen != taken and sc.proc.poll() is None
        assert harness.Sidecar.admin_request(sc, "GET", "/healthz")[0] == 200
    finally:
        harness.stop(sc.proc)
