"""Alerts without Grafana: the rules of :mod:`llmtap.admin.queries` evaluated on the sidecar's store, firing
and resolved notifications POSTed to ``--alert-webhook`` (Slack-compatible JSON), state in the data dir."""

from __future__ import annotations

from .evaluator import STATE_FILE, Evaluator, Event
from .notifier import AlertThread, WebhookError, check_webhook_url

__all__ = ["STATE_FILE", "AlertThread", "Evaluator", "Event", "WebhookError", "check_webhook_url"]
