"""Token estimation, used only when the provider reported no usage (marked ``estimated``).

Counts are tiktoken's, exact and offline: the encodings llmtap's models map to (o200k_base, cl100k_base) ship
in the package (``encodings/``, OpenAI's files byte for byte: ``encodings/PROVENANCE.md``), and
:func:`seed_cache` puts them in tiktoken's cache (``TIKTOKEN_CACHE_DIR``, the data dir's unless the user set
one: :func:`llmtap.config.library_environment`) under the names tiktoken looks for (the SHA-1 of the file's
URL), so tiktoken loads them from disk and checks their hash itself: no download, ever, on the traffic path.
Only if that fails (a damaged install) does estimation fall back to the documented heuristic
``ceil(len(utf8 bytes) / 4)``, marked ``heuristic:bytes/4``. The estimator used is reported per call in the
span attribute ``llmtap.usage_estimator``.

An encoding is loaded the first time a call needs it, not at start: each one holds
tens of MB, and a sidecar whose providers report usage never needs one. The load runs
in its own thread; the call that started it waits up to ``first_wait`` seconds (a
cached file loads well within that) and otherwise uses the heuristic, so a load that
hangs never stalls the pipeline.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger("llmtap.estimate")

HEURISTIC = "heuristic:bytes/4"
SHIPPED = Path(__file__).with_name("encodings")
"""The encodings shipped with the package: ``<name>.tiktoken``."""
ENCODINGS_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
"""Where tiktoken fetches an encoding (``tiktoken_ext/openai_public.py``); its cache names a file by its SHA-1."""


def cache_name(name: str) -> str:
    """The file name tiktoken's cache gives encoding ``name`` (``tiktoken.load.read_file_cached``)."""
    return hashlib.sha1(ENCODINGS_URL.format(name=name).encode()).hexdigest()


def seed_cache(cache_dir: Path) -> list[str]:
    """Put the shipped encodings into tiktoken's cache ``cache_dir`` where one is missing or differs in size
    (written to a temporary name, then renamed: a reader never sees half a file). The names seeded."""
    seeded = []
    for src in sorted(SHIPPED.glob("*.tiktoken")):
        dst = cache_dir / cache_name(src.stem)
        if dst.exists() and dst.stat().st_size == src.stat().st_size:
            continue
        tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")
        tmp.write_bytes(src.read_bytes())
        tmp.replace(dst)
        seeded.append(src.stem)
    return seeded


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
            try:
                seed_cache(cache_dir)
            except OSError as e:  # a read-only cache: tiktoken may still have the files
                log.warning("could not seed tiktoken's cache %s with the shipped encodings: %s", cache_dir, e)
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
