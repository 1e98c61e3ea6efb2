"""The alert rules of :mod:`llmtap.admin.queries` evaluated by the sidecar itself (``--alert-webhook``).

Each rule's query returns one row per instance (its string columns are the labels, ``value`` the
measure, ``baseline`` what it is compared with). An instance whose value crosses the threshold is
*pending* from the time its condition started to hold, judged on the stored history: the rule is
re-run at earlier times, back to its ``for:`` period, so a regression that has held for a day fires
on the first evaluation. Pending for ``for:`` → *firing*: one event. Condition gone → *resolved*:
one event. The state (firing and pending instances, and the events not yet delivered) lives in a
file in the data dir, so a restart neither repeats nor loses a notification. Label values are
whatever applications sent: the webhook's text quotes them for Slack, its JSON escapes their
control characters (:mod:`.slack`), and bytes that are not UTF-8 in the store's answer are read
as U+FFFD (a stored lone surrogate reached the webhook as one, which strict JSON parsers refuse).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..admin.queries import RULES, AlertRule
from ..admin.viewer_api import short, unreachable
from ..durations import parse_duration
from . import slack

log = logging.getLogger("llmtap.alerts")
QueryFn = Callable[[str, str], bytes]
STATE_FILE = "alerts-state.json"
HISTORY_STEPS = 6  # points at which a pending period is checked on the history (plus now)


@dataclass
class Instance:
    rule: str
    labels: dict[str, str]
    state: str  # "pending" or "firing"
    since: float  # when the condition started to hold (judged on history)
    value: float | None = None
    baseline: float | None = None
    fired_at: float | None = None


@dataclass
class Event:
    """A notification: ``status`` firing or resolved, delivered once (retried until it is)."""

    status: str
    rule: str
    title: str
    labels: dict[str, str]
    value: float | None
    baseline: float | None
    threshold: float
    summary: str  # plain: labels with control characters escaped
    at: float
    attempts: int = 0
    next_try: float = 0.0
    slack_summary: str = ""  # the summary with its labels as Slack inline code ('' in earlier state files)

    def payload(self) -> dict[str, Any]:
        """The webhook body: ``text`` is Slack markup with every label quoted as code; ``summary`` and ``labels``
        are plain text for other consumers (control characters escaped, valid Unicode)."""
        mark = "FIRING" if self.status == "firing" else "RESOLVED"
        quoted = ", ".join(f"{slack.text(k)}={slack.code(v)}" for k, v in self.labels.items() if v)
        said = self.slack_summary or slack.text(self.summary)
        text = f"[{mark}] {slack.text(self.title)}: {said}"
        if quoted:
            text += f" ({quoted})"
        return {
            "text": text,
            "summary": slack.plain(self.summary),
            "alert": self.rule,
            "status": self.status,
            "title": self.title,
            "labels": {slack.plain(k): slack.plain(v) for k, v in self.labels.items()},
            "value": self.value,
            "baseline": self.baseline,
            "threshold": self.threshold,
            "at": self.at,
            "unfurl_links": False,
            "unfurl_media": False,
        }


def summary(
    rule: AlertRule, labels: dict[str, str], value: float | None, quote: Callable[[str], str] = slack.plain
) -> str:
    """The rule's Grafana summary template with its labels (each through ``quote``) and value filled in."""

    def sub(m: re.Match[str]) -> str:
        kind, name = m.group(1), m.group(2)
        if kind == "labels":
            return quote(labels.get(name, ""))
        return _fmt(value)

    return re.sub(r"\{\{\s*\$(labels|values)\.(\w+)\s*\}\}", sub, rule.summary)


def _fmt(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:.3g}"


def _float(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


@dataclass
class State:
    path: Path
    instances: dict[str, Instance] = field(default_factory=dict)
    outbox: list[Event] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> State:
        st = cls(path)
        try:
            data = json.loads(path.read_text())
            st.instances = {k: Instance(**v) for k, v in data.get("instances", {}).items()}
            st.outbox = [Event(**e) for e in data.get("outbox", [])]
        except FileNotFoundError:
            pass
        except (ValueError, TypeError) as e:
            log.warning("alerts: ignoring unreadable state %s: %s", path, e)
        return st

    def save(self) -> None:
        data = {
            "version": 1,
            "instances": {k: vars(i) for k, i in self.instances.items()},
            "outbox": [vars(e) for e in self.outbox],
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def instance_key(rule: str, labels: dict[str, str]) -> str:
    return rule + "|" + json.dumps(labels, sort_keys=True)


class Evaluator:
    """Evaluates ``rules`` against the store through ``query``; events go to ``state.outbox``."""

    def __init__(
        self,
        query: QueryFn,
        state_path: Path,
        rules: Sequence[AlertRule] = RULES,
        started: float | None = None,
    ) -> None:
        self.query = query
        self.rules = list(rules)
        self.state = State.load(state_path)
        self.started = time.time() if started is None else started

    def _rows(self, rule: AlertRule, t: float) -> dict[str, tuple[dict[str, str], float | None, float | None]]:
        # a stored value that is not UTF-8 (a lone surrogate sent as JSON is kept so) is read as U+FFFD
        res = json.loads((self.query(rule.sql_at(t), "JSON") or b"{}").decode("utf-8", "replace"))
        names = [m["name"] for m in res.get("meta", []) if "String" in m["type"]]  # labels, as Grafana takes them
        out = {}
        for row in res.get("data", []):
            labels = {k: str(row[k]) for k in names}
            value = _float(row.get("value"))
            out[instance_key(rule.uid, labels)] = (labels, value, _float(row.get("baseline")))
        return out

    def evaluate(self, now: float | None = None) -> list[Event]:
        """One evaluation of every rule at ``now``; returns the events it queued."""
        now = time.time() if now is None else now
        events: list[Event] = []
        for rule in self.rules:
            if rule.needs_uptime_s and now - self.started < rule.needs_uptime_s:
                continue
            try:
                events += self._evaluate(rule, now)
            except Exception as e:  # a failing rule must not stop the others; a store that is away stops all
                if unreachable(e):
                    log.warning("alerts: the store does not answer (%s); next evaluation in one interval", short(e))
                    break
                log.warning("alerts: rule %s failed: %s", rule.uid, short(e))
        if events or self.state.instances:
            self.state.save()
        return events

    def _evaluate(self, rule: AlertRule, now: float) -> list[Event]:
        rows = self._rows(rule, now)
        hot = {k: r for k, r in rows.items() if rule.fires(r[1])}
        mine = {k: i for k, i in self.state.instances.items() if i.rule == rule.uid}
        hold = parse_duration(rule.for_)
        fresh = [k for k in hot if k not in mine]
        since = self._since(rule, fresh, now, hold) if fresh else {}
        events: list[Event] = []
        for k, (labels, value, baseline) in hot.items():
            inst = mine.get(k) or Instance(rule.uid, labels, "pending", since.get(k, now))
            inst.value, inst.baseline = value, baseline
            self.state.instances[k] = inst
            if inst.state == "pending" and now - inst.since >= hold:
                inst.state, inst.fired_at = "firing", now
                events.append(self._event("firing", rule, inst, now))
        for k, inst in mine.items():
            if k in hot:
                continue
            del self.state.instances[k]
            if inst.state == "firing":
                value, baseline = (rows[k][1], rows[k][2]) if k in rows else (None, inst.baseline)
                inst.value, inst.baseline = value, baseline
                events.append(self._event("resolved", rule, inst, now))
        self.state.outbox += events
        return events

    def _since(self, rule: AlertRule, keys: list[str], now: float, hold: float) -> dict[str, float]:
        """For instances whose condition holds now: since when it has held, looking back up to ``hold``."""
        since = dict.fromkeys(keys, now)
        if hold <= 0:
            return since
        step = hold / HISTORY_STEPS
        open_keys = set(keys)
        for j in range(1, HISTORY_STEPS + 1):
            t = now - j * step
            rows = self._rows(rule, t)
            for k in list(open_keys):
                r = rows.get(k)
                if r is not None and rule.fires(r[1]):
                    since[k] = t
                else:
                    open_keys.discard(k)
            if not open_keys:
                break
        return since

    def _event(self, status: str, rule: AlertRule, inst: Instance, now: float) -> Event:
        return Event(
            status,
            rule.uid,
            rule.title,
            inst.labels,
            inst.value,
            inst.baseline,
            rule.threshold,
            summary(rule, inst.labels, inst.value),
            now,
            slack_summary=summary(rule, inst.labels, inst.value, slack.code),
        )
