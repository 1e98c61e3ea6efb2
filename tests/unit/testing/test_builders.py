"""The shipped test builders: a sample record that sets every column, a capture driven from bytes."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from llmtap.record import NOT_COLUMNS, CallRecord
from llmtap.testing import builders


def _defaults() -> dict[str, object]:
    return {
        f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        for f in dataclasses.fields(CallRecord)
        if f.name not in NOT_COLUMNS
    }


def _values(kind: object) -> set[object]:
    return {v for a in typing.get_args(kind) for v in (typing.get_args(a) or (a,))}


def test_a_made_up_value_is_never_the_default_and_always_of_the_columns_type() -> None:
    """What a column the sample does not name yet gets (a new column is covered without editing it)."""
    hints = typing.get_type_hints(CallRecord)
    made = {}
    for n, (name, default) in enumerate(_defaults().items()):
        value = builders.made_up(name, hints[name], default, n)
        assert value != default, name
        args = typing.get_args(hints[name])
        literal = typing.get_origin(hints[name]) is typing.Literal or bool(
            args and all(typing.get_origin(a) is typing.Literal for a in args)
        )
        if literal:
            assert value in _values(hints[name]), (name, value)
        made[name] = value
    CallRecord(**made)  # type: ignore[arg-type]


def test_the_sample_sets_every_column() -> None:
    r = builders.sample_record()
    kept = {n for n, d in _defaults().items() if getattr(r, n) == d}
    assert kept == {"finish_reason_raw", "server_port"}  # the sample's own choice ('' raw reason, port 443)
    assert builders.sample_record(span_id="x").span_id == "x"


@pytest.mark.parametrize("cuts", [None, [], [3], [0, 5, 5, 10_000]])
def test_split_gives_the_bytes_back_whole(cuts: list[int] | None) -> None:
    data = b"data: one\n\ndata: two\n\n"
    assert b"".join(builders.split(data, cuts)) == data


def test_a_capture_from_bytes_is_routed_and_timed_like_the_proxys() -> None:
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    cap = builders.capture(path, {}, host="generativelanguage.googleapis.com")
    assert (cap.facts.provider, cap.facts.api, cap.adapter.req.model) == (
        "gcp.gemini",
        "gemini.generate_content",
        "gemini-2.5-flash",  # from the path, as the addon takes it
    )
    builders.respond(cap, 200, [("content-type", "application/json")], [b'{"candidates": []}'], after=0.25)
    assert cap.headers_mono == pytest.approx(cap.facts.start_mono + 0.25)
    r, _ = builders.finish(cap)
    assert (r.status_code, r.response_bytes, r.ttfb_ms) == (200, 18, pytest.approx(250.0))
