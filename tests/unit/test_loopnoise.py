"""Accept errors when out of descriptors: one line per 10 s for the whole process, whatever loop they come from."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

import pytest

from llmtap.loopnoise import AcceptErrors, install, is_accept_noise


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def emfile(sock: object = None) -> dict[str, object]:
    return {
        "message": "socket.accept() out of system resource",
        "exception": OSError(errno.EMFILE, "Too many open files"),
        "socket": sock,
    }


def test_one_line_per_interval_with_the_count_held_back(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    errors = AcceptErrors(10.0, clock)
    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]  # the proxy's and the admin server's
    try:
        other: list[dict[str, object]] = []
        for lp in loops:
            lp.set_exception_handler(lambda _lp, ctx: other.append(ctx))  # mitmproxy's, say
            install(lp, errors)
        with caplog.at_level(logging.ERROR, "llmtap.limits"):
            for i in range(1000):  # asyncio logs one per connection waiting in the backlog
                loops[i % 2].call_exception_handler(emfile())
                clock.t += 0.005
            clock.t += 10.0
            loops[0].call_exception_handler(emfile())
        lines = [r.getMessage() for r in caplog.records if r.name == "llmtap.limits"]
        assert len(lines) == 2 and "Too many open files" in lines[0]
        assert "999 more like it held back" in lines[1]
        loops[0].call_exception_handler({"message": "something else", "exception": RuntimeError("x")})
        assert [c["message"] for c in other] == ["something else"]  # the rest reaches the handler that was there
    finally:
        for lp in loops:
            lp.close()


def test_what_counts_as_accept_noise() -> None:
    assert is_accept_noise(emfile())
    assert is_accept_noise({"message": "Exception in callback", "exception": OSError(errno.ENFILE, "x")})
    retry = "<TimerHandle BaseSelectorEventLoop._start_serving(<function>, <socket>)>"
    assert is_accept_noise({"message": "Exception in callback", "exception": ValueError("Invalid file descriptor: -1"),
                            "handle": retry})  # fmt: skip
    assert not is_accept_noise({"message": "Task exception was never retrieved", "exception": ValueError("bug")})
    assert not is_accept_noise({"message": "x", "exception": ConnectionResetError(errno.ECONNRESET, "reset")})


def test_a_real_listener_out_of_descriptors_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio's own accept loop, with accept() failing as it does at the descriptor limit."""
    errors = AcceptErrors(10.0, Clock())

    class Exhausted(socket.socket):
        def accept(self) -> tuple[socket.socket, object]:
            raise OSError(errno.EMFILE, "Too many open files")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        install(loop, errors)
        lsock = Exhausted(socket.AF_INET, socket.SOCK_STREAM)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(512)
        lsock.setblocking(False)
        server = await asyncio.start_server(lambda r, w: None, sock=lsock, backlog=512)
        clients = [socket.create_connection(lsock.getsockname()) for _ in range(20)]
        await asyncio.sleep(0.3)
        server.close()
        for c in clients:
            c.close()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    assert [r.name for r in caplog.records if r.levelno >= logging.ERROR] == ["llmtap.limits"]
    assert errors.held > 10
