"""Replay a recorded real provider response (tests/corpus, see PROVENANCE.md) through the capture.

The recording's bytes go through :class:`llmtap.capture.Capture` exactly as the proxy's tee
hands them over, cut where the provider's frames end (or at any other points), and
:func:`llmtap.capture.build` makes the row. Tests assert that row against values read off the
recording by hand.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from llmtap.adapters import route
from llmtap.capture import Capture, End, RequestFacts, build
from llmtap.capture.estimate import TokenEstimator
from llmtap.record import CallRecord
from llmtap.testing.mock import replay

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
OFFLINE = TokenEstimator(loader=lambda name: (_ for _ in ()).throw(OSError("offline")))


def recording(name: str) -> replay.Recording:
    return replay.load(CORPUS, name)


def names() -> list[str]:
    """Every recording in the corpus, as ``<provider>/<name>.<ext>``."""
    return sorted(
        str(p.relative_to(CORPUS))
        for p in CORPUS.glob("*/*")
        if p.suffix != ".json" or not p.name.endswith(".meta.json")
    )


def replay_row(
    name: str,
    *,
    host: str | None = None,
    path: str | None = None,
    request_headers: tuple[str, ...] = (),
    cuts: list[int] | None = None,
    end_kind: str = "complete",
) -> CallRecord:
    """The row llmtap makes of recording ``name`` (optionally served on another host or path)."""
    rec = recording(name)
    host = host or rec.host
    path = path or rec.path
    match = route("POST", host, path, frozenset(request_headers))
    assert match is not None, f"{host}{path} is not routed"
    raw_body = json.dumps(rec.request).encode() if rec.request is not None else b""
    now = time.monotonic()
    facts = RequestFacts(
        method="POST",
        host=host,
        port=443,
        path=path,
        headers=[],
        body=raw_body,
        start_wall=time.time(),
        start_mono=now,
        provider=match.provider,
        api=match.api,
        trace_id="a" * 32,
        span_id="b" * 16,
    )
    cap = Capture(facts, match.adapter())
    if match.model and not cap.adapter.req.model:
        cap.adapter.req.model = match.model
    cap.on_response_headers(rec.status, list(rec.headers), now + 0.001)
    if cuts is None:
        pieces = replay.frames(rec)
    else:
        data = rec.body
        points = sorted({c % (len(data) + 1) for c in cuts})
        pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    for piece in pieces:
        assert cap.tee(piece) == piece
    cap.tee(b"")
    record, _ = build(cap, End(end_kind, time.monotonic()), OFFLINE)  # type: ignore[arg-type]
    assert not record.parse_error, record.parse_error
    return record


def fields(r: CallRecord, *names: str) -> dict[str, Any]:
    return {n: getattr(r, n) for n in names}


def check(name: str, expected: dict[str, Any], **kw: Any) -> CallRecord:
    """Replay ``name`` and assert each expected field (all mismatches reported at once)."""
    r = replay_row(name, **kw)
    got = fields(r, *expected)
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
    assert not wrong, f"{name}: field: (got, expected) {wrong}"
    return r
