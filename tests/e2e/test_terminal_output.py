"""Issue #26: ESC, BEL, NUL … from stored values (attribution headers, model names) reached the operator's terminal
through ``llmtap sql`` and ``llmtap report``; rich markup in a value (``[link=…]``) became a live hyperlink.

The commands run on a real pseudo-terminal (output post-processing off, so every byte seen is one the command
wrote) against a sidecar that recorded a call whose model and attribution carry terminal control sequences.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from collections.abc import Iterator

import pytest
from helpers import LLMTAP, Mock, Sidecar, openai_client, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# an OSC 8 hyperlink, a screen clear, a title change, BEL, NUL, CR, a C1 CSI, a bidi override, rich markup
HOSTILE = (
    "gpt-4o-mini\x1b]8;;https://evil.example/login\x07Reset\x1b]8;;\x07\x1b[2J\x1b]0;pwned\x07\x00\r"
    "\u009b31m\u202e[link=https://evil.example]x[/link]"
)
RAW = [b"\x1b]8;;", b"\x1b[2J", b"\x07", b"\x00", b"\r", b"\xc2\x9b", b"\xe2\x80\xae"]


@pytest.fixture(scope="module")
def recorded(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sidecar, str]]:
    sc = start_sidecar(tmp_path_factory.mktemp("tty") / "data", mock)
    sid = session_id()
    openai_client(sc).chat.completions.create(
        model=HOSTILE,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-llmtap-session": sid, "x-llmtap-feature": "feat\x1b[31mred"},
    )
    sc.row(sid)
    yield sc, sid
    stop(sc.proc)


def on_tty(*args: str) -> bytes:
    """``llmtap ARGS`` with stdout on a 250-column pseudo-terminal; the bytes it wrote there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # no \n → \r\n: what arrives is what was written
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_") and k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([*LLMTAP, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else b""
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return out


def test_sql_on_a_terminal_shows_control_characters_escaped(recorded: tuple[Sidecar, str]) -> None:
    sc, sid = recorded
    q = f"SELECT request_model, feature FROM llm_calls WHERE session_id = '{sid}'"
    route = ["--admin", f"127.0.0.1:{sc.admin}", "--admin-token", sc.token]
    for fmt in ([], ["--format", "TSV"], ["--format", "CSV"], ["--format", "Vertical"]):
        out = on_tty("sql", q, *route, *fmt)
        assert b"gpt-4o-mini" in out and b"\\x1b]8;;https://evil.example/login" in out, out
        assert not [r for r in RAW if r in out], (fmt, out)
        assert b"\x1b" not in out  # the engine styles nothing: any ESC would be the value's


def test_sql_piped_keeps_the_engine_bytes(recorded: tuple[Sidecar, str]) -> None:
    """Not a terminal: the output is data, written as the engine wrote it."""
    sc, sid = recorded
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    r = subprocess.run(
        [*LLMTAP, "sql", f"SELECT feature FROM llm_calls WHERE session_id = '{sid}'", "--format", "CSV",
         "--admin", f"127.0.0.1:{sc.admin}", "--admin-token", sc.token],
        capture_output=True, timeout=60, env=env,
    )  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == b'"feat\x1b[31mred"', r.stdout


def test_report_on_a_terminal_shows_control_characters_and_markup_as_text(recorded: tuple[Sidecar, str]) -> None:
    sc, _ = recorded
    out = on_tty("report", "--admin", f"127.0.0.1:{sc.admin}", "--admin-token", sc.token)
    assert b"gpt-4o-mini" in out, out
    assert b"\\x1b]8;;https://evil.example/login" in out and b"[link=https://evil.example]x[/link]" in out, out
    assert not [r for r in RAW if r in out], out
    assert b"\x1b]8;;https://evil" not in out and b"\x1b]0;" not in out  # no live link, no title change
