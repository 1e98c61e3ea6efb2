"""The sidecar's own alerting on the real engine and the provisioned rules: quiet on steady data, firing once on
a regression (its pending period judged on the stored history), resolved once when it is gone, state kept across
restarts; deliveries retried with backoff until the webhook answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llmtap.admin.queries import RULES, AlertRule
from llmtap.alerts import STATE_FILE, Evaluator
from llmtap.alerts.evaluator import Event, Instance
from llmtap.alerts.notifier import AlertThread
from llmtap.store.embedded import ChdbBackend
from llmtap.testing import synthetic

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

# Each test owns a stretch of time far from every other test's data (the in-process store is shared).
BASE = 1_600_000_000.0


def seed(store: ChdbBackend, end: float, regression: synthetic.Regression | None = None) -> None:
    rows = list(synthetic.window_rows(1200, 7, regression=regression, end=end))
    store.insert_spans(rows, f"alerts-{end}")


def evaluator(store: ChdbBackend, tmp_path: Path, end: float) -> Evaluator:
    return Evaluator(store.query, tmp_path / STATE_FILE, started=end - 86400)


def test_quiet_data_fires_nothing(inproc_store: ChdbBackend, tmp_path: Path) -> None:
    end = BASE
    seed(inproc_store, end)
    ev = evaluator(inproc_store, tmp_path, end)
    assert ev.evaluate(end + 30) == []
    assert ev.evaluate(end + 90) == []
    assert not ev.state.instances and not ev.state.outbox


def test_a_regression_that_held_fires_at_once_and_resolves_once(inproc_store: ChdbBackend, tmp_path: Path) -> None:
    end = BASE + 30 * 86400
    seed(inproc_store, end, synthetic.Regression("summarize", 3.0))
    ev = evaluator(inproc_store, tmp_path, end)
    events = ev.evaluate(end + 30)
    fired = {(e.rule, e.labels.get("feature")) for e in events}
    assert events and all(e.status == "firing" for e in events)
    assert ("llmtap-cost-per-call-regression", "summarize") in fired
    assert {f for _, f in fired} == {"summarize"}  # nothing else is off
    e = next(e for e in events if e.rule == "llmtap-cost-per-call-regression")
    assert e.value is not None and 2.5 < e.value < 3.5 and e.baseline is not None and e.baseline > 0
    body = e.payload()
    assert set(body) >= {"text", "alert", "labels", "value", "baseline"}
    assert body["text"].startswith("[FIRING] LLM cost per call regression") and "summarize" in body["text"]
    assert ev.evaluate(end + 90) == []  # still firing: no second notification
    # a restart keeps the state: no repeat
    again = evaluator(inproc_store, tmp_path, end)
    assert again.evaluate(end + 150) == []
    # two hours later the window holds no regression any more: resolved, once
    resolved = again.evaluate(end + 2 * 3600)
    assert resolved and {e.status for e in resolved} == {"resolved"}
    assert {(e.rule, e.labels.get("feature")) for e in resolved} == fired
    assert again.evaluate(end + 2 * 3600 + 60) == []
    assert len(again.state.outbox) == len(events) + len(resolved)  # nothing delivered yet: all still queued


def test_a_fresh_regression_is_pending_until_it_has_held(inproc_store: ChdbBackend, tmp_path: Path) -> None:
    end = BASE + 60 * 86400
    seed(inproc_store, end, synthetic.Regression("summarize", 20.0, window_s=180))
    ev = evaluator(inproc_store, tmp_path, end)
    assert ev.evaluate(end) == []
    pending = [i for i in ev.state.instances.values() if i.rule == "llmtap-cost-per-call-regression"]
    assert pending and all(i.state == "pending" for i in pending)
    assert all(end - 200 < i.since < end for i in pending)  # it started within the last 3 minutes
    assert not [e for e in ev.evaluate(end + 300) if e.rule == "llmtap-cost-per-call-regression"]
    fired = [e for e in ev.evaluate(end + 560) if e.rule == "llmtap-cost-per-call-regression"]
    assert fired and fired[0].status == "firing"


def test_capture_dropped_waits_for_the_sidecar_to_have_been_up(inproc_store: ChdbBackend, tmp_path: Path) -> None:
    end = BASE + 90 * 86400
    rows = [r for r in synthetic.window_rows(1200, 7, end=end) if float(str(r["Timestamp"])) < end - 86400]
    inproc_store.insert_spans(rows, f"alerts-dropped-{end}")  # the usual traffic, except in the last hour
    rule = next(r for r in RULES if r.uid == "llmtap-capture-dropped")
    young = Evaluator(inproc_store.query, tmp_path / "a.json", rules=[rule], started=end - 600)
    assert young.evaluate(end) == []
    old = Evaluator(inproc_store.query, tmp_path / "b.json", rules=[rule], started=end - 7200)
    events = old.evaluate(end)
    assert events and events[0].labels.keys() == {"service"} and events[0].value == 0


# -- delivery -----------------------------------------------------------------------------------------------------


class Receiver:
    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail = fail_first
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code = 500 if outer.fail > 0 else 200
                outer.fail -= 1
                if code == 200:
                    outer.bodies.append(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail_first=2)
    yield r
    r.close()


def _event(status: str, n: int) -> Event:
    return Event(status, "llmtap-error-rate", "LLM error rate", {"model": f"m{n}"}, 0.5, 0.01, 0.05, "s", 0.0)


def test_deliveries_are_retried_with_backoff_in_order(receiver: Receiver, tmp_path: Path) -> None:
    now = [1_000_000.0]  # the retry clock, moved by the test
    t = AlertThread(lambda sql, fmt: b"{}", tmp_path, receiver.url, 60, clock=lambda: now[0])
    t.evaluator.state.outbox += [_event("firing", 1), _event("resolved", 1)]
    t._deliver()  # 500: retry in 1 s
    assert receiver.bodies == [] and t.evaluator.state.outbox[0].attempts == 1
    t._deliver()  # not yet due
    assert t.evaluator.state.outbox[0].attempts == 1
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    assert len(saved["outbox"]) == 2  # what is not delivered survives a restart
    now[0] += 1.1
    t._deliver()  # 500 again: retry in 2 s
    assert t.evaluator.state.outbox[0].attempts == 2
    now[0] += 1.8
    t._deliver()  # not yet due
    assert receiver.bodies == [] and t.evaluator.state.outbox[0].attempts == 2
    now[0] += 0.3
    t._deliver()
    assert [b["status"] for b in receiver.bodies] == ["firing", "resolved"]
    assert not t.evaluator.state.outbox and t.delivered == 2


def test_a_store_that_is_away_resolves_nothing(tmp_path: Path) -> None:
    rule = next(r for r in RULES if r.uid == "llmtap-error-rate")
    ev = Evaluator(lambda sql, fmt: b"{}", tmp_path / STATE_FILE, rules=[rule, *RULES])
    ev.state.instances["k"] = Instance(rule.uid, {"provider": "openai", "model": "m"}, "firing", 0.0)
    calls: list[str] = []

    def down(sql: str, fmt: str) -> bytes:
        calls.append(sql)
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    ev.query = down
    assert ev.evaluate(1_000.0) == []
    assert ev.state.instances["k"].state == "firing"  # not resolved by an outage
    assert len(calls) == 1  # and the other rules were not tried against a store that is away


HOSTILE_MODEL = "<!channel> <https://evil.example/login|Reset your key> &lt;!here&gt; *bold* `x` @here\x1b[2J\x07"


def _hostile_rule() -> AlertRule:
    return AlertRule("llmtap-test-hostile", "LLM <test> & rule", lambda t1: "SELECT 1", 1.0, "0s",
                     "{{ $labels.model }}/{{ $labels.feature }}: {{ $values.B }} of calls fail")  # fmt: skip


def _answer(model: bytes, feature: bytes) -> bytes:
    """The store's JSON answer, as bytes: a label may hold bytes that are not UTF-8 (a stored lone surrogate)."""
    meta = b'{"meta": [{"name": "model", "type": "String"}, {"name": "feature", "type": "String"}, '
    meta += b'{"name": "value", "type": "Float64"}], "data": [{"model": "'
    return meta + model + b'", "feature": "' + feature + b'", "value": 5}]}'


def _delivered(receiver: Receiver, tmp_path: Path, answer: bytes) -> dict[str, Any]:
    ev = Evaluator(lambda sql, fmt: answer, tmp_path / STATE_FILE, [_hostile_rule()])
    assert [e.status for e in ev.evaluate(1_000.0)] == ["firing"]
    receiver.fail = 0
    AlertThread(lambda sql, fmt: b"{}", tmp_path, receiver.url, 60)._deliver()  # from the saved state
    (body,) = receiver.bodies
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # strict consumers: no lone surrogate anywhere
    return body


def test_webhook_text_quotes_every_label_for_slack_and_plain_json(receiver: Receiver, tmp_path: Path) -> None:
    """#26: a model named ``<!channel> <https://evil.example/login|…>`` pinged the channel with a phishing link.
    In ``text`` every label is Slack inline code (no ``<``, ``>`` or ``&`` left to parse, no formatting, no link);
    ``labels`` and ``summary`` keep the values as plain text without control characters."""
    body = _delivered(receiver, tmp_path, _answer(json.dumps(HOSTILE_MODEL)[1:-1].encode(), b"summarize"))
    text = body["text"]
    assert "<" not in text and ">" not in text and "&lt;!channel&gt;" in text
    assert text.startswith("[FIRING] LLM &lt;test&gt; &amp; rule: `")
    outside = text.split("`")[0::2]  # what is not inside inline code
    assert not any(s in part for part in outside for s in ("evil.example", "@here", "*bold*", "!channel"))
    assert "\x1b" not in json.dumps(body) and "\\x1b[2J" in text
    assert body["labels"] == {"model": HOSTILE_MODEL.replace("\x1b", "\\x1b").replace("\x07", "\\x07"),
                              "feature": "summarize"}  # fmt: skip
    assert body["summary"].startswith("<!channel> <https://evil.example/login|Reset your key>")  # plain: as sent
    assert body["unfurl_links"] is False and body["unfurl_media"] is False


def test_a_label_that_is_not_utf8_fails_no_rule(receiver: Receiver, tmp_path: Path) -> None:
    """A stored lone surrogate (``"\\ud800"`` in a request's JSON) comes back as bytes that are not UTF-8: it reached
    the webhook as a lone surrogate, which strict JSON parsers refuse (the notification lost); now it is U+FFFD."""
    body = _delivered(receiver, tmp_path, _answer(b"gpt\xed\xa0\x80", b"sum"))
    assert body["labels"]["model"] == "gpt\ufffd\ufffd\ufffd" and "gpt\ufffd" in body["summary"]
