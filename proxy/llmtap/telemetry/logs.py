"""Logging: text or JSON lines, and the log sink that writes one ``llm call`` line per call."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ..record import CallRecord
from .redact import RedactingFilter

calls_log = logging.getLogger("llmtap.calls")


class LogSink:
    """A :class:`~llmtap.pipeline.RecordSink`: one structured line per call (logger ``llmtap.calls``).

    The line is written only in JSON mode (``--log-format json``); text mode keeps the logger quiet.
    """

    def emit(self, r: CallRecord) -> None:
        if calls_log.isEnabledFor(logging.INFO):
            fields = {k: v for k, v in r.to_dict().items() if k != "extra" and v not in (None, "")}
            calls_log.info("llm call", extra={"llm_call": fields})

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


class JsonFormatter(logging.Formatter):
    converter = time.gmtime  # type: ignore[assignment]  # UTC timestamps

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        call = getattr(record, "llm_call", None)
        if isinstance(call, dict):
            out.update(call)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:  # redacted by RedactingFilter
            out["exc"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())  # every line, whoever logs it (llmtap, mitmproxy, libraries)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("llmtap.calls").setLevel(logging.WARNING)  # per-call lines only in JSON mode
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)
