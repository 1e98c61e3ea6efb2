"""The mock's hostile WebSocket (``x-mock-scenario: ws_hostile`` on the upgrade): issue #26's bombs.

Speaks Responses WebSocket mode with permessage-deflate (when offered, the compression context
carrying over between messages) but reads and writes raw frames: a library would inflate a bomb
whole. Client messages are read with llmtap's bounded reader (a hostile one is counted as
``n_unparsed``, never held); a ``response.create`` is answered with the events of the SSE form, and
``metadata.mock_hostile: "KIND:MIB"`` (KIND ``deflate``, ``fragments`` or ``frame``) puts that
hostile message right after ``response.created``. A hash of every byte received and sent after the
handshake is logged (``hostile`` in ``GET /_mock/ws``), to compare with what the client saw.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, cast

import wsproto
from wsproto.events import AcceptConnection, Request
from wsproto.extensions import PerMessageDeflate

from ...decode.wsframes import Closed, Message, Unparsed
from ..rawws import FrameWriter, HostileKind, drain, reader
from .responses import openai_responses
from .websocket import Socket
from .ws_responses import _events


async def run(
    ws: wsproto.WSConnection,
    request: Request,
    reader_: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    sock: Socket,
) -> None:
    deflate = any(str(e).startswith(PerMessageDeflate.name) for e in request.extensions)
    writer.write(ws.send(AcceptConnection(extensions=[PerMessageDeflate()] if deflate else [])))
    await writer.drain()
    out, inp = FrameWriter(masked=False, deflate=deflate), reader(deflate)
    got, sent = hashlib.sha256(), hashlib.sha256()
    sock.hostile.update({"deflate": deflate, "bytes_received": 0, "bytes_sent": 0})

    async def write(piece: bytes) -> None:
        sent.update(piece)
        sock.hostile["bytes_sent"] += len(piece)
        writer.write(piece)
        await writer.drain()

    try:
        while True:
            data = await reader_.read(1 << 18)
            if not data:
                sock.closed = sock.closed or "eof"
                return
            got.update(data)
            sock.hostile["bytes_received"] += len(data)
            inp.feed(data)
            for ev in drain(inp):
                if isinstance(ev, Unparsed):
                    sock.counts["n_unparsed"] = sock.counts.get("n_unparsed", 0) + 1
                elif isinstance(ev, Message) and ev.text:
                    sock.received.append(ev.payload.decode())
                    sock.counts["n_received"] += 1
                    await _answer(json.loads(ev.payload), out, write, sock)
                elif isinstance(ev, Closed):
                    sock.closed = "client"
                    await write(out.close(ev.code or 1000))
                    return
    except (ConnectionError, ValueError):
        return
    finally:
        sock.hostile.update({"received_sha256": got.hexdigest(), "sent_sha256": sent.hexdigest()})
        writer.close()


async def _answer(obj: Any, out: FrameWriter, write: Any, sock: Socket) -> None:
    if not isinstance(obj, dict) or obj.get("type") != "response.create":
        return
    meta = obj.get("metadata")
    hostile = str(meta.get("mock_hostile") or "") if isinstance(meta, dict) else ""
    for i, event in enumerate(_events(openai_responses({**obj, "stream": True}, "default").chunks)):
        text = json.dumps(event, separators=(",", ":"))
        await write(out.text(text))
        sock.sent.append(text)
        sock.counts["n_sent"] += 1
        if i == 0 and hostile:
            kind, _, mib = hostile.partition(":")
            for piece in out.hostile(cast(HostileKind, kind), int(mib)):
                await write(piece)
