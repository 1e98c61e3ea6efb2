"""Token estimation, used only when the provider reported no usage (marked ``estimated``).

tiktoken fetches its BPE files on first use. The files are cached under the data
dir (``TIKTOKEN_CACHE_DIR``, which tiktoken reads itself: set at start by
:func:`llmtap.config.library_environment`); when they cannot be fetched (offline), estimation falls
back to a documented heuristic: ``ceil(len(utf8 bytes) / 4)``. The estimator used is
reported per call in the span attribute ``llmtap.usage_estimator``.

An encoding is loaded the first time a call needs it, not at start: each one holds
tens of MB, and a sidecar whose providers report usage never needs one. The load runs
in its own thread; the call that started it waits up to ``first_wait`` seconds (a
cached file loads well within that) and otherwise uses the heuristic, so a fetch that
hangs never stalls the pipeline.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger("llmtap.estimate")

HEURISTIC = "heuristic:bytes/4"


class Encoding(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...


def heuristic_count(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", "replace")) / 4) if text else 0


def encoding_name_for(model: str) -> str:
    """The tiktoken encoding for a model; o200k_base for recent and unknown models."""
    m = model.lower()
    if any(
        m.startswith(p) for p in ("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")
    ) and not m.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5")):
        return "cl100k_base"
    return "o200k_base"


def _tiktoken_loader(name: str) -> Encoding:
    import tiktoken

    return tiktoken.get_encoding(name)


class TokenEstimator:
    """Thread-safe; loads each encoding once, remembers failures (no retry storms offline)."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        loader: Callable[[str], Encoding] | None = None,
        first_wait: float = 3.0,
    ) -> None:
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
        self._loader = loader or _tiktoken_loader
        self.first_wait = first_wait
        self._encodings: dict[str, Encoding | None] = {}
        self._loading: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def _encoding(self, name: str) -> Encoding | None:
        """The encoding if loaded (or loaded within ``first_wait``), else ``None``: use the heuristic."""
        with self._lock:
            if name in self._encodings:
                return self._encodings[name]
            done = self._loading.get(name)
            if done is None:
                done = self._loading[name] = threading.Event()
                threading.Thread(target=self._load, args=(name, done), name="llmtap-tiktoken", daemon=True).start()
        done.wait(self.first_wait)
        with self._lock:
            return self._encodings.get(name)

    def _load(self, name: str, done: threading.Event) -> None:
        enc: Encoding | None
        try:
            enc = self._loader(name)
        except Exception as e:  # offline, corrupt cache, ...
            log.warning(
                "tiktoken encoding %s unavailable (%s); estimates use %s",
                name,
                str(e).splitlines()[0][:120],
                HEURISTIC,
            )
            enc = None
        with self._lock:
            self._encodings[name] = enc
        done.set()

    def count(self, text: str, model: str) -> tuple[int, str]:
        """(token count, estimator label)."""
        if not text:
            return 0, HEURISTIC
        name = encoding_name_for(model)
        enc = self._encoding(name)
        if enc is None:
            return heuristic_count(text), HEURISTIC
        try:
            return len(enc.encode_ordinary(text)), f"tiktoken:{name}"
        except Exception:
            return heuristic_count(text), HEURISTIC
