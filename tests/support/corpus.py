"""Replay a recorded real provider response (tests/corpus, see PROVENANCE.md) through the capture.

The recording's bytes go through the capture exactly as the proxy's tee hands them over
(:mod:`llmtap.testing.builders`), cut where the provider's frames end (or at any other points),
and the worker makes the row. Tests assert that row against values read off the recording by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtap.record import CallRecord
from llmtap.testing import builders
from llmtap.testing.mock import replay

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


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
    pieces = replay.frames(rec) if cuts is None else builders.split(rec.body, cuts)
    body = rec.request if rec.request is not None else b""
    record = builders.record(
        path, body, rec.status, rec.headers, pieces,
        host=host, request_headers=request_headers, after=0.001, end=end_kind,  # type: ignore[arg-type]
    )  # fmt: skip
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
